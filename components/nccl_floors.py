"""NCCL bandwidth floors per GPU fabric kind, for the NCCL preflight (no pulumi, no cloud SDK).

A pool's fabric kind is `NodePoolInfo.fabric.kind` (platform outputs: `nodePools[].fabric.kind`), set by
the backend that built the fabric: GKE "tcpx" (a3-highgpu-8g), "tcpxo" (a3-megagpu-8g); AWS pools with EFA
devices are "efa" (`pool_fabric_kind` also reads that from `extendedResources`).

API:
    >>> f = floor_gbps("tcpxo", "all_gather")
    >>> f.busbw_gbps, f.message_bytes, f.minimum()
    (188.9, 8589934592, 170.01)
    >>> floor_gbps("efa", "all_reduce", "p5.48xlarge").busbw_gbps
    800.0
    >>> pool_fabric_kind({"fabric": {"kind": "tcpxo"}}), pool_fabric_kind({"extendedResources": {"vpc.amazonaws.com/efa": 32}})
    ('tcpxo', 'efa')

Each floor is a published figure with its source (`Floor.source`), measured between two nodes unless
`nodes` says otherwise; `minimum(tolerance)` is what a preflight should refuse below (default 90 %).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EFA_RESOURCE = "vpc.amazonaws.com/efa"
# A rack-scale pool's kind (GB200/GB300 NVL72): NCCL between its nodes goes over multi-node NVLink inside a
# ComputeDomain (components/incluster/compute_domain.py), by itself where available (NCCL user guide,
# troubleshooting/performance_and_tuning.rst, "Multi-node NVLink (MNNVL) issues"). No floor is kept for
# it: no NVIDIA or cloud publication read for this table gives an nccl-tests bus bandwidth for a GB200
# NVL72 rack (the NVIDIA GB200 NVL Multi-Node Tuning Guide's NCCL page shows how to run the tests, not a
# figure; the only figure found, ~811 GB/s all_reduce on 2 nodes x 4 GPUs, is a third-party blog's single
# run, lixueduan.com/posts/ai/13-gb200-mnnvl-nccl-test). The preflight runs and reports without a floor.
MNNVL = "mnnvl"
GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True, kw_only=True)
class Floor:
    """A published nccl-tests bus bandwidth for one fabric kind and collective."""

    kind: str
    collective: str  # nccl-tests binary without `_perf`: all_gather, all_reduce
    busbw_gbps: float  # GB/s, nccl-tests `busbw` (out-of-place)
    message_bytes: int | None  # the message size the figure is read at; None: the source's threshold
    nodes: int = 2
    gpus_per_node: int = 8
    source: str
    note: str = ""

    def minimum(self, tolerance: float = 0.9) -> float:
        """The bus bandwidth below which the fabric is not working as published."""
        return round(self.busbw_gbps * tolerance, 2)


@dataclass(frozen=True, kw_only=True)
class TestImage:
    """A pinned image with the nccl-tests binaries built against the fabric's NCCL plugin."""

    image: str
    # Directory holding all_gather_perf / all_reduce_perf; None where the source only shows a wrapper script.
    binaries: str | None
    runner: str = ""  # the upstream wrapper that runs a benchmark across hosts (MPI), when there is one
    source: str


_CT = "GoogleCloudPlatform/cluster-toolkit@v1.95.0"
FLOORS: tuple[Floor, ...] = (
    Floor(
        kind="tcpxo",
        collective="all_gather",
        busbw_gbps=188.9,
        message_bytes=8 * GIB,
        source=f"{_CT} examples/gke-a3-megagpu/README.md, example all_gather output, 2 x a3-megagpu-8g, 8 GiB",
    ),
    Floor(
        kind="tcpx",
        collective="all_gather",
        busbw_gbps=70.9,
        message_bytes=512 * MIB,
        source=f"{_CT} examples/gke-a3-highgpu/multi-node-test-plan.md, example all_gather output, 2 x a3-highgpu-8g",
        note="the ~30 GB/s quoted in issue 12 is that run's average over 1 MiB-512 MiB (30.96), not a floor",
    ),
    Floor(
        kind="rdma",
        collective="all_gather",
        busbw_gbps=329.0,
        message_bytes=8 * GIB,
        source="issue 12 (A3 Ultra, 2 nodes); no published output found in cluster-toolkit v1.95.0 "
        "(examples/gke-a3-ultragpu/system_benchmarks prints XXX.XX)",
        note="unconfirmed figure: re-check against Google's A3 Ultra NCCL results before enforcing",
    ),
    Floor(
        kind="efa",
        collective="all_reduce",
        busbw_gbps=800.0,
        message_bytes=None,
        nodes=2,
        source="aws-samples/awsome-distributed-training@7217859 4.validation_and_observability/"
        "2.gpu-cluster-healthcheck/checks/5-nccl-allreduce.sh get_min_bus_bw p5.48xlarge (p5e/p5en alike)",
        note="AWS's conservative all_reduce threshold, 8 B-128 MiB sweep; no all_gather figure published there",
    ),
    Floor(
        kind="efa",
        collective="all_reduce",
        busbw_gbps=300.0,
        message_bytes=None,
        source="aws-samples/awsome-distributed-training@7217859 .../checks/5-nccl-allreduce.sh get_min_bus_bw "
        "p4d.24xlarge",
        note="AWS's conservative all_reduce threshold",
    ),
)
# Which EFA floor applies to which instance types (the EFA rows differ by machine, not by kind).
_EFA_MACHINES = {
    "p5.48xlarge": 0,
    "p5e.48xlarge": 0,
    "p5en.48xlarge": 0,
    "p4d.24xlarge": 1,
}

IMAGES: Mapping[str, TestImage] = {
    "tcpxo": TestImage(
        image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15",
        binaries=None,
        runner="BENCHMARK=all_gather_perf NHOSTS=2 /scripts/demo-run-nccl-test-tcpxo-via-mpi.sh",
        source=f"{_CT} examples/gke-a3-megagpu/nccl-test-latest.yaml",
    ),
    "tcpx": TestImage(
        image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9",
        binaries="/third_party/nccl-tests-mpi/build",
        runner="/scripts/run-nccl.sh (nccl-config.yaml)",
        source="GoogleCloudPlatform/container-engine-accelerators@204a57c gpudirect-tcpx/nccl-config.yaml run-nccl.sh",
    ),
}


def floor_gbps(kind: str, collective: str, machine_type: str | None = None) -> Floor:
    """The published floor for `collective` on fabric `kind` (EFA: per `machine_type`).

    Raises KeyError naming what is missing when no figure is kept for it.
    """
    rows = [f for f in FLOORS if f.kind == kind and f.collective == collective]
    if kind == "efa" and rows:
        index = _EFA_MACHINES.get(machine_type or "")
        efa = [f for f in FLOORS if f.kind == "efa"]
        rows = [efa[index]] if index is not None and efa[index].collective == collective else []
    if not rows:
        raise KeyError(
            f"no NCCL {collective} floor for fabric {kind!r}"
            + (f" on {machine_type}" if machine_type else "")
        )
    return rows[0]


def pool_fabric_kind(pool: Mapping[str, Any]) -> str | None:
    """A platform output pool's fabric kind (`nodePools[]` entry): "mnnvl" on a rack-scale pool (its
    nodes' GPUs reach each other over multi-node NVLink, `rack`), else its `fabric.kind`, else "efa" when
    its nodes carry EFA devices, else None (NCCL over the primary NIC: no floor)."""
    if pool.get("rack"):
        return MNNVL
    fabric = pool.get("fabric") or {}
    if fabric.get("kind"):
        return str(fabric["kind"])
    if (pool.get("extendedResources") or {}).get(EFA_RESOURCE):
        return "efa"
    return None
