"""What Google Cloud would answer: computed outputs per resource type and invoke results.

Ids follow the provider's import formats (`projects/<p>/...`); resources Pulumi auto-names get the name
with a random-looking suffix, as the engine would give them.
"""

from __future__ import annotations

from typing import Any

from components.backends import MockAnswer, MockAnswers

PROJECT = "example-ml-dev"
PROJECT_NUMBER = "123456789012"
COMPUTE = "https://www.googleapis.com/compute/v1"


def _project(inputs: dict[str, Any]) -> str:
    return str(inputs.get("project") or PROJECT)


def _name(name: str, inputs: dict[str, Any], key: str = "name") -> str:
    """The explicit name, or what Pulumi's auto-naming would make of the resource name."""
    return str(inputs.get(key) or f"{name}-a1b2c3d")


def _last(ref: Any) -> str:
    return str(ref or "").rstrip("/").rsplit("/", 1)[-1]


def _network(n: str, i: dict[str, Any]) -> dict[str, Any]:
    name = _name(n, i)
    return {
        "id": f"projects/{_project(i)}/global/networks/{name}",
        "name": name,
        "selfLink": f"{COMPUTE}/projects/{_project(i)}/global/networks/{name}",
        "gatewayIpv4": "",
    }


def _subnetwork(n: str, i: dict[str, Any]) -> dict[str, Any]:
    name, region = _name(n, i), i.get("region")
    cidr = str(i.get("ipCidrRange") or "10.0.0.0/16")
    return {
        "id": f"projects/{_project(i)}/regions/{region}/subnetworks/{name}",
        "name": name,
        "selfLink": f"{COMPUTE}/projects/{_project(i)}/regions/{region}/subnetworks/{name}",
        "gatewayAddress": cidr.split("/")[0].rsplit(".", 1)[0] + ".1",
    }


def _cluster(n: str, i: dict[str, Any]) -> dict[str, Any]:
    name, location = _name(n, i), i.get("location")
    return {
        "id": f"projects/{_project(i)}/locations/{location}/clusters/{name}",
        "name": name,
        "endpoint": "203.0.113.10",
        "masterAuth": {"clusterCaCertificate": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM="},
        "selfLink": f"https://container.googleapis.com/v1/projects/{_project(i)}/locations/{location}/clusters/{name}",
        "masterVersion": "1.33.5-gke.1000000",
        "labelFingerprint": "a1b2c3d4",
        # GKE reports it on every cluster: DECRYPTED (no application-layer secrets encryption) where none
        # was set (terraform-provider-google v7.45.0 resource_container_cluster.go: Optional+Computed,
        # flattenDatabaseEncryption copies the API's state and key).
        "databaseEncryption": i.get("databaseEncryption") or {"state": "DECRYPTED", "keyName": ""},
    }


def _node_pool(n: str, i: dict[str, Any]) -> dict[str, Any]:
    name = _name(n, i)
    cluster = _last(i.get("cluster"))
    zones = i.get("nodeLocations") or ["us-central1-a"]
    return {
        "id": f"projects/{_project(i)}/locations/{i.get('location')}/clusters/{cluster}/nodePools/{name}",
        "name": name,
        "version": "1.33.5-gke.1000000",
        # Optional+Computed (resource_container_node_pool.go): the pool's current size per zone.
        "nodeCount": i.get("nodeCount") if i.get("nodeCount") is not None else i.get("initialNodeCount") or 0,
        "instanceGroupUrls": [
            f"{COMPUTE}/projects/{_project(i)}/zones/{z}/instanceGroupManagers/gke-{cluster}-{name}-1a2b3c4d-grp"
            for z in zones
        ],
    }


def _account(n: str, i: dict[str, Any]) -> dict[str, Any]:
    email = f"{i.get('accountId') or n}@{_project(i)}.iam.gserviceaccount.com"
    return {
        "id": f"projects/{_project(i)}/serviceAccounts/{email}",
        "email": email,
        "name": f"projects/{_project(i)}/serviceAccounts/{email}",
        "member": f"serviceAccount:{email}",
        "uniqueId": "110000000000000000001",
    }


def _filestore(n: str, i: dict[str, Any]) -> dict[str, Any]:
    name = _name(n, i)
    return {
        "id": f"projects/{_project(i)}/locations/{i.get('location')}/instances/{name}",
        "name": name,
        "networks": [{**((i.get("networks") or [{}])[0] or {}), "ipAddresses": ["10.50.8.2"]}],
    }


def _lustre(n: str, i: dict[str, Any]) -> dict[str, Any]:
    fs = i.get("filesystem") or "lfs"
    path = f"projects/{_project(i)}/locations/{i.get('location')}/instances/{i.get('instanceId') or n}"
    return {
        "id": path,
        "name": path,
        "mountPoint": f"10.72.0.3@tcp:/{fs}",
        "filesystem": fs,
        "state": "ACTIVE",
    }


def _bucket(n: str, i: dict[str, Any]) -> dict[str, Any]:
    name = _name(n, i)
    return {
        "id": name,
        "name": name,
        "url": f"gs://{name}",
        "selfLink": f"https://www.googleapis.com/storage/v1/b/{name}",
    }


def _named(kind: str, regional: bool = False):
    def answer(n: str, i: dict[str, Any]) -> dict[str, Any]:
        name = _name(n, i)
        scope = f"regions/{i.get('region')}" if regional else "global"
        return {"name": name, "selfLink": f"{COMPUTE}/projects/{_project(i)}/{scope}/{kind}/{name}"}

    return answer


COMPUTED = {
    "gcp:container/cluster:Cluster": _cluster,
    "gcp:container/nodePool:NodePool": _node_pool,
    "gcp:serviceaccount/account:Account": _account,
    "gcp:filestore/instance:Instance": _filestore,
    "gcp:lustre/instance:Instance": _lustre,
    "gcp:storage/bucket:Bucket": _bucket,
    "gcp:compute/network:Network": _network,
    "gcp:compute/subnetwork:Subnetwork": _subnetwork,
    "gcp:compute/router:Router": _named("routers", regional=True),
    "gcp:compute/firewall:Firewall": _named("firewalls"),
    "gcp:compute/globalAddress:GlobalAddress": _named("addresses"),
    "gcp:compute/routerNat:RouterNat": lambda n, i: {"name": _name(n, i)},
    "gcp:servicenetworking/connection:Connection": lambda n, i: {
        "peering": "servicenetworking-googleapis-com"
    },
}

INVOKES: dict[str, MockAnswer] = {
    "gcp:organizations/getClientConfig:getClientConfig": lambda t, a: {
        "project": PROJECT,
        "region": "us-central1",
        "zone": "us-central1-a",
        "accessToken": "ya29.offline",
        "id": "client-config",
    },
    "gcp:organizations/getProject:getProject": lambda t, a: {
        "projectId": a.get("projectId") or PROJECT,
        "number": PROJECT_NUMBER,
        "name": a.get("projectId") or PROJECT,
    },
    "gcp:compute/getZones:getZones": lambda t, a: {
        "names": ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"],
    },
}

ANSWERS = MockAnswers(computed=COMPUTED, invokes=INVOKES)
