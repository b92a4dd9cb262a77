"""`trainplane nccl-test JOBSTACK`: a NCCL preflight on the job's own pool, fabric and placement.

The preflight is the job's JobSet with the trainer replaced by ``trainer.collectives`` (same image, pool,
nodes, fabric annotations, sidecars, NCCL environment, topology and queue): it sweeps all_gather (or
all_reduce) message sizes across the nodes, prints the bus bandwidth per size, and fails when the peak is
below the floor of the pool's fabric kind (components/nccl_floors.py, each floor with its published source).

    trainplane nccl-test gpt-small-aws-dev                  what would run: pool, fabric, floor, manifest
    trainplane nccl-test JOB --kubeconfig ~/.kube/config    run it, print the sweep, exit 1 below the floor

Without ``--kubeconfig`` nothing is sent anywhere. With it, the JobSet is created in the team's namespace,
Kueue admits it like the job (it asks for the same GPUs), the rank-0 pod's log is read, and the JobSet is
deleted again whatever happened.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from components.outputs import READ_KEYS, PlatformOutputs
from components.spec import JobSpec
from contract.rack import COMPUTE_DOMAIN_API_VERSION
from trainer.collectives import COLLECTIVES, Result, find_result

JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
# Labels JobSet v0.12.0 and the Job controller put on every pod (api/jobset/v1alpha2/jobset_types.go
# JobSetNameKey; batch/v1 JobCompletionIndexAnnotation is also a label since Kubernetes 1.28).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
SUFFIX = "-nccl"


def preflight_name(job_name: str) -> str:
    """`<job>-nccl`, cut to the job-name limit so its pod names stay DNS-1035 labels the JobSet webhook
    accepts at any node count (components/spec/job.py JOB_NAME_MAX)."""
    from components.spec.job import JOB_NAME_MAX

    return job_name[: JOB_NAME_MAX - len(SUFFIX)].rstrip("-") + SUFFIX


class PreflightError(Exception):
    """The preflight cannot be built or run (bad input, a cluster that cannot be reached); one line."""


class PreflightFailed(PreflightError):
    """The preflight ran and gave no bandwidth (failed, or never admitted in time): the check failed."""


@dataclass(frozen=True)
class Preflight:
    name: str
    namespace: str
    pool: str
    nodes: int
    gpus_per_node: int
    collective: str
    fabric: str | None
    floor_gbps: float | None
    floor_source: str | None
    manifest: dict[str, Any]
    # On a rack-scale pool: the preflight's own ComputeDomain, created before the JobSet and deleted after
    # it (components/incluster/compute_domain.py); the pods claim its channel.
    compute_domain: dict[str, Any] | None = None
    # Where the rack's RDMA NICs come from a network DRA driver (GKE DRANET): the preflight's own
    # ResourceClaimTemplate of them, created and deleted with the ComputeDomain; the pods claim it too.
    nic_claim_template: dict[str, Any] | None = None


def platform_outputs(outputs: dict[str, Any]) -> PlatformOutputs:
    return PlatformOutputs.model_validate({k: v for k, v in outputs.items() if k in READ_KEYS})


def _floor(pool_out: dict[str, Any], collective: str, machines: list[str]) -> tuple[str | None, Any]:
    """The pool's fabric kind and its floor; with several machine types, the lowest of their floors
    (a preflight pod can land on any of them)."""
    from components import nccl_floors as fabrics

    kind = fabrics.pool_fabric_kind(pool_out)
    if kind is None:
        return None, None
    floors = []
    candidates: list[str | None] = list(machines) or [None]
    for machine in candidates:
        try:
            floors.append(fabrics.floor_gbps(kind, collective, machine))
        except KeyError:
            continue
    return kind, min(floors, key=lambda f: f.busbw_gbps, default=None)


def build(
    job: JobSpec, platform: PlatformOutputs, *, nodes: int | None = None, collective: str | None = None
) -> Preflight:
    """The preflight JobSet for ``job`` (pure: no cluster). Without a collective: all_gather, unless only
    all_reduce has a published floor on the job's fabric (AWS publishes EFA figures for all_reduce)."""
    from components.incluster.compute_domain import compute_domain, job_rack, nic_claim_template
    from components.incluster.job_pod import job_pools
    from components.incluster.job_runtime import launcher_args, training_jobset

    if collective is not None and collective not in COLLECTIVES:
        raise PreflightError(f"--collective {collective!r}: one of {', '.join(COLLECTIVES)}")
    n = job.nodes.max if nodes is None else nodes
    if not 2 <= n <= job.nodes.max:
        raise PreflightError(
            f"--nodes {n}: the preflight needs 2..{job.nodes.max} nodes (job.nodes.max) to cross the fabric"
        )
    name = preflight_name(job.name)
    pre = job.model_copy(update={"name": name, "nodes": job.nodes.model_copy(update={"min": n, "max": n})})
    pool = job_pools(pre, platform)[0]
    pool_out, machines = pool.model_dump(by_alias=True), list(pool.machine_types)
    if collective is None:
        with_floor = [c for c in COLLECTIVES if _floor(pool_out, c, machines)[1] is not None]
        collective = (with_floor or list(COLLECTIVES))[0]
    kind, floor = _floor(pool_out, collective, machines)
    minimum = floor.minimum() if floor is not None else None
    run_opts = launcher_args(pre)
    opts = [a for a in run_opts[: run_opts.index("--")] if not a.startswith("--max-restarts")]
    command = [
        "python", "-m", "torch.distributed.run", *opts, "--max-restarts=0",
        "-m", "trainer.collectives", "--collective", collective,
    ]  # fmt: skip
    if minimum is not None:
        command += ["--floor-gbps", str(minimum)]
    manifest = training_jobset(pre, platform, command=command)
    # A preflight is run once: any failure is the answer, never a restart.
    manifest["spec"]["failurePolicy"] = {"maxRestarts": 0}
    domain, nics = None, None
    if (rack := job_rack(job_pools(pre, platform))) is not None:
        namespace, labels = manifest["metadata"]["namespace"], manifest["metadata"].get("labels") or {}
        domain = compute_domain(name, namespace, labels)
        nics = nic_claim_template(name, namespace, labels, rack)
    return Preflight(
        name=name,
        namespace=manifest["metadata"]["namespace"],
        pool=pool.name,
        nodes=n,
        gpus_per_node=job.gpus_per_node,
        collective=collective,
        fabric=kind,
        floor_gbps=minimum,
        floor_source=floor.source if floor is not None else None,
        manifest=manifest,
        compute_domain=domain,
        nic_claim_template=nics,
    )


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c.get("type", ""): c.get("status", "") for c in (obj.get("status") or {}).get("conditions") or []}


def connect(kubeconfig: str | None, context: str | None) -> Any:
    """A client of the cluster, after asking it its version: PreflightError (one line) when the kubeconfig
    cannot be loaded or the API server cannot be reached, before anything is printed or created."""
    from kubernetes import client, config

    where = kubeconfig or "default kubeconfig"
    try:
        api = config.new_client_from_config(config_file=kubeconfig, context=context)
    except Exception as e:  # kubernetes' ConfigException: no such file, no such context, bad YAML
        raise PreflightError(f"--kubeconfig {where}: cannot load it: {_first_line(e)}") from None
    try:
        client.VersionApi(api).get_code(_request_timeout=30)
    except Exception as e:  # urllib3 connection errors, ApiException (401/403)
        host = api.configuration.host
        raise PreflightError(f"cannot reach the cluster at {host} ({where}): {_first_line(e)}") from None
    return api


def run_live(
    pf: Preflight,
    *,
    kubeconfig: str | None,
    context: str | None,
    timeout_s: float = 1800.0,
    poll_s: float = 5.0,
    api: Any = None,
) -> Result:
    """Create the preflight, wait for it, read rank 0's result, delete it. PreflightFailed if no result.
    `api`: a client from `connect` (else one is made from kubeconfig and context)."""
    from kubernetes import client

    from components.incluster.compute_domain import RESOURCE_API_VERSION
    from components.incluster.job_pod import CONTAINER

    where = kubeconfig or "default kubeconfig"
    api = api if api is not None else connect(kubeconfig, context)
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    group = (JOBSET_GROUP, JOBSET_VERSION, pf.namespace, JOBSET_PLURAL)
    # The ComputeDomain (a rack pool) first: the driver makes the claim template the pods name from it.
    cd_group = (*COMPUTE_DOMAIN_API_VERSION.split("/"), pf.namespace, "computedomains")
    # The RDMA NIC template (resource.k8s.io/v1, built in): the custom objects API serves any group's path.
    nic_group = (*RESOURCE_API_VERSION.split("/"), pf.namespace, "resourceclaimtemplates")
    before = [(g, o) for g, o in ((cd_group, pf.compute_domain), (nic_group, pf.nic_claim_template)) if o]
    try:
        for g, obj in before:
            custom.create_namespaced_custom_object(*g, obj)
        custom.create_namespaced_custom_object(*group, pf.manifest)
    except Exception as e:  # urllib3 connection errors, ApiException (401/403, no JobSet CRD)
        for g, obj in before:
            try:
                custom.delete_namespaced_custom_object(*g, obj["metadata"]["name"])
            except Exception:  # never created, or the cluster is unreachable: the error below says why
                pass
        raise PreflightError(
            f"cannot create {pf.namespace}/{pf.name} on the cluster ({where}): {_first_line(e)}"
        ) from None
    try:
        deadline = time.monotonic() + timeout_s
        state = "pending"
        while time.monotonic() < deadline:
            conds = _conditions(custom.get_namespaced_custom_object(*group, pf.name))
            if conds.get("Completed") == "True" or conds.get("Failed") == "True":
                state = "Completed" if conds.get("Completed") == "True" else "Failed"
                break
            time.sleep(poll_s)
        selector = f"{JOBSET_NAME_LABEL}={pf.name},{COMPLETION_INDEX_LABEL}=0"
        pods = core.list_namespaced_pod(pf.namespace, label_selector=selector).items
        log = ""
        if pods:
            # The raw body: with preloading, client 36 returns the text/plain log as the repr of bytes.
            resp = core.read_namespaced_pod_log(
                pods[0].metadata.name, pf.namespace, container=CONTAINER, _preload_content=False
            )
            log = resp.data.decode("utf-8", "replace")
        result = find_result(log)
        if result is None:
            if state == "pending":
                why = f"not finished after {timeout_s:.0f} s (not admitted? is the team's queue full?)"
            else:
                why = f"the JobSet {state.lower()} without one (see the pods' logs)"
            raise PreflightFailed(f"{pf.namespace}/{pf.name}: no result from rank 0: {why}")
        return result
    finally:
        custom.delete_namespaced_custom_object(
            *group, pf.name, body=client.V1DeleteOptions(propagation_policy="Foreground")
        )
        for g, obj in before:
            custom.delete_namespaced_custom_object(*g, obj["metadata"]["name"])


def _first_line(e: Exception) -> str:
    """An exception as one line: its type and the first line of its message (API bodies are long)."""
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}".rstrip(": ")
