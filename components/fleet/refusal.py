"""A fleet whose workers cannot tell each other's jobs apart is refused before anything deploys.

MultiKueue runs a job on the first worker whose Kueue admits it (kubernetes-sigs/kueue@v0.19.2
site/content/en/docs/concepts/multikueue.md). Kueue admits on quota and flavors, and compares the job's
node selectors only on the keys the flavor's `nodeLabels` carry (pkg/scheduler/flavorassigner/
flavorassigner.go flavorSelector). A worker whose flavors carry none of the keys another worker's job
selects admits it, and its pods stay Pending there: e.g. an existing cluster whose pool is selected by
`node.kubernetes.io/instance-type` and has no topology levels admits a GKE job selecting
`cloud.google.com/gke-accelerator`, and the clouds' flavors admit its jobs. What refuses (the same rules as
infra/verify/checks/fleet_refusal.py, on the platforms' outputs): a TAS request on a flavor without a
Topology or none on a flavor with one (tas_flavorassigner.go), a selected key the flavor carries with
another value, and on a Topology ending at kubernetes.io/hostname, no node of the flavor's pools that can
carry the selected labels (TAS matches them against the nodes: pkg/cache/scheduler/tas_flavor_snapshot.go).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from components.fleet.model import Worker
from components.incluster.kueue_objects import Flavor, flavors
from components.incluster.placement import HOSTNAME_LABEL, flavor_of

OURS = "trainplane.dev/"


def _node_may_match(w: Worker, f: Flavor, selector: Mapping[str, str]) -> bool:
    pools = [p for p in w.platform.node_pools if p.gpu and flavor_of(p) == f.name]
    for p in pools:
        if all(
            p.labels.get(k) == v if (k in p.labels or k.startswith(OURS)) else True
            for k, v in selector.items()
        ):
            return True
    return False


def admitting_flavor(w: Worker, selector: Mapping[str, str], tas: bool) -> Flavor | None:
    """The first of the worker's flavors whose Kueue admits a job selecting `selector` (with a topology
    request when `tas`); None when all refuse it."""
    fl = flavors(list(w.platform.node_pools))
    tas_only = bool(fl) and all(f.levels for f in fl)
    for f in fl:
        if (tas and not f.levels) or (not tas and f.levels and not tas_only):
            continue
        if any(k in f.node_labels and f.node_labels[k] != v for k, v in selector.items()):
            continue
        if f.levels and f.levels[-1] == HOSTNAME_LABEL and not _node_may_match(w, f, selector):
            continue
        return f
    return None


def unrefused(workers: Sequence[Worker]) -> list[str]:
    """One line per (worker, other worker's flavor) where the worker would admit the least constrained job
    of that flavor (it selects exactly the flavor's node labels; a job on fewer pools selects more)."""
    problems = []
    for v in workers:
        for fv in flavors(list(v.platform.node_pools)):
            for w in workers:
                if w.name == v.name:
                    continue
                won = admitting_flavor(w, fv.node_labels, bool(fv.levels))
                if won is None:
                    continue
                problems.append(
                    f"fleet.workers[{w.index}]: worker {w.name!r} ({w.stack}) would admit the jobs of worker "
                    f"{v.name!r}'s flavor {fv.name} on its flavor {won.name}, whose node labels "
                    f"[{', '.join(sorted(won.node_labels))}] those jobs do not select otherwise, and their pods "
                    f"would stay Pending there; give {w.stack}'s pools topologyLevels (Kueue then matches jobs "
                    "against its nodes) or a selector on a label the other workers' jobs select with another value"
                )
    return problems
