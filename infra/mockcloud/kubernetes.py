"""What the Kubernetes provider would answer for the few computed outputs the program reads.

Run as a program (`run_program(config, stack, program=PROFILE_PROGRAM)`), this module also builds the
in-cluster layer on a hand-made ClusterBundle for an `eks` or `gke` cloud profile, shaped like the one the
AWS and GCP layers hand over, so the in-cluster layer is tested per profile without the cloud layers.
Config: `trainplane:platform` (an aws or gcp platform object) and `trainplane:profile` (eks | gke).
"""

from __future__ import annotations

from pathlib import Path

COMPUTED = {
    "kubernetes:helm.sh/v3:Release": lambda n, i: {
        "status": {"status": "deployed", "namespace": i.get("namespace"), "name": i.get("name") or n},
    },
}

INVOKES: dict = {}

PROFILE_PROGRAM = Path(__file__).resolve()

ACCOUNT = "123456789012"
# Stands in for the StorageClass the AWS layer creates for an eks profile bundle.
EKS_STORAGE_CLASS = "gp3-encrypted"


def profile_bundle(spec, profile: str, provider):
    """A ClusterBundle as the cloud layer of `profile` would hand it over (fixed, realistic values)."""
    import pulumi

    from components.bundle import (
        ClusterBundle,
        NodePoolInfo,
        StorageHandle,
        gpu_taint,
        pool_labels,
    )
    from components.spec import machine_of

    name = spec.cluster.name
    pools = []
    for p in spec.node_pools:
        labels = pool_labels(p)
        extended: dict[str, int] = {}
        pod_env: dict[str, str] = {}
        shape = machine_of(spec.cloud, p)
        if profile == "eks" and p.efa and shape is not None:
            # As the AWS layer hands an EFA pool over: all of the node's EFA devices, libfabric's provider.
            extended = {"vpc.amazonaws.com/efa": shape.efa_interfaces}
            pod_env = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1"}
        if profile == "eks":
            labels["eks.amazonaws.com/capacityType"] = "SPOT" if p.capacity == "spot" else "ON_DEMAND"
        elif p.gpu:
            labels["gke-no-default-nvidia-gpu-device-plugin"] = "true"
            if p.capacity == "spot":
                labels["cloud.google.com/gke-spot"] = "true"
        pools.append(
            NodePoolInfo(
                name=p.name,
                gpu=p.gpu,
                gpus_per_node=spec.gpus_per_node(p),
                capacity=p.capacity,
                min_nodes=p.min_nodes,
                max_nodes=p.effective_max_nodes,
                labels=labels,
                taints=(gpu_taint(),) if p.gpu else (),
                machine_types=(shape.name,) if shape is not None else (),
                extended_resources=extended,
                pod_env=pod_env,
                node_vcpus=shape.vcpus if shape is not None else None,
                node_memory_gib=shape.memory_gib if shape is not None else None,
            )
        )
    storage = []
    for s in spec.storage:
        if profile == "eks" and s.kind == "lustre":
            storage.append(
                StorageHandle(
                    name=s.name,
                    kind="lustre",
                    capacity_gib=s.capacity_gib or 1200,
                    csi_driver="fsx.csi.aws.com",
                    volume_handle=f"fs-0{s.name[:8]}0123456",
                    volume_attributes={
                        "dnsname": f"fs-0{s.name[:8]}.fsx.us-east-1.amazonaws.com",
                        "mountname": "abcdefgh",
                    },
                    mount_options=("flock",),
                    endpoint="10.40.16.10",
                    ports=(988, 1018, 1019, 1020, 1021, 1022, 1023),
                )
            )
        elif profile == "eks":
            storage.append(
                StorageHandle(
                    name=s.name,
                    kind="nfs",
                    capacity_gib=1024,
                    csi_driver="efs.csi.aws.com",
                    volume_handle="fs-0efs0123456789",
                    endpoint="10.40.16.20",
                    ports=(2049,),
                )
            )
        elif s.kind == "lustre":
            storage.append(
                StorageHandle(
                    name=s.name,
                    kind="lustre",
                    capacity_gib=s.capacity_gib or 9000,
                    csi_driver="lustre.csi.storage.gke.io",
                    volume_handle=f"{spec.project}/us-central1-a/{s.name}",
                    volume_attributes={"ip": "10.50.8.3", "filesystem": "lfs"},
                    endpoint="10.50.8.3",
                    ports=(988,),
                )
            )
        else:
            storage.append(
                StorageHandle(
                    name=s.name,
                    kind="nfs",
                    capacity_gib=s.capacity_gib or 2560,
                    csi_driver="filestore.csi.storage.gke.io",
                    volume_handle=f"modeInstance/us-central1-a/{name}-{s.name}/share",
                    volume_attributes={"ip": "10.50.8.2", "volume": "share"},
                    endpoint="10.50.8.2",
                    ports=(111, 2049),
                )
            )
    if profile == "eks":
        from components.aws.profile import EKS_PROFILE

        cloud = EKS_PROFILE
        identity = {t.name: f"arn:aws:iam::{ACCOUNT}:role/{name}-team-{t.name}" for t in spec.teams}
        loki = f"arn:aws:iam::{ACCOUNT}:role/{name}-loki"
        # The AWS layer's encrypted gp3 class (EBS CSI add-on); the name here stands in for it.
        storage_class = EKS_STORAGE_CLASS
    else:
        from components.gcp.profile import GKE_STORAGE_CLASS, gke_profile

        cloud = gke_profile(spec.cluster.kubernetes_version)
        identity = {t.name: f"{name}-{t.name}@{spec.project}.iam.gserviceaccount.com" for t in spec.teams}
        loki = f"{name}-loki@{spec.project}.iam.gserviceaccount.com"
        storage_class = GKE_STORAGE_CLASS
    return ClusterBundle(
        name=name,
        region=spec.region,
        provider=provider,
        kubeconfig=pulumi.Output.secret("(mock kubeconfig)"),
        profile=cloud,
        node_pools=tuple(pools),
        storage=tuple(storage),
        buckets={"checkpoints": f"{name}-checkpoints-{ACCOUNT}", "logs": f"{name}-logs-{ACCOUNT}"},
        team_identities=identity,
        loki_identity=loki,
        storage_class=storage_class,
    )


# The cloud profile each reference cloud's layer hands over.
PROFILES = {"aws": "eks", "gcp": "gke", "kubernetes": "kubernetes"}


def plan_incluster(platform: dict, stack: str = "test"):
    """Plan the in-cluster layer of a platform object: through the real program for cloud kubernetes,
    on a hand-made bundle of the cloud's profile for aws and gcp. Returns the RunResult."""
    import json

    from infra.mockcloud import run_program

    config = {"trainplane:platform": json.dumps(platform)}
    profile = PROFILES[platform["cloud"]]
    if profile == "kubernetes":
        return run_program(config, stack)
    return run_program({**config, "trainplane:profile": profile}, stack, program=PROFILE_PROGRAM)


def _profile_program() -> None:
    import pulumi
    import pulumi_kubernetes as k8s

    from components.kubernetes.incluster import InClusterArgs, InClusterPlatform
    from components.spec import PlatformSpec

    config = pulumi.Config("trainplane")
    spec = PlatformSpec.load(config.require_object("platform"))
    profile = config.require("profile")
    provider = k8s.Provider(
        f"{spec.cluster.name}-k8s", kubeconfig="(mock kubeconfig)", enable_server_side_apply=True
    )
    bundle = profile_bundle(spec, profile, provider)
    InClusterPlatform(spec.cluster.name, InClusterArgs(spec, bundle))


if __name__ == "__main__":
    _profile_program()
