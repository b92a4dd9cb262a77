"""GPUDirect on GKE: the machine type picks the fabric, and the plan carries everything it needs.

One plan (gcp-h100-mega, a3-megagpu-8g: TCPXO) is read by the end-to-end tests; the table tests run on the
pure fabric module (components/gcp/fabric.py) for every machine type with a fabric.
"""

from __future__ import annotations

import copy
import ipaddress
import json

import pytest

from components.gcp import fabric as F
from components.gcp.backend import BACKEND
from components.spec import ConfigError, PlatformSpec
from tests.helpers.gcp import mutated
from tests.helpers.plans import one, planned
from tests.helpers.verify_plans import edit, lines, plan, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
DS = "kubernetes:apps/v1:DaemonSet"


def mega_pool_output() -> dict:
    return next(p for p in planned("gcp-h100-mega").outputs["nodePools"] if p["name"] == "h100mega")


# ---- table: each GPU machine type with a fabric ------------------------------------------------------
@pytest.mark.parametrize(
    ("machine", "kind", "networks", "mtu", "sidecar"),
    [("a3-megagpu-8g", "tcpxo", 8, 8244, "tcpxo-daemon"), ("a3-highgpu-8g", "tcpx", 4, 8244, "tcpx-daemon")],
)
def test_fabric_table(machine, kind, networks, mtu, sidecar):
    fabric = F.fabric_of(machine)
    assert fabric is not None and fabric.kind == kind
    assert (fabric.networks, fabric.mtu) == (networks, mtu)
    pod = F.pod_fabric(fabric)
    nics = json.loads(pod.annotations[F.INTERFACES_ANNOTATION])
    assert [n["interfaceName"] for n in nics] == [f"eth{i}" for i in range(networks + 1)]
    assert nics[0]["network"] == "default" and {n["network"] for n in nics[1:]} == {
        f"vpc{i + 1}" for i in range(networks)
    }
    assert pod.annotations[F.DEFAULT_INTERFACE_ANNOTATION] == "eth0"
    # The sidecar is native (init container that keeps running) and the NRI injector gives it the GPUs.
    assert [s["name"] for s in pod.sidecars] == [sidecar]
    assert pod.sidecars[0]["restartPolicy"] == "Always"
    devices = pod.annotations[f"devices.gke.io/container.{sidecar}"]
    assert all(f"- path: /dev/nvidia{i}\n" in devices for i in range(8))
    # Every volume the sidecar and the trainer mount is one the pod declares.
    declared = {v["name"] for v in pod.volumes}
    assert {m["name"] for m in pod.volume_mounts} <= declared
    assert {m["name"] for m in pod.sidecars[0]["volumeMounts"]} <= declared
    # NCCL talks to every GPU NIC and keeps its control traffic on eth0.
    ifname_key = "NCCL_FASTRAK_IFNAME" if kind == "tcpxo" else "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"
    assert fabric.env[ifname_key] == ",".join(f"eth{i + 1}" for i in range(networks))
    assert fabric.env["NCCL_SOCKET_IFNAME"] == "eth0"


# Flags each pinned RxDM image defines (google/tcpgpudmarxd@a6e09b3 app/tcpgpudmarxd.cu for TCPX v2.0.x;
# google/nccl-plugin-gpudirect-tcpxo@04815d1 buffer_mgmt_daemon for TCPXO from v1.0.20, where `uid`,
# `alsologtostderr` and `num_nics` are retired and make RxDM log "ERROR: Accessing retired flag").
RXDM_FLAGS = {
    "tcpx": {"gpu_nic_preset", "gpu_shmem_type", "uds_path", "setup_param"},
    "tcpxo": {"num_hops"},
}


@pytest.mark.parametrize("machine", ["a3-megagpu-8g", "a3-highgpu-8g"])
def test_rxdm_gets_only_flags_its_image_accepts(machine):
    fabric = F.fabric_of(machine)
    assert fabric is not None and fabric.sidecar is not None
    sidecar = fabric.sidecar
    if fabric.kind == "tcpxo":  # a shell line that runs the image's entrypoint script
        line = next(a for a in sidecar["args"][0].splitlines() if "entrypoint_rxdm_container.sh " in a)
        flags = {w[2:].split("=", 1)[0] for w in line.split()[1:]}
    else:  # the binary with (flag, value) pairs
        flags = {w[2:] for w in sidecar["command"][1::2]}
    assert flags == RXDM_FLAGS[fabric.kind], flags


@pytest.mark.parametrize(
    "machine", ["a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g", "a2-highgpu-8g", "g2-standard-48"]
)
def test_shapes_without_gpu_nics_get_no_fabric(machine):
    assert F.fabric_of(machine) is None


def test_tcpx_and_tcpxo_pools_share_the_fabric_networks_and_the_nri_injector():
    objs = F.cluster_objects((F.TCPX, F.TCPXO), "mix")
    assert [o.kind for o in objs].count("Network") == 8  # TCPX uses the first 4 of TCPXO's 8
    ds = {o.metadata["name"]: o.spec["template"]["spec"] for o in objs if o.kind == "DaemonSet"}
    assert set(ds) == {"nccl-tcpx-installer", "nccl-tcpxo-installer", "device-injector"}
    on = ds["device-injector"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert on["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["a3-highgpu-8g", "a3-megagpu-8g"]


def test_cluster_objects_share_networks_and_daemonsets():
    objs = F.cluster_objects((F.TCPXO,), "mega")
    kinds = [o.kind for o in objs]
    assert kinds.count("Network") == kinds.count("GKENetworkParamSet") == 8
    params = {o.metadata["name"]: o.spec for o in objs if o.kind == "GKENetworkParamSet"}
    assert params["vpc1"] == {
        "vpc": "mega-gpunet-0",
        "vpcSubnet": "mega-gpunet-0-subnet",
        "deviceMode": "NetDevice",
    }
    ds = {o.metadata["name"]: o for o in objs if o.kind == "DaemonSet"}
    assert set(ds) == {"nccl-tcpxo-installer", "device-injector"}
    for o in ds.values():
        spec = o.spec["template"]["spec"]
        images = [c["image"] for c in spec.get("initContainers", []) + spec["containers"]]
        # Pinned: a tag or a digest on every image, never latest.
        assert all((":" in i.split("/")[-1] or "@sha256:" in i) and not i.endswith(":latest") for i in images)
        term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["a3-megagpu-8g"]
        assert {"operator": "Exists"} in spec["tolerations"]  # GPU taint and the pool's own


# ---- gcp-h100-mega end to end ------------------------------------------------------------------------
def test_mega_creates_eight_fabric_networks_with_jumbo_mtu_and_firewalls_inside_them():
    result = planned("gcp-h100-mega")
    vpcs = {r.inputs["name"]: r for r in result.of_type(NETWORK) if "gpunet" in r.inputs["name"]}
    assert sorted(vpcs) == [f"mega-gpunet-{i}" for i in range(8)]
    assert {r.inputs["mtu"] for r in vpcs.values()} == {8244}
    subnets = [r.inputs for r in result.of_type(SUBNET) if "gpunet" in r.inputs["name"]]
    ranges = [ipaddress.ip_network(s["ipCidrRange"]) for s in subnets]
    assert len(ranges) == 8 and all(r.prefixlen == 20 and r.subnet_of(F.DEFAULT_FABRIC_CIDR) for r in ranges)
    assert not any(a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])
    network_of = {s["ipCidrRange"]: s["network"] for s in subnets}
    rules = [r for r in result.of_type(FIREWALL) if "fabric" in r.name]
    assert len(rules) == 8
    for rule in rules:  # each rule sits in one fabric network and admits only that network's subnet
        (src,) = rule.inputs["sourceRanges"]
        assert rule.inputs["network"] == network_of[src]
    assert len({r.inputs["network"] for r in rules}) == 8


def test_mega_cluster_pool_and_objects():
    result = planned("gcp-h100-mega")
    cluster = one(result, CLUSTER).inputs
    assert cluster["enableMultiNetworking"] is True and cluster["datapathProvider"] == "ADVANCED_DATAPATH"
    pools = {p.inputs["name"]: p.inputs for p in result.of_type(POOL)}
    nics = pools["h100mega"]["networkConfig"]["additionalNodeNetworkConfigs"]
    assert nics == [
        {"network": f"mega-gpunet-{i}", "subnetwork": f"mega-gpunet-{i}-subnet"} for i in range(8)
    ]
    assert "networkConfig" not in pools["system"]
    names = {(r.type, r.inputs["metadata"]["name"]) for r in result.resources if "metadata" in r.inputs}
    for i in range(1, 9):
        assert ("kubernetes:networking.gke.io/v1:Network", f"vpc{i}") in names
        assert ("kubernetes:networking.gke.io/v1:GKENetworkParamSet", f"vpc{i}") in names
    assert {(DS, "nccl-tcpxo-installer"), (DS, "device-injector")} <= names


def test_gcp_dev_h100_pool_gets_tcpx():
    """gcp-dev's H100 x8 pool is a3-highgpu-8g (the catalog's cheapest 8-GPU H100): TCPX, 4 networks."""
    result = planned("gcp-dev")
    assert one(result, CLUSTER).inputs["enableMultiNetworking"] is True
    vpcs = [r.inputs for r in result.of_type(NETWORK) if "gpunet" in r.inputs["name"]]
    assert len(vpcs) == 4 and {v["mtu"] for v in vpcs} == {8244}
    (gpu,) = [p for p in result.outputs["nodePools"] if p.get("gpu")]
    assert gpu["fabric"]["kind"] == "tcpx" and gpu["podEnv"] == dict(F.TCPX.env)
    assert run(plan("gcp-dev"), "fabric").ok


def test_mega_pool_outputs_carry_the_pod_fabric():
    pool = mega_pool_output()
    fabric = pool["fabric"]
    assert fabric["kind"] == "tcpxo"
    assert fabric["annotations"] == dict(F.pod_fabric(F.TCPXO).annotations)
    assert [s["name"] for s in fabric["sidecars"]] == ["tcpxo-daemon"]
    assert pool["podEnv"] == dict(F.TCPXO.env)
    assert {m["mountPath"] for m in fabric["volumeMounts"]} == {"/dev/aperture_devices", "/usr/local/nvidia"}


def test_platforms_without_fabric_machines_are_unchanged():
    result = planned("gcp-byo-network")  # L4 (g2-standard-48): no GPU NICs
    assert "enableMultiNetworking" not in one(result, CLUSTER).inputs
    assert not [r for r in result.resources if "Fabric" in r.type or "networking.gke.io" in r.type]
    assert all(not p.get("fabric") and not p.get("podEnv") for p in result.outputs["nodePools"])


# ---- config errors ------------------------------------------------------------------------------------
def problems(obj) -> list[str]:
    with pytest.raises(ConfigError) as err:
        PlatformSpec.load(obj)
    return err.value.problems


def test_brought_network_with_a_fabric_machine_is_refused_naming_the_key():
    obj = mutated("gcp-h100-mega")
    obj["network"] = {
        "network": "lab-vpc",
        "subnetwork": "lab-sub",
        "podsRangeName": "p",
        "servicesRangeName": "s",
    }
    del obj["storage"]
    (line,) = [p for p in problems(obj) if "GPUDirect" in p]
    assert line.startswith("platform.network.network: GPUDirect tcpxo (a3-megagpu-8g)")


def test_cluster_version_below_the_fabric_minimum():
    obj = mutated("gcp-h100-mega")
    obj["cluster"]["kubernetesVersion"] = "1.27"
    del obj["storage"]
    assert (
        "platform.cluster.kubernetesVersion: GPUDirect-TCPXO needs GKE 1.28 or newer, not 1.27"
        in problems(obj)
    )


@pytest.mark.parametrize(
    ("cidr", "expected"),
    [
        (
            "10.80.0.0/16",
            "platform.network.fabricCidr: 10.80.0.0/16 overlaps podsCidr 10.80.0.0/14; the ranges must be disjoint",
        ),
        (
            "192.168.0.0/18",
            "platform.network.fabricCidr: 192.168.0.0/18 holds 4 /20 subnets; the GPUDirect pools need 8",
        ),
    ],
)
def test_fabric_cidr_problems(cidr, expected):
    obj = mutated("gcp-h100-mega")
    obj["network"]["fabricCidr"] = cidr
    assert problems(obj) == [expected]


def test_platform_fabrics_follow_the_machine_type():
    from components.gcp.fabric_rules import platform_fabrics

    spec = PlatformSpec.load(mutated("gcp-h100-mega"))
    assert platform_fabrics(spec) == (F.TCPXO,)
    assert BACKEND.machine_of(spec.node_pools[1]).name == "a3-megagpu-8g"


# ---- verify: the fabric check ------------------------------------------------------------------------
def test_verify_fabric_passes_on_mega_and_fails_on_a_wrong_mtu():
    assert run(plan("gcp-h100-mega"), "fabric").ok
    broken = edit(
        plan("gcp-h100-mega"),
        lambda r: r.type == NETWORK and r.inputs.get("name") == "mega-gpunet-3",
        lambda i: i.update(mtu=1460),
    )
    assert lines(run(broken, "fabric")) == [
        "fabric: pool h100mega: VPC mega-gpunet-3 has MTU 1460, tcpxo needs 8244"
    ]


def test_verify_fabric_fails_without_a_network_object_or_the_pool_nics():
    gone = plan("gcp-h100-mega").replaced(
        lambda r: (
            {"__drop__": True}
            if r.inputs.get("kind") == "Network" and r.inputs["metadata"]["name"] == "vpc5"
            else None
        )
    )
    assert any("pod network vpc5 has no Device Network" in line for line in lines(run(gone, "fabric")))
    fewer = edit(
        plan("gcp-h100-mega"),
        lambda r: r.type == POOL and r.inputs.get("name") == "h100mega",
        lambda i: i["networkConfig"]["additionalNodeNetworkConfigs"].pop(),
    )
    assert any("nodes get NICs on" in line for line in lines(run(fewer, "fabric")))


def test_verify_fabric_pods_must_carry_the_fabric(monkeypatch):
    # The job builder applies the pool's PodFabric: the reference platform's training pods are clean.
    assert lines(run(plan("gcp-h100-mega"), "fabric")) == []
    # Pods without the RxDM sidecar (a builder that forgets it) fail by team and pool.
    from infra.verify import context

    def without_sidecars(p):
        pods, notes = real(p)
        pods = copy.deepcopy(pods)  # the job runs behind them are cached for other tests
        for pod in pods:
            pod.template["spec"].pop("initContainers", None)
        return pods, notes

    real = context.training_pods
    monkeypatch.setattr(context, "training_pods", without_sidecars)
    report = run(plan("gcp-h100-mega"), "fabric")
    assert {line.split(" lacks")[0] for line in lines(report)} == {
        "fabric: team pretrain pod on pool h100mega",
        "fabric: team research pod on pool h100mega",
    }
    assert "native sidecar tcpxo-daemon" in lines(report)[0]


def test_topology_levels_on_compact_a3_pools_only():
    mega = mega_pool_output()
    assert mega["topologyLevels"] == [
        "cloud.google.com/gce-topology-block",
        "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-host",
        "kubernetes.io/hostname",
    ]
    # gcp-dev's a3-highgpu-8g pool has no compact placement: GKE gives no topology labels to rely on.
    assert all(not p.get("topologyLevels") for p in planned("gcp-dev").outputs["nodePools"])


# ---- RDMA (a3-ultragpu-8g, a4-highgpu-8g) -------------------------------------------------------------
def ultra_platform() -> dict:
    obj = mutated("gcp-h100-mega")
    obj["nodePools"][1].update(gpu="H200", machineType="a3-ultragpu-8g")
    return obj


@pytest.mark.parametrize("machine", ["a3-ultragpu-8g", "a4-highgpu-8g"])
def test_rdma_table(machine):
    fabric = F.fabric_of(machine)
    assert fabric is F.RDMA and (fabric.networks, fabric.rdma_subnets, fabric.rdma_mtu) == (1, 8, 8896)
    nics = json.loads(F.pod_fabric(fabric).annotations[F.INTERFACES_ANNOTATION])
    # The pod gets the 8 RDMA NICs (eth2..eth9, after the node's extra gVNIC on eth1), no sidecar.
    assert nics[1:] == [{"interfaceName": f"eth{i + 2}", "network": f"rdma-{i}"} for i in range(8)]
    assert F.pod_fabric(fabric).sidecars == () and fabric.env["NCCL_NET"] == "gIB"
    params = [o for o in F.cluster_objects((fabric,), "u") if o.kind == "GKENetworkParamSet"]
    assert [p.spec["deviceMode"] for p in params] == ["NetDevice"] + ["RDMA"] * 8
    # gIB's other NCCL settings: the launcher sources the installer's script from the pod's gib mount
    script = fabric.env["TRAINPLANE_ENV_SCRIPT"]
    mounts = {m["mountPath"] for m in F.pod_fabric(fabric).volume_mounts}
    assert script == "/usr/local/gib/scripts/set_nccl_env.sh" and "/usr/local/gib" in mounts


def test_rdma_pool_plans_a_roce_network_without_firewall_and_verifies():
    from tests.helpers.gcp import plan_platform
    from tests.helpers.verify_plans import plan_of

    obj = ultra_platform()
    result = plan_platform(obj)
    roce = [r.inputs for r in result.of_type(NETWORK) if r.inputs["name"] == "mega-rdma-net"]
    assert (
        roce[0]["networkProfile"] == "projects/example-ml-prod/global/networkProfiles/us-central1-c-vpc-roce"
    )
    assert roce[0]["mtu"] == 8896
    assert len([s for s in result.of_type(SUBNET) if s.inputs["name"].startswith("mega-rdma-sub-")]) == 8
    assert not [f for f in result.of_type(FIREWALL) if "rdma" in f.name]  # RoCE networks take no rules
    pools = {p.inputs["name"]: p.inputs for p in result.of_type(POOL)}
    nics = pools["h100mega"]["networkConfig"]["additionalNodeNetworkConfigs"]
    assert [n["network"] for n in nics] == ["mega-gpunet-0"] + ["mega-rdma-net"] * 8
    assert run(plan_of(obj), "fabric").ok


def test_rdma_pools_need_one_zone_and_no_tcpx_neighbours():
    obj = ultra_platform()
    obj["nodePools"][1]["zones"] = []
    del obj["nodePools"][1]["placement"]
    assert [p for p in problems(obj) if "RDMA" in p] == [
        "platform.nodePools[1].zones: GPUDirect RDMA needs its pools in one zone (the RoCE network profile is "
        "per zone); name exactly one, the same for every RDMA pool"
    ]
    mixed = ultra_platform()
    mixed["nodePools"].append({**mutated("gcp-h100-mega")["nodePools"][1], "name": "mega2"})
    assert any(
        p.startswith("platform.nodePools[2].machineType: GPUDirect TCPX/TCPXO") for p in problems(mixed)
    )


def test_verify_fabric_fails_a_tcpx_cluster_that_a_channel_can_upgrade_past_its_node_image():
    assert run(plan("gcp-dev"), "fabric").ok  # a3-highgpu-8g pool, held on 1.34
    unheld = edit(plan("gcp-dev"), lambda r: r.type == CLUSTER, lambda i: i.pop("maintenancePolicy"))
    found = lines(run(unheld, "fabric"))
    assert any(
        "pool h100: the cluster has no NO_MINOR_OR_NODE_UPGRADES maintenance exclusion" in line
        for line in found
    ), found

    def on_135(inputs: dict) -> None:
        inputs["minMasterVersion"] = "1.35"

    found = lines(run(edit(plan("gcp-dev"), lambda r: r.type == CLUSTER, on_135), "fabric"))
    assert any("pool h100: GKE 1.35 is newer than 1.34" in line for line in found), found


def test_verify_fabric_fails_a_held_tcpx_cluster_on_a_channel_whose_hold_ends_with_standard_support():
    # The fabric rule: on REGULAR, UNTIL_END_OF_SUPPORT ends at GKE 1.34's end of standard support
    # (2026-10-01), then GKE upgrades the cluster to 1.35 (COS 125). Before, REGULAR passed.
    def on_regular(inputs: dict) -> None:
        inputs["releaseChannel"] = {"channel": "REGULAR"}

    found = lines(run(edit(plan("gcp-dev"), lambda r: r.type == CLUSTER, on_regular), "fabric"))
    assert any(
        "pool h100: the cluster is on release channel REGULAR, where its NO_MINOR_OR_NODE_UPGRADES exclusion ends "
        "at the minor's end of standard support" in line
        for line in found
    ), found


def test_a_tcpx_stack_on_a_channel_other_than_extended_is_one_line_naming_release_channel():
    raw = mutated("gcp-dev")
    raw["cluster"]["releaseChannel"] = "REGULAR"
    assert [p for p in problems(raw) if "releaseChannel" in p] == [
        "platform.cluster.releaseChannel: GPUDirect-TCPX machines hold the cluster on GKE 1.34 or older; on "
        "REGULAR the hold ends at the minor's end of standard support (GKE 1.34: 2026-10-01) and GKE upgrades "
        "the cluster to a minor they cannot boot; use EXTENDED (or leave it unset): the hold then lasts through "
        "extended support"
    ]
    del raw["cluster"]["releaseChannel"]
    assert PlatformSpec.load(raw).cluster.release_channel is None  # unset: EXTENDED on a held cluster
