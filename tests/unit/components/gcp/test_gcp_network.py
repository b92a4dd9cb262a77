"""The platform's network as GCP would receive it: VPC, subnet ranges, NAT, firewall scope, BYO."""

from __future__ import annotations

import ipaddress

import pytest

from tests.helpers.gcp import CLUSTER, FILESTORE, FIREWALL, mutated, one, plan, plan_platform

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
ROUTER = "gcp:compute/router:Router"
NAT = "gcp:compute/routerNat:RouterNat"
PSA = "gcp:servicenetworking/connection:Connection"
ADDRESS = "gcp:compute/globalAddress:GlobalAddress"


def test_custom_mode_vpc_with_pod_and_service_secondary_ranges():
    result = plan("gcp-dev")
    assert one(result, NETWORK, "ml-dev-net-vpc").inputs["autoCreateSubnetworks"] is False
    subnet = one(result, SUBNET, "ml-dev-net-subnet").inputs
    assert subnet["ipCidrRange"] == "10.50.0.0/20"
    assert subnet["region"] == "us-central1"
    assert subnet["privateIpGoogleAccess"] is True
    assert subnet["secondaryIpRanges"] == [
        {"rangeName": "pods", "ipCidrRange": "10.64.0.0/14"},
        {"rangeName": "services", "ipCidrRange": "10.68.0.0/20"},
    ]


def test_cloud_nat_serves_only_the_platform_subnet():
    result = plan("gcp-dev")
    router = one(result, ROUTER)
    nat = one(result, NAT).inputs
    assert nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    assert nat["subnetworks"] == [
        {
            "name": "projects/example-ml-dev/regions/us-central1/subnetworks/ml-dev-us-central1",
            "sourceIpRangesToNats": ["ALL_IP_RANGES"],
        }
    ]
    assert nat["router"] == router.inputs.get("name", f"{router.name}-a1b2c3d")
    assert nat["natIpAllocateOption"] == "AUTO_ONLY"


def test_public_nodes_need_no_nat():
    obj = mutated("gcp-dev")
    obj["cluster"]["privateNodes"] = False
    result = plan_platform(obj)
    assert result.of_type(NAT) == [] and result.of_type(ROUTER) == []
    assert one(result, CLUSTER).inputs["privateClusterConfig"]["enablePrivateNodes"] is False


def test_firewall_rules_admit_only_platform_ranges_to_platform_nodes():
    for stack, allowed in (
        # gcp-dev's a3-highgpu-8g pool has GPUDirect-TCPX: 4 fabric networks, each admitting its own subnet.
        ("gcp-dev", {"10.50.0.0/20", "10.64.0.0/14"} | {f"192.168.{16 * i}.0/20" for i in range(4)}),
        # A3 Mega: each GPUDirect network admits its own subnet (192.168.0.0/16 in /20s) and nothing else.
        (
            "gcp-h100-mega",
            {"10.60.0.0/20", "10.80.0.0/14", "10.88.0.0/20"} | {f"192.168.{16 * i}.0/20" for i in range(8)},
        ),
    ):
        result = plan(stack)
        rules = result.of_type(FIREWALL)
        assert rules
        tag = f"{one(result, CLUSTER).inputs['name']}-node"
        for rule in rules:
            fw = rule.inputs
            assert fw["direction"] == "INGRESS"
            assert fw["targetTags"] == [tag], rule.name
            assert "sourceTags" not in fw
            for cidr in fw["sourceRanges"]:
                net = ipaddress.ip_network(cidr)
                assert net.is_private and net.prefixlen >= 14, (rule.name, cidr)
                assert cidr in allowed, (rule.name, cidr)
        # Every node pool carries the tag the rules target.
        for p in result.of_type("gcp:container/nodePool:NodePool"):
            assert p.inputs["nodeConfig"]["tags"] == [tag]


def test_intra_platform_rule_covers_nodes_and_pods_only():
    fw = one(plan("gcp-dev"), FIREWALL, "ml-dev-net-intra").inputs
    assert fw["sourceRanges"] == ["10.50.0.0/20", "10.64.0.0/14"]
    assert fw["allows"] == [{"protocol": "tcp"}, {"protocol": "udp"}, {"protocol": "icmp"}]


def test_lustre_gets_private_services_access_and_one_port():
    result = plan("gcp-h100-mega")
    addr = one(result, ADDRESS).inputs
    assert (addr["address"], addr["prefixLength"], addr["purpose"]) == ("10.88.0.0", 20.0, "VPC_PEERING")
    peering = one(result, PSA)
    assert peering.inputs["service"] == "servicenetworking.googleapis.com"
    fw = one(result, FIREWALL, "mega-net-lustre").inputs
    assert fw["sourceRanges"] == ["10.88.0.0/20"]
    assert fw["allows"] == [{"protocol": "tcp", "ports": ["988"]}]
    # Without Lustre there is no peering and no Lustre rule.
    dev = plan("gcp-dev")
    assert dev.of_type(PSA) == [] and dev.of_type(ADDRESS) == []
    assert [r.name for r in dev.of_type(FIREWALL) if "fabric" not in r.name] == ["ml-dev-net-intra"]


def test_lustre_network_uses_jumbo_frames():
    """Managed Lustre's VPC set-up uses --mtu=8896 (up to ~10% more throughput than 1460)."""
    assert one(plan("gcp-h100-mega"), NETWORK, "mega-net-vpc").inputs["mtu"] == 8896
    # Other platforms keep GCP's default MTU.
    assert "mtu" not in one(plan("gcp-dev"), NETWORK, "ml-dev-net-vpc").inputs


def test_brought_network_is_referenced_not_created():
    result = plan("gcp-byo-network")
    for type_ in (NETWORK, SUBNET, ROUTER, NAT, FIREWALL, PSA, ADDRESS):
        assert result.of_type(type_) == [], type_
    c = one(result, CLUSTER).inputs
    assert c["network"] == "projects/example-ml-lab/global/networks/lab-vpc"
    assert c["subnetwork"] == "projects/example-ml-lab/regions/europe-west4/subnetworks/lab-europe-west4"
    assert c["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "lab-gke-pods",
        "servicesSecondaryRangeName": "lab-gke-services",
    }


def test_brought_subnet_without_range_names_lets_gke_add_the_ranges():
    obj = mutated("gcp-byo-network")
    del obj["network"]["podsRangeName"], obj["network"]["servicesRangeName"]
    obj["network"]["podsCidr"] = "10.200.0.0/14"
    result = plan_platform(obj)
    assert one(result, CLUSTER).inputs["ipAllocationPolicy"] == {"clusterIpv4CidrBlock": "10.200.0.0/14"}


def test_shared_vpc_of_a_host_project_reaches_filestore_through_private_services_access():
    obj = mutated("gcp-byo-network")
    obj["network"]["network"] = "projects/example-net-host/global/networks/shared"
    obj["network"]["subnetwork"] = "projects/example-net-host/regions/europe-west4/subnetworks/ml"
    result = plan_platform(obj)
    c = one(result, CLUSTER).inputs
    assert c["network"] == "projects/example-net-host/global/networks/shared"
    assert c["subnetwork"] == "projects/example-net-host/regions/europe-west4/subnetworks/ml"
    assert one(result, FILESTORE).inputs["networks"] == [
        {
            "network": "projects/example-net-host/global/networks/shared",
            "modes": ["MODE_IPV4"],
            "connectMode": "PRIVATE_SERVICE_ACCESS",
        }
    ]
