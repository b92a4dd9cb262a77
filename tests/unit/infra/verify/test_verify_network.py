"""verify network: the training pod's flows are allowed, other teams' are denied, and the cluster
enforces NetworkPolicy. Broken platforms are made from the reference plans."""

from __future__ import annotations

import json

import pytest

from tests.helpers.verify_plans import edit, kind, lines, plan, plus, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

VPC_CNI = "aws:eks/addon:Addon"


def _vpc_cni(config: dict | None):
    def change(inputs: dict) -> None:
        inputs["configurationValues"] = json.dumps(config) if config is not None else None

    return change


def _is_vpc_cni(r) -> bool:
    return r.type == VPC_CNI and r.inputs.get("addonName") == "vpc-cni"


def test_eks_enforces_network_policy_only_with_the_vpc_cni_agent_on():
    on = lines(run(edit(plan("aws-dev"), _is_vpc_cni, _vpc_cni({"enableNetworkPolicy": "true"})), "network"))
    assert not any("enableNetworkPolicy" in line for line in on), on
    off = run(edit(plan("aws-dev"), _is_vpc_cni, _vpc_cni({"enableNetworkPolicy": "false"})), "network")
    assert off.failed() == ["network"]
    assert any("vpc-cni" in line and "enforces none" in line for line in lines(off))


def test_gke_without_dataplane_v2_or_network_policy_does_not_enforce():
    def legacy(inputs: dict) -> None:
        inputs["datapathProvider"] = "LEGACY_DATAPATH"
        inputs.pop("networkPolicy", None)

    p = edit(plan("gcp-dev"), lambda r: r.type == "gcp:container/cluster:Cluster", legacy)
    assert any("Dataplane V2" in line for line in lines(run(p, "network")))


def test_dns_is_a_flow_every_training_pod_needs():
    p = plan("aws-dev").replaced(
        lambda r: {"__drop__": True} if kind("NetworkPolicy", "allow-dns")(r) else None
    )
    dns = [line for line in lines(run(p, "network")) if "DNS" in line]
    assert any(":53/UDP" in line for line in dns) and any(":53/TCP" in line for line in dns), dns
    assert all("kube-system/k8s-app=kube-dns" in line and "must be allowed" in line for line in dns), dns


def test_another_team_that_opens_its_namespace_is_reported():
    p = plan("aws-h200-efa")
    assert not [line for line in lines(run(p, "network")) if "must be denied" in line]
    # Both ends must open: eval admits everyone in, llm lets its pods out anywhere.
    eval_in = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "allow-all-in", "namespace": "eval"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]},
    }
    llm_out = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "allow-all-out", "namespace": "llm"},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]},
    }
    assert not [line for line in lines(run(plus(p, eval_in), "network")) if "must be denied" in line]
    open_ = [line for line in lines(run(plus(p, eval_in, llm_out), "network")) if "must be denied" in line]
    assert open_ and all("team llm into team eval" in line for line in open_), open_


def test_gke_pods_need_the_metadata_server_for_workload_identity():
    def no_metadata(r):
        return (
            {"__drop__": True}
            if r.inputs.get("kind") == "NetworkPolicy" and "169.254.169.254" in json.dumps(r.inputs)
            else None
        )

    blocked = [
        line
        for line in lines(run(plan("gcp-dev").replaced(no_metadata), "network"))
        if "gke-metadata-server" in line
    ]
    assert blocked and "169.254.169.254:80/TCP must be allowed" in blocked[0], blocked
    allow = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "allow-metadata", "namespace": "research"},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [{"ipBlock": {"cidr": "169.254.169.254/32"}}],
                    "ports": [{"protocol": "TCP", "port": 80}],
                }
            ],
        },
    }
    fixed = lines(run(plus(plan("gcp-dev").replaced(no_metadata), allow), "network"))
    assert not any("gke-metadata-server" in line for line in fixed), fixed


def test_a_private_only_eks_endpoint_needs_a_way_in():
    cluster = next(r for r in plan("aws-byo-vpc").resources if r.type == "aws:eks/cluster:Cluster")
    shut = plan("aws-byo-vpc").replaced(
        lambda r: {"__drop__": True} if r.type.endswith("IngressRule") and cluster.urn in r.deps else None
    )
    assert any("private-only API endpoint" in line for line in lines(run(shut, "network")))
    rule = {"ipProtocol": "tcp", "fromPort": 443, "toPort": 443, "cidrIpv4": "10.0.0.0/8"}
    opened = plus(
        shut, rule, type_="aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", deps=(cluster.urn,)
    )
    assert not any("private-only" in line for line in lines(run(opened, "network")))
