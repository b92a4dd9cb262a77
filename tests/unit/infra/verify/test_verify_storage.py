"""verify storage: claims bind to a class that exists with an installed provisioner; team volumes mount
on the pools their jobs use. Each case breaks a reference platform on purpose and expects the check to
fail by name (or shows the same platform passing once the piece is there)."""

from __future__ import annotations

import json

import pytest

from infra.verify import verify
from infra.verify.dump import load_dump
from infra.verify.netpol import Peer, allowed
from tests.helpers.gcp import mutated
from tests.helpers.verify_plans import edit, lines, plan, plan_of, plus, prometheus_class, release, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

PROM_CLAIM = "prometheus-kube-prometheus-stack-prometheus-db"
EBS_ADDON = "aws:eks/addon:Addon"


def _no_ebs_addon(p):
    return p.replaced(
        lambda r: (
            {"__drop__": True}
            if r.type == EBS_ADDON and r.inputs.get("addonName") == "aws-ebs-csi-driver"
            else None
        )
    )


def _storage_class(name: str, provisioner: str, default: bool = False) -> dict:
    meta = {"name": name}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": meta,
        "provisioner": provisioner,
    }


def test_a_claim_naming_a_class_nobody_creates_fails():
    broken = edit(plan("aws-dev"), release("kube-prometheus-stack"), prometheus_class("no-such-class"))
    report = run(broken, "storage")
    assert report.failed() == ["storage"]
    assert any(PROM_CLAIM in line and "'no-such-class'" in line for line in lines(report)), lines(report)


def test_a_claim_without_class_on_eks_130_without_a_default_class_stays_pending():
    p = edit(plan("aws-dev"), release("kube-prometheus-stack"), prometheus_class(None))
    p = p.replaced(lambda r: {"__drop__": True} if r.inputs.get("kind") == "StorageClass" else None)
    report = run(p, "storage")
    assert any(PROM_CLAIM in line and "no default StorageClass" in line for line in lines(report)), lines(
        report
    )


def test_a_class_whose_provisioner_is_not_installed_fails_and_binds_once_it_is():
    p = edit(plan("aws-dev"), release("kube-prometheus-stack"), prometheus_class("verify-gp3"))
    p = plus(_no_ebs_addon(p), _storage_class("verify-gp3", "ebs.csi.aws.com"))
    missing = lines(run(p, "storage"))
    assert any(
        PROM_CLAIM in line and "ebs.csi.aws.com" in line and "does not install" in line for line in missing
    )

    addon = {
        "addonName": "aws-ebs-csi-driver",
        "clusterName": "ml-dev",
        "serviceAccountRoleArn": "arn:aws:iam::1:role/ebs",
    }
    fixed = lines(run(plus(p, addon, type_=EBS_ADDON), "storage"))
    assert not any(PROM_CLAIM in line for line in fixed), fixed

    no_role = lines(run(plus(p, {**addon, "serviceAccountRoleArn": None}, type_=EBS_ADDON), "storage"))
    assert any("aws-ebs-csi-driver" in line and "no IAM role" in line for line in no_role), no_role


def test_an_existing_clusters_default_class_is_left_to_the_live_check():
    report = run(plan("onprem-dev"), "storage")
    assert not any(PROM_CLAIM in line for line in lines(report))
    assert any(PROM_CLAIM in n and "--kubeconfig" in n for n in report.check("storage").notes)


def test_a_team_volume_without_its_csi_node_plugin_does_not_mount():
    p = plan("aws-dev").replaced(lambda r: {"__drop__": True} if release("aws-fsx-csi-driver")(r) else None)
    report = run(p, "storage")
    assert any(
        "research/datasets" in line or "PersistentVolume datasets-research" in line for line in lines(report)
    )
    assert any("fsx.csi.aws.com" in line and "node plugin" in line for line in lines(report)), lines(report)


FILE_SERVERS = {  # a stack's team, its file server's address (mock or TEST-NET) and the server's port
    "aws-dev": ("research", "10.40.16.10", 988),
    "gcp-dev": ("research", "10.50.8.2", 2049),
    "gcp-h100-mega": ("research", "10.72.0.3", 988),
    "onprem-dev": ("research", "192.168.10.5", 2049),
}


@pytest.mark.parametrize("stack", sorted(FILE_SERVERS))
def test_pod_network_policies_open_no_egress_to_file_servers_and_verify_needs_none(stack):
    # The node mounts the volume (kubelet, CSI node plugin, kernel NFS/Lustre client): a team's pods get no
    # line to the file servers, and neither `network` nor `storage` asks for one.
    team, address, port = FILE_SERVERS[stack]
    p = plan(stack)
    policies = [o.body for o in p.objects("NetworkPolicy", team)]
    assert policies and not [o for o in p.objects("NetworkPolicy") if "allow-storage" in o.name]
    trainer = Peer(team, {"app": "trainer"})
    assert not allowed(policies, trainer, Peer(None, ip=address), port)
    report = verify(p, ["storage", "network"])
    assert report.ok, lines(report)
    assert not [f for f in report.check("network").examined if "file system" in f]
    assert report.check("storage").examined


def test_the_file_systems_security_group_must_admit_the_pools_nodes():
    def nodes_rule(r) -> bool:
        return (
            r.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule" and "-sg-nodes-" in r.name
        )

    for stack, port in (("aws-dev", "988"), ("aws-byo-vpc", "2049")):
        assert not [line for line in lines(run(plan(stack), "storage")) if "security groups admit" in line]
        closed = [
            line
            for line in lines(
                run(plan(stack).replaced(lambda r: {"__drop__": True} if nodes_rule(r) else None), "storage")
            )
            if "security groups admit" in line
        ]
        assert closed and port in closed[0], (stack, closed)


# ---- GKE: the node-level rules of Managed Lustre and Filestore (infra/verify/clouds/gcp/storage.py) ---------------
FIREWALL = "gcp:compute/firewall:Firewall"
LUSTRE = "gcp:lustre/instance:Instance"
CLUSTER = "gcp:container/cluster:Cluster"


def _lustre_133():
    obj = mutated("gcp-h100-mega")
    obj["cluster"]["kubernetesVersion"] = "1.33"  # GKE before 1.33.2-gke.4780000: LNet on 6988
    return plan_of(obj, "lustre-133")


def test_the_lustre_firewall_must_admit_the_nodes_on_the_instances_port():
    def only_6988(inputs: dict) -> None:
        inputs["allows"] = [{"protocol": "tcp", "ports": ["6988"]}]

    broken = edit(
        plan("gcp-h100-mega"), lambda r: r.type == FIREWALL and r.name == "mega-net-lustre", only_6988
    )
    closed = [
        line for line in lines(run(broken, "storage")) if "no ingress firewall rule admits TCP 988" in line
    ]
    assert closed and "PersistentVolume scratch-" in closed[0] and "pool h100mega" in closed[0], lines(
        run(broken, "storage")
    )


def test_a_gke_133_lustre_platform_is_checked_on_6988_in_its_plan_and_its_dump(tmp_path):
    p = _lustre_133()
    assert run(p, "storage").ok, lines(run(p, "storage"))
    # A dump of the same plan reaches the same verdict: the port comes from the plan's lustre.Instance.
    dump = tmp_path / "lustre-133.json"
    dump.write_text(
        json.dumps(
            {
                "stack": "lustre-133",
                "resources": [
                    {
                        "urn": r.urn,
                        "type": r.type,
                        "name": r.name,
                        "parent": r.parent,
                        "custom": r.custom,
                        "provider": r.provider,
                        "deps": list(r.deps),
                        "inputs": dict(r.inputs),
                    }
                    for r in p.resources
                ],
                "outputs": dict(p.outputs),
            },
            default=str,
        )
    )
    from_dump = verify(load_dump(dump), ["storage"])
    assert from_dump.ok, lines(from_dump)
    # The instance without GKE support serves 988: the CSI add-on (legacy port) and the 6988 rule disagree.
    broken = edit(p, lambda r: r.type == LUSTRE, lambda i: i.pop("gkeSupportEnabled"))
    found = lines(run(broken, "storage"))
    assert any(
        "enableLegacyLustrePort True" in line and "serves LNet on TCP 988" in line for line in found
    ), found
    assert any("no ingress firewall rule admits TCP 988" in line for line in found), found


def test_filestore_must_export_to_the_node_subnet():
    assert run(plan("gcp-dev"), "storage").ok

    def pods_only(inputs: dict) -> None:
        inputs["fileShares"]["nfsExportOptions"][0]["ipRanges"] = ["10.64.0.0/14"]

    broken = edit(plan("gcp-dev"), lambda r: r.type == "gcp:filestore/instance:Instance", pods_only)
    found = [line for line in lines(run(broken, "storage")) if "exports only to 10.64.0.0/14" in line]
    assert found and "not the node subnet 10.50.0.0/20" in found[0], lines(run(broken, "storage"))
