"""The one fake Kubernetes API server of the tests: a loopback HTTP server (ThreadingHTTPServer) that
hands each request to a routes object and writes the kubeconfig that points a client at it.

A routes object has a method per HTTP verb it answers (`get`, `post`, `patch`, `delete`), each taking a
`Request` and returning (status, body): a dict is sent as JSON, a str as text, an iterator as a watch
stream (one JSON event per line). A verb without a method is answered 405. Every request is recorded in
`FakeApiServer.requests` (method, path).

Routes of the tests: `FakeCluster` below (nodes, diagnostic pods, Prometheus' query API and patchable
objects, for the stdlib in-cluster controllers); `FakeKube` in fake_kube.py (a resource store with
discovery, list + watch by resourceVersion, JSON/merge/strategic patches, subresources: what a kopf
operator needs); tests/integration/infra/verify/test_verify_live.py (read-only lists for
`verify --kubeconfig`) and tests/integration/infra/test_nccl_test.py (JobSets, pods and logs for `nccl-test`)
bring their own.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Any  # http.client.HTTPMessage
    body: Any = None  # the JSON body of a POST/PATCH/PUT, if any


@dataclass
class FakeApiServer:
    """Serves `routes` on 127.0.0.1 (a free port) from a daemon thread until `close()`."""

    routes: Any
    requests: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                url = urllib.parse.urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                req = Request(self.command, url.path, urllib.parse.parse_qs(url.query), self.headers, body)
                server.requests.append((self.command, url.path))
                answer = getattr(server.routes, self.command.lower(), None)
                code, out = answer(req) if answer else (405, {"reason": "MethodNotAllowed"})
                if isinstance(out, Iterator):
                    # A watch: one JSON object per line until the stream ends; HTTP/1.0, so the end of
                    # the body is the connection's close (as a client reads a watch).
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    try:
                        for item in out:
                            self.wfile.write(json.dumps(item).encode() + b"\n")
                            self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
                data = (out if isinstance(out, str) else json.dumps(out)).encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain" if isinstance(out, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

            def log_message(self, *args: Any) -> None:  # keep pytest output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kubeconfig(self, path: Path) -> str:
        """Write a kubeconfig for this server (token auth, current context) to `path`; return its path."""
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "viewer", "user": {"token": "read-only"}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "viewer"}}],
                    "current-context": "fake",
                }
            )
        )
        return str(path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def apply_json_patch(obj: dict, patch: list) -> bool:
    """Apply [test resourceVersion, replace/add ...] to `obj` in place as the API server does; False when
    the test fails (the object changed since it was read)."""
    test, *ops = patch
    if test != {
        "op": "test",
        "path": "/metadata/resourceVersion",
        "value": obj["metadata"]["resourceVersion"],
    }:
        return False
    for op in ops:
        *parents, last = op["path"].strip("/").split("/")
        cur = obj
        for key in parents:
            cur = cur[int(key)] if isinstance(cur, list) else cur[key]
        cur[last] = op["value"]
    obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
    return True


class FakeCluster:
    """Nodes, diagnostic pods and Prometheus behind one FakeApiServer; `objects` (API path -> object) are
    served as they are and take JSON patches guarded by their resourceVersion (other controllers' tests,
    e.g. test_block_window.py)."""

    def __init__(self, nodes, pods, xids, changed=(), objects=None):
        self.objects = objects or {}
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        # Nodes another writer changes after the controller listed them (their resourceVersion moves on).
        self.current = json.loads(json.dumps(self.nodes))
        for name in changed:
            self.current[name]["metadata"]["resourceVersion"] = "42"
        self.pods, self.xids = pods, xids
        self.patches: dict[str, list] = {}
        self.auth: set[str] = set()
        self.server = FakeApiServer(self)
        self.url = self.server.url

    def get(self, req: Request) -> tuple[int, dict]:
        if req.path == "/api/v1/query":
            result = [{"metric": {"node": n, "gpu": g}, "value": [0, str(x)]} for n, g, x in self.xids]
            return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}
        self.auth.add(req.headers.get("Authorization", ""))
        if req.path == "/api/v1/nodes":
            return 200, {"items": list(self.nodes.values())}
        if req.path == "/api/v1/namespaces/gpu-operator/pods":
            assert req.query["labelSelector"] == ["app=trainplane-gpu-diag"]
            return 200, {"items": self.pods}
        return self.get_object(req.path)

    def patch(self, req: Request) -> tuple[int, dict]:
        name = req.path.rsplit("/", 1)[-1]
        assert req.headers["Content-Type"] == "application/json-patch+json"
        patch = req.body
        if req.path in self.objects:
            return self.patch_object(req.path, patch)
        test, add = patch
        current = self.current[name]
        version = current["metadata"]["resourceVersion"]
        if test != {"op": "test", "path": "/metadata/resourceVersion", "value": version}:
            return 422, {"reason": "Invalid", "message": "test operation failed"}
        self.patches[name] = add["value"]
        return 200, current

    def get_object(self, path: str) -> tuple[int, dict]:
        return (200, self.objects[path]) if path in self.objects else (404, {})

    def patch_object(self, path: str, patch: list) -> tuple[int, dict]:
        if not apply_json_patch(self.objects[path], patch):
            return 422, {"reason": "Invalid", "message": "test operation failed"}
        self.patches.setdefault(path, []).append(patch[1:])
        return 200, self.objects[path]
