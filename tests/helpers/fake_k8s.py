"""fake_k8s: helpers shared by the tests (moved from tests/integration/test_gpu_health.py)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
    """Nodes, diagnostic pods and Prometheus behind one loopback HTTP server; `objects` (API path -> object)
    are served as they are and take JSON patches guarded by their resourceVersion (other controllers'
    tests, e.g. test_block_window.py)."""

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
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def reply(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                url = urllib.parse.urlparse(self.path)
                if url.path == "/api/v1/query":
                    result = [
                        {"metric": {"node": n, "gpu": g}, "value": [0, str(x)]} for n, g, x in cluster.xids
                    ]
                    return self.reply(
                        200, {"status": "success", "data": {"resultType": "vector", "result": result}}
                    )
                cluster.auth.add(self.headers.get("Authorization", ""))
                if url.path == "/api/v1/nodes":
                    return self.reply(200, {"items": list(cluster.nodes.values())})
                if url.path == "/api/v1/namespaces/gpu-operator/pods":
                    assert urllib.parse.parse_qs(url.query)["labelSelector"] == ["app=trainplane-gpu-diag"]
                    return self.reply(200, {"items": cluster.pods})
                self.reply(*cluster.get_object(url.path))

            def do_PATCH(self):
                name = self.path.rsplit("/", 1)[-1]
                assert self.headers["Content-Type"] == "application/json-patch+json"
                patch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path in cluster.objects:
                    return self.reply(*cluster.patch_object(self.path, patch))
                test, add = patch
                current = cluster.current[name]
                version = current["metadata"]["resourceVersion"]
                if test != {"op": "test", "path": "/metadata/resourceVersion", "value": version}:
                    return self.reply(422, {"reason": "Invalid", "message": "test operation failed"})
                cluster.patches[name] = add["value"]
                self.reply(200, current)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def get_object(self, path: str) -> tuple[int, dict]:
        return (200, self.objects[path]) if path in self.objects else (404, {})

    def patch_object(self, path: str, patch: list) -> tuple[int, dict]:
        if not apply_json_patch(self.objects[path], patch):
            return 422, {"reason": "Invalid", "message": "test operation failed"}
        self.patches.setdefault(path, []).append(patch[1:])
        return 200, self.objects[path]
