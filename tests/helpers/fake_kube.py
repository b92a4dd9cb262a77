"""A fake Kubernetes API with state, enough for a real kopf operator (and any client) to run against:
the routes object of a FakeApiServer (fake_k8s.py).

- discovery: /version, /api, /api/v1 (nodes, pods, events, namespaces and their subresources), /apis;
- list (labelSelector k=v[,k=v], fieldSelector spec.nodeName=, metadata.name=) with the list's
  resourceVersion, and watch (?watch=true&resourceVersion=N) streaming every change after N, then
  waiting for new ones until timeoutSeconds or the server closes;
- get, create (generateName), delete; patch as JSON patch (test/add/replace/remove), merge patch and
  strategic merge patch (lists of conditions merge by `type`, as the Kubernetes types declare with
  patchMergeKey; other lists are replaced); `/status` patches change only the status;
- pods/eviction (policy/v1): the pod is deleted and recorded in `evictions`; with `graceful` the pod
  stays, terminating (deletionTimestamp and deletionGracePeriodSeconds set, as the API server does for a
  pod with a grace period), until the test removes it as the kubelet would once its containers exited;
- Prometheus' instant query at /api/v1/query, answered from `prometheus` (a list of samples);
- JobSets, batch/v1 Jobs, Kueue Workloads and LocalQueues (namespaced) and ClusterQueues (cluster-scoped)
  under /apis/GROUP/VERSION (not in discovery).

Every write bumps one resourceVersion counter, as etcd's revision does.
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from tests.helpers.fake_k8s import FakeApiServer, Request

# (plural, kind, namespaced, subresources)
CORE = [
    ("nodes", "Node", False, ("status",)),
    ("pods", "Pod", True, ("status", "eviction")),
    ("events", "Event", True, ()),
    ("namespaces", "Namespace", False, ()),
]
# Custom and non-core resources served under /apis/GROUP/VERSION (lists, get, patch; no discovery, so
# kopf, which discovers what it watches, still sees only the core kinds): (plural, kind, apiVersion,
# namespaced).
GROUPED = [
    ("jobsets", "JobSet", "jobset.x-k8s.io/v1alpha2", True),
    ("jobs", "Job", "batch/v1", True),
    ("workloads", "Workload", "kueue.x-k8s.io/v1beta2", True),
    ("localqueues", "LocalQueue", "kueue.x-k8s.io/v1beta2", True),
    ("clusterqueues", "ClusterQueue", "kueue.x-k8s.io/v1beta2", False),
]
KINDS = {plural: (kind, namespaced) for plural, kind, namespaced, _ in CORE}
KINDS.update({plural: (kind, namespaced) for plural, kind, _, namespaced in GROUPED})
API_VERSIONS = {plural: api for plural, _, api, _ in GROUPED}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def json_patch(obj: dict, ops: list[dict]) -> dict | None:
    """RFC 6902 on a copy; None when a `test` fails."""
    out = copy.deepcopy(obj)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        *parents, last = parts
        cur: Any = out
        for key in parents:
            cur = cur[int(key)] if isinstance(cur, list) else cur[key]
        if op["op"] == "test":
            if (cur[int(last)] if isinstance(cur, list) else cur.get(last)) != op["value"]:
                return None
        elif op["op"] in ("add", "replace"):
            if isinstance(cur, list):
                cur.insert(len(cur) if last == "-" else int(last), op["value"])
            else:
                cur[last] = op["value"]
        elif op["op"] == "remove":
            del cur[int(last) if isinstance(cur, list) else last]
        else:
            raise ValueError(op)
    return out


def merge_patch(obj: Any, patch: Any, strategic: bool = False) -> Any:
    """RFC 7386 merge patch; `strategic` merges lists of conditions by `type` (NodeCondition,
    PodCondition: patchMergeKey=type in k8s.io/api core/v1 types.go)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(obj) if isinstance(obj, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif strategic and key == "conditions" and isinstance(value, list):
            merged = {c.get("type"): c for c in out.get(key) or []}
            for cond in value:
                merged[cond["type"]] = merge_patch(merged.get(cond["type"], {}), cond, strategic)
            out[key] = list(merged.values())
        else:
            out[key] = merge_patch(out.get(key), value, strategic)
    return out


def _selected(obj: dict, query: dict[str, list[str]]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, (query.get("labelSelector") or [""])[0].split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    for term in filter(None, (query.get("fieldSelector") or [""])[0].split(",")):
        key, _, value = term.partition("=")
        cur: Any = obj
        for part in key.split("."):
            cur = (cur or {}).get(part) if isinstance(cur, dict) else None
        if (cur or "") != value:
            return False
    return True


class FakeKube:
    """The store: objects by (plural, namespace, name); `log` of (resourceVersion, type, plural, object)."""

    def __init__(
        self, objects: list[dict] = (), prometheus: list[dict] | None = None, graceful: bool = False
    ) -> None:
        self.graceful = graceful
        self.revision = 0
        self.store: dict[tuple[str, str, str], dict] = {}
        self.log: list[tuple[int, str, str, dict]] = []
        self.evictions: list[tuple[str, str]] = []
        self.prometheus = prometheus or []
        self.changed = threading.Condition()
        self.closed = False
        for obj in objects:
            self.create(self.plural_of(obj), obj)
        self.server = FakeApiServer(self)
        self.url = self.server.url

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()
        self.server.close()

    @staticmethod
    def plural_of(obj: dict) -> str:
        return next(p for p, (kind, _) in KINDS.items() if kind == obj["kind"])

    # ---- the store ---------------------------------------------------------------------------------

    def objects(self, plural: str, namespace: str | None = None) -> list[dict]:
        with self.changed:
            return [
                copy.deepcopy(o)
                for (p, ns, _), o in self.store.items()
                if p == plural and namespace in (None, ns)
            ]

    def get_obj(self, plural: str, name: str, namespace: str = "") -> dict | None:
        with self.changed:
            obj = self.store.get((plural, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def _write(self, plural: str, obj: dict, kind: str) -> dict:
        self.revision += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.revision)
        key = (plural, meta.get("namespace", ""), meta["name"])
        if kind == "DELETED":
            self.store.pop(key, None)
        else:
            self.store[key] = obj
        self.log.append((self.revision, kind, plural, copy.deepcopy(obj)))
        self.changed.notify_all()
        return copy.deepcopy(obj)

    def create(self, plural: str, obj: dict) -> dict:
        obj = copy.deepcopy(obj)
        kind, namespaced = KINDS[plural]
        obj.setdefault("apiVersion", API_VERSIONS.get(plural, "v1"))
        obj.setdefault("kind", kind)
        meta = obj.setdefault("metadata", {})
        if "name" not in meta:
            meta["name"] = meta.pop("generateName", "obj-") + uuid.uuid4().hex[:5]
        if not namespaced:
            meta.pop("namespace", None)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        with self.changed:
            return self._write(plural, obj, "ADDED")

    def update(self, plural: str, name: str, namespace: str, fn: Any) -> dict | None:
        """Apply fn(current) -> new (or None to refuse) under the lock; the write's copy or None."""
        with self.changed:
            current = self.store.get((plural, namespace, name))
            if current is None:
                return None
            new = fn(copy.deepcopy(current))
            return None if new is None else self._write(plural, new, "MODIFIED")

    def remove(self, plural: str, name: str, namespace: str = "") -> dict | None:
        with self.changed:
            obj = self.store.get((plural, namespace, name))
            return None if obj is None else self._write(plural, copy.deepcopy(obj), "DELETED")

    # ---- HTTP --------------------------------------------------------------------------------------

    @staticmethod
    def parse(path: str) -> tuple[str, str, str, str] | None:
        """/api/v1[/namespaces/NS]/PLURAL[/NAME[/SUB]] (or /apis/GROUP/VERSION/...) -> (plural, namespace,
        name, sub)."""
        parts = path.strip("/").split("/")
        if parts[:1] == ["apis"] and len(parts) >= 4:
            api, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        elif parts[:2] == ["api", "v1"] and len(parts) >= 3:
            api, rest = "v1", parts[2:]
        else:
            return None
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        plural, name, sub = rest[0], *[*rest[1:3], "", ""][:2]
        return (
            (plural, namespace, name, sub)
            if plural in KINDS and API_VERSIONS.get(plural, "v1") == api
            else None
        )

    def static(self, path: str) -> dict | None:
        """Prometheus' query and API discovery."""
        return {
            "/api/v1/query": {
                "status": "success",
                "data": {"resultType": "vector", "result": self.prometheus},
            },
            "/version": {"major": "1", "minor": "34", "gitVersion": "v1.34.0"},
            "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
            "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
            "/api/v1": self.discovery(),
        }.get(path)

    def get(self, req: Request) -> tuple[int, Any]:
        fixed = self.static(req.path)
        if fixed is not None:
            return 200, fixed
        parsed = self.parse(req.path)
        if parsed is None:
            return 404, {"kind": "Status", "code": 404, "reason": "NotFound"}
        plural, namespace, name, _ = parsed
        if name:
            obj = self.get_obj(plural, name, namespace)
            return (200, obj) if obj else (404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        if req.query.get("watch") == ["true"]:
            return 200, self.watch(plural, namespace, req.query)
        with self.changed:
            items = [o for o in self.objects(plural, namespace or None) if _selected(o, req.query)]
            return 200, {
                "kind": KINDS[plural][0] + "List",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self.revision)},
                "items": items,
            }

    def watch(self, plural: str, namespace: str, query: dict[str, list[str]]) -> Iterator[dict]:
        since = int((query.get("resourceVersion") or ["0"])[0] or 0)
        deadline = time.monotonic() + float((query.get("timeoutSeconds") or ["3600"])[0])
        while True:
            with self.changed:
                batch = [
                    (rv, kind, obj)
                    for rv, kind, p, obj in self.log
                    if rv > since and p == plural and namespace in ("", obj["metadata"].get("namespace", ""))
                ]
                if not batch:
                    if self.closed or time.monotonic() >= deadline:
                        return
                    self.changed.wait(timeout=0.5)
                    continue
            for rv, kind, obj in batch:
                since = rv
                if _selected(obj, query):
                    yield {"type": kind, "object": obj}

    def discovery(self) -> dict:
        resources = []
        for plural, kind, namespaced, subs in CORE:
            resources.append(
                {
                    "name": plural,
                    "singularName": kind.lower(),
                    "namespaced": namespaced,
                    "kind": kind,
                    "verbs": VERBS,
                }
            )
            for sub in subs:
                verbs = ["create"] if sub == "eviction" else ["get", "patch", "update"]
                resources.append(
                    {
                        "name": f"{plural}/{sub}",
                        "singularName": "",
                        "namespaced": namespaced,
                        "kind": kind,
                        "verbs": verbs,
                    }
                )
        return {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources}

    def patch(self, req: Request) -> tuple[int, Any]:
        parsed = self.parse(req.path)
        if parsed is None or not parsed[2]:
            return 404, {"kind": "Status", "code": 404}
        plural, namespace, name, sub = parsed
        ctype = req.headers.get("Content-Type", "").split(";")[0]

        def apply(current: dict) -> dict | None:
            if ctype == "application/json-patch+json":
                new = json_patch(current, req.body)
            else:
                new = merge_patch(
                    current, req.body, strategic=ctype == "application/strategic-merge-patch+json"
                )
            if new is not None and sub == "status":  # the status subresource changes the status only
                new = {**current, "status": new.get("status", {})}
            return new

        result = self.update(plural, name, namespace, apply)
        if result is None:
            if self.get_obj(plural, name, namespace) is None:
                return 404, {"kind": "Status", "code": 404, "reason": "NotFound"}
            return 422, {
                "kind": "Status",
                "code": 422,
                "reason": "Invalid",
                "message": "test operation failed",
            }
        return 200, result

    def post(self, req: Request) -> tuple[int, Any]:
        parsed = self.parse(req.path)
        if parsed is None:
            return 404, {"kind": "Status", "code": 404}
        plural, namespace, name, sub = parsed
        if sub == "eviction":
            if self.graceful:
                done = self.update(plural, name, namespace, self._terminating)
            else:
                done = self.remove(plural, name, namespace)
            if done is None:
                return 404, {"kind": "Status", "code": 404, "reason": "NotFound"}
            self.evictions.append((namespace, name))
            return 201, {"kind": "Status", "status": "Success"}
        body = dict(req.body)
        if namespace:
            body["metadata"] = {**body.get("metadata", {}), "namespace": namespace}
        return 201, self.create(plural, body)

    @staticmethod
    def _terminating(pod: dict) -> dict:
        meta = pod["metadata"]
        meta.setdefault("deletionTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        meta.setdefault("deletionGracePeriodSeconds", pod["spec"].get("terminationGracePeriodSeconds", 30))
        return pod

    def delete(self, req: Request) -> tuple[int, Any]:
        parsed = self.parse(req.path)
        if parsed is None or not parsed[2]:
            return 404, {}
        obj = self.remove(parsed[0], parsed[2], parsed[1])
        return (200, obj) if obj else (404, {"kind": "Status", "code": 404})

    def events(self, reason: str | None = None) -> list[dict]:
        return [e for e in self.objects("events") if reason is None or e.get("reason") == reason]
