"""verify storage: claims bind to a class that exists with an installed provisioner; team volumes mount
on the pools their jobs use. Each case breaks a reference platform on purpose and expects the check to
fail by name (or shows the same platform passing once the piece is there)."""

from __future__ import annotations

from tests.unit.verify_plans import edit, kind, lines, plan, plus, prometheus_class, release, run

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


def test_a_team_volume_whose_ports_the_policies_close_does_not_mount():
    assert not [line for line in lines(run(plan("aws-dev"), "storage")) if "close TCP" in line]
    p = plan("aws-dev").replaced(
        lambda r: {"__drop__": True} if kind("NetworkPolicy", "allow-storage-datasets")(r) else None
    )
    closed = [line for line in lines(run(p, "storage")) if "close TCP" in line]
    assert closed and "988" in closed[0] and "PersistentVolume datasets-research" in closed[0], closed


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
