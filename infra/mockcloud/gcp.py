"""What Google Cloud would answer: computed outputs per resource type and invoke results."""

from __future__ import annotations

from typing import Any

PROJECT = "example-ml-dev"
PROJECT_NUMBER = "123456789012"


def _project(inputs: dict[str, Any]) -> str:
    return str(inputs.get("project") or PROJECT)


COMPUTED = {
    "gcp:container/cluster:Cluster": lambda n, i: {
        "endpoint": "203.0.113.10",
        "masterAuth": {"clusterCaCertificate": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM="},
        "selfLink": f"https://container.googleapis.com/v1/projects/{_project(i)}/locations/{i.get('location')}/clusters/{i.get('name') or n}",
        "masterVersion": i.get("minMasterVersion") or "1.33.5-gke.1000000",
    },
    "gcp:serviceaccount/account:Account": lambda n, i: {
        "email": f"{i.get('accountId') or n}@{_project(i)}.iam.gserviceaccount.com",
        "name": f"projects/{_project(i)}/serviceAccounts/{i.get('accountId') or n}@{_project(i)}.iam.gserviceaccount.com",
        "member": f"serviceAccount:{i.get('accountId') or n}@{_project(i)}.iam.gserviceaccount.com",
        "uniqueId": "110000000000000000001",
    },
    "gcp:filestore/instance:Instance": lambda n, i: {
        "networks": [{**((i.get("networks") or [{}])[0] or {}), "ipAddresses": ["10.50.8.2"]}],
    },
    "gcp:lustre/instance:Instance": lambda n, i: {
        "mountPoint": "10.50.8.3@tcp:/lfs",
        "filesystem": i.get("filesystem") or "lfs",
    },
    "gcp:storage/bucket:Bucket": lambda n, i: {
        "url": f"gs://{i.get('name') or n}",
        "selfLink": f"https://www.googleapis.com/storage/v1/b/{i.get('name') or n}",
    },
    "gcp:compute/network:Network": lambda n, i: {
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{_project(i)}/global/networks/{i.get('name') or n}",
    },
    "gcp:compute/subnetwork:Subnetwork": lambda n, i: {
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{_project(i)}/regions/{i.get('region')}/subnetworks/{i.get('name') or n}",
    },
}

INVOKES = {
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
