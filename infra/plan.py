"""Summarise an offline run of the program: resource tree, counts, GPUs, cost per hour, critical path.

Everything here works on the recorded `RunResult` plus the validated spec, so the numbers shown are the
ones the program would really send to the cloud, not a second model of it. The cost is infra/plan_cost.py's,
the critical path infra/plan_path.py's; infra/plan_output.py prints the summary.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any

from pydantic.alias_generators import to_camel

from components.spec import JobSpec, PlatformSpec
from infra.mockcloud import RunResult
from infra.plan_cost import Cost, PoolCost, estimate_cost, job_cost
from infra.plan_path import PathStep, critical_path

__all__ = ["Cost", "PathStep", "PlanSummary", "PoolCost", "critical_path", "estimate_cost", "job_cost"]


def resource_tree(result: RunResult) -> list[dict[str, Any]]:
    """Components and resources nested by parent, siblings by type then name.

    Not in registration order: resources waiting on outputs register whenever their inputs resolve, so
    that order changes from run to run and two plans of one stack would not diff."""
    nodes: dict[str, dict[str, Any]] = {
        r.urn: {"name": r.name, "type": r.type, "custom": r.custom, "children": []} for r in result.resources
    }
    roots: list[dict[str, Any]] = []
    for r in sorted(result.resources, key=lambda r: (r.type, r.name, r.urn)):
        parent = nodes.get(r.parent or "")
        (parent["children"] if parent else roots).append(nodes[r.urn])
    return roots


def camel(value: Any) -> Any:
    """Dataclass fields (snake_case) as the JSON keys every command uses: camelCase, like the config."""
    if isinstance(value, dict):
        return {to_camel(k): camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


@dataclass(frozen=True)
class IdlePolicy:
    """One team's idle policy as `trainplane plan` shows it (components/spec IdleSpec)."""

    team: str
    gpu_util_below: float | None = None  # None: no idle policy
    window: str | None = None
    action: str | None = None
    exempt_labels: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        # exemptions as "key=value" strings: label keys are the user's, not JSON keys to camel-case
        return {
            "team": self.team,
            "gpuUtilBelow": self.gpu_util_below,
            "for": self.window,
            "action": self.action,
            "exemptLabels": [f"{k}={v}" for k, v in self.exempt_labels.items()],
        }


@dataclass
class PlanSummary:
    stack: str
    cloud: str
    resource_count: int
    counts: dict[str, int]
    tree: list[dict[str, Any]]
    gpus_min: int
    gpus_max: int
    cost: Cost
    critical_path: list[PathStep]
    outputs: dict[str, Any]
    # Each team's idle policy (teams[].idle), in spec order; `policy` None: the team has none.
    idle: list[IdlePolicy] = field(default_factory=list)
    # What the stack's config leaves to be filled in (a job image on a placeholder registry), one line each.
    notes: list[str] = field(default_factory=list)

    @property
    def critical_seconds(self) -> float:
        return sum(s.seconds for s in self.critical_path)

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "cloud": self.cloud,
            "resources": self.resource_count,
            "counts": self.counts,
            "tree": self.tree,
            "gpus": {"min": self.gpus_min, "max": self.gpus_max},
            "cost": camel(asdict(self.cost)),
            "criticalPath": {
                "seconds": self.critical_seconds,
                "steps": [asdict(s) for s in self.critical_path],
            },
            "outputs": self.outputs,
            "idlePolicies": [i.as_json() for i in self.idle],
            "notes": self.notes,
        }


def summarize(result: RunResult, cloud: str, gpus: tuple[int, int], cost: Cost) -> PlanSummary:
    customs = [r for r in result.resources if r.custom]
    outputs = {k: ("[secret]" if k in result.secret_outputs else v) for k, v in result.outputs.items()}
    return PlanSummary(
        stack=result.stack,
        cloud=cloud,
        resource_count=len(customs),
        counts=dict(sorted(Counter(r.type for r in customs).items())),
        tree=resource_tree(result),
        gpus_min=gpus[0],
        gpus_max=gpus[1],
        cost=cost,
        critical_path=critical_path(result.resources),
        outputs=outputs,
    )


def idle_policies(spec: PlatformSpec) -> list[IdlePolicy]:
    return [
        IdlePolicy(t.name)
        if t.idle is None
        else IdlePolicy(t.name, t.idle.gpu_util_below, t.idle.for_, t.idle.action, dict(t.idle.exempt_labels))
        for t in spec.teams
    ]


def unset_controller_note(result: RunResult) -> str | None:
    """One line naming the controllers whose pods name no image (platform.images.controller unset:
    trainplane publishes none), or None. verify's egress check notes the same."""
    from components.spec.images import CONTROLLER_IMAGE_UNSET

    unset = sorted(
        f"Deployment {r.inputs.get('metadata', {}).get('namespace', 'default')}/{r.inputs.get('metadata', {}).get('name', r.name)}"
        for r in result.resources
        if r.type == "kubernetes:apps/v1:Deployment"
        and any(
            c.get("image") == CONTROLLER_IMAGE_UNSET
            for c in r.inputs.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
        )
    )
    if not unset:
        return None
    return (
        f"platform.images.controller: not set, so {', '.join(unset)} would not start (ImagePullBackOff on "
        f"{CONTROLLER_IMAGE_UNSET}); build the controller image (`make image`), push it and set it by digest "
        '(docs/in-cluster.md "The controller image")'
    )


def summarize_platform(result: RunResult, spec: PlatformSpec, today: date | None = None) -> PlanSummary:
    summary = summarize(result, spec.cloud, (spec.min_gpus(), spec.max_gpus()), estimate_cost(spec, today))
    summary.idle = idle_policies(spec)
    summary.notes = [n for n in [unset_controller_note(result)] if n]
    return summary


def summarize_job(
    result: RunResult,
    job: JobSpec,
    cloud: str,
    platform: PlatformSpec | None,
    today: date | None = None,
    outputs: dict[str, Any] | None = None,
) -> PlanSummary:
    """`outputs`: the platform stack's outputs, for the job's rack line (a rack-scale pool)."""
    from components.placeholder_images import placeholder_note

    gpus = (job.nodes.min * job.gpus_per_node, job.nodes.max * job.gpus_per_node)
    summary = summarize(result, cloud, gpus, job_cost(job, platform, today))
    summary.notes = [n for n in [placeholder_note(job.image, "job.image"), _rack_note(job, outputs)] if n]
    return summary


def _rack_note(job: JobSpec, outputs: dict[str, Any] | None) -> str | None:
    if not outputs or not any(p.get("rack") for p in outputs.get("nodePools") or []):
        return None
    from components.incluster.compute_domain import rack_note
    from components.outputs import PlatformOutputs
    from components.stack_outputs import READ_KEYS

    return rack_note(
        job, PlatformOutputs.model_validate({k: v for k, v in outputs.items() if k in READ_KEYS})
    )
