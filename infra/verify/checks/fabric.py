"""fabric: does a pool with a GPU fabric get it end to end?

For every GPU pool whose outputs carry a `fabric` (set by the cloud backend):
- cluster side: what the cloud's verifier checks for the fabric kind its facts know (facts.yaml
  `fabrics`; verifier hook `check_fabric`, e.g. GKE's pod networks, NICs, Dataplane V2 and upgrade hold),
  with `check_fabric_daemonsets` here for the fabric's DaemonSets (facts `fabrics.<kind>.daemonSets`)
  running on the pool's machine type;
- pod side: each training pod on the pool carries the fabric's annotations, its native sidecars
  (init containers with restartPolicy Always), volumes, and in the trainer container the mounts and the
  pool's `podEnv`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.outputs import NodePoolInfo, PodFabric
from infra.verify import facts as F
from infra.verify.context import Context
from infra.verify.jobs import TrainingPod
from infra.verify.report import CheckResult

INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def check_fabric_daemonsets(
    ctx: Context, res: CheckResult, pool: NodePoolInfo, facts: Mapping[str, Any]
) -> None:
    """Each of the fabric's DaemonSets has a required node affinity onto the pool's machine types."""
    machines = set(pool.machine_types)
    for ref in facts.get("daemonSets") or []:
        ns, ds_name = ref.split("/")
        ds = ctx.object("DaemonSet", ns, ds_name)
        spec = ((ds.spec.get("template") or {}).get("spec") or {}) if ds else {}
        terms = (
            ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            or {}
        ).get("nodeSelectorTerms") or []
        on = {
            v
            for t in terms
            for e in t.get("matchExpressions") or []
            if e.get("key") == INSTANCE_TYPE
            for v in e.get("values") or []
        }
        if ds is None or not machines <= on:
            res.fail(f"pool {pool.name}: DaemonSet {ref} does not run on {sorted(machines)}", ref)


def _trainer(pod: TrainingPod) -> Mapping[str, Any]:
    containers = pod.pod_spec.get("containers") or [{}]
    gpu = [c for c in containers if ((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")]
    return (gpu or containers)[0]


def _pod_problems(pod: TrainingPod, pool: NodePoolInfo, fabric: PodFabric) -> list[str]:
    out: list[str] = []
    annotations = (pod.template.get("metadata") or {}).get("annotations") or {}
    out += [f"annotation {k}" for k, v in fabric.annotations.items() if annotations.get(k) != v]
    inits = {c.get("name"): c for c in pod.pod_spec.get("initContainers") or []}
    for sc in fabric.sidecars:
        got = inits.get(sc.get("name"))
        if got is None or got.get("restartPolicy") != "Always" or got.get("image") != sc.get("image"):
            out.append(f"native sidecar {sc.get('name')}")
    volumes = {v.get("name") for v in pod.pod_spec.get("volumes") or []}
    out += [f"volume {v['name']}" for v in fabric.volumes if v.get("name") not in volumes]
    trainer = _trainer(pod)
    mounts = {(m.get("name"), m.get("mountPath")) for m in trainer.get("volumeMounts") or []}
    out += [
        f"mount {m['mountPath']}"
        for m in fabric.volume_mounts
        if (m.get("name"), m.get("mountPath")) not in mounts
    ]
    env = {e.get("name"): e.get("value") for e in trainer.get("env") or []}
    out += [f"env {k}" for k, v in pool.pod_env.items() if env.get(k) != v]
    return out


def run(ctx: Context) -> CheckResult:
    res = CheckResult("fabric")
    pools = [(p, p.fabric) for p in ctx.gpu_pools() if p.fabric]
    if not pools:
        res.skipped = "no pool with a GPU fabric"
        return res
    known = F.cloud(ctx.platform.cloud).get("fabrics") or {}
    for pool, fabric in pools:
        kind = fabric.kind
        facts = known.get(kind)
        if facts is None:
            res.note(f"pool {pool.name}: no cluster-side facts for fabric {kind} on {ctx.platform.cloud}")
        elif not ctx.job_only:
            ctx.verifier.check_fabric(ctx, res, pool, facts)
        for pod in (p for p in ctx.pods if p.pool == pool.name):
            missing = _pod_problems(pod, pool, fabric)
            if missing:
                res.fail(
                    f"team {pod.team} pod on pool {pool.name} lacks its {kind} fabric: {', '.join(missing)}",
                    f"pool {pool.name}",
                )
            res.examined.append(f"pod {pod.team}/{pool.name}")
    return res
