"""What every check looks at: the plan, its platform, the chart model and the training pods."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from infra.verify import facts as F
from infra.verify.charts import ChartModel, model
from infra.verify.jobs import TrainingPod, training_pods
from infra.verify.model import K8sObject, Plan, cloud_backend
from infra.verify.verifiers import cloud_verifier

if TYPE_CHECKING:
    from components.backends import CloudBackend
    from components.outputs import NodePoolInfo, TeamOutput
    from infra.verify.verifier import CloudVerifier

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"


@dataclass
class Context:
    plan: Plan

    @property
    def platform(self) -> Plan:
        return self.plan.platform or self.plan

    @property
    def fleet(self) -> Any:
        """A fleet stack's FleetPlan (infra/verify/fleet_model.py); None for a platform or job stack."""
        return self.plan.fleet

    @property
    def backend(self) -> CloudBackend:
        """The platform's cloud backend: what the library knows of the cloud (components/backends.py)."""
        return cloud_backend(self.platform)

    @property
    def verifier(self) -> CloudVerifier:
        """The platform's cloud verifier: what a check asks about the cloud (infra/verify/verifiers.py)."""
        return cloud_verifier(self.platform)

    @property
    def job_only(self) -> bool:
        """A job stack: check its own pods against the platform, not the platform itself."""
        return self.plan.kind == "job"

    @cached_property
    def charts(self) -> ChartModel:
        return model(self.platform)

    @cached_property
    def _pods(self) -> tuple[list[TrainingPod], list[str]]:
        return training_pods(self.plan)

    @property
    def pods(self) -> list[TrainingPod]:
        return self._pods[0]

    @property
    def pod_problems(self) -> list[str]:
        return self._pods[1]

    @cached_property
    def network_policies(self) -> list[dict[str, Any]]:
        objs = self.platform.objects("NetworkPolicy")
        if self.plan is not self.platform:
            objs += self.plan.objects("NetworkPolicy")
        return [dict(o.body) for o in objs]

    def team(self, name: str) -> TeamOutput | None:
        return self.platform.platform_outputs.team(name) if self.platform.platform_outputs else None

    def pool(self, name: str) -> NodePoolInfo | None:
        return self.platform.platform_outputs.pool(name) if self.platform.platform_outputs else None

    def gpu_pools(self) -> list[NodePoolInfo]:
        return [p for p in self.platform.node_pools if p.gpu]

    def pool_taints(self, pool: NodePoolInfo | None) -> list[dict[str, Any]]:
        """The taints the pool's nodes carry: the pool's own plus those the cloud adds (None: a pool the
        platform does not have, whose nodes carry only the cloud's taints for every node)."""
        taints = [t.as_k8s() for t in pool.taints] if pool else []
        for t in F.cloud(self.platform.cloud).get("taints") or []:
            if t.get("gpuOnly") and not (pool and pool.gpu):
                continue
            taint = {"key": t["key"], "value": t.get("value", ""), "effect": t["effect"]}
            if taint not in taints:
                taints.append(taint)
        return [t for t in taints if t.get("effect") in ("NoSchedule", "NoExecute")]

    def object(self, kind: str, namespace: str | None, name: str) -> K8sObject | None:
        for plan in {id(self.plan): self.plan, id(self.platform): self.platform}.values():
            for o in plan.objects(kind, namespace):
                if o.name == name:
                    return o
        return None
