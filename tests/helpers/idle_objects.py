"""The API objects the idle reclaim controller reads (controllers/idle_reclaim.py), for its unit tests
(test_idle_reclaim.py, test_idle_startup.py): a JobSet, its Kueue Workload, a pod of it, a firing idle alert."""

from __future__ import annotations

from contract.idle import IDLE_ALERT
from controllers import idle_reclaim as R


def jobset(name, ns="team-a", labels=None, uid=None):
    return {
        "apiVersion": R.JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{name}", "labels": labels or {}},
    }


def workload(job, active=None, annotations=None, controller=True, rv="7"):
    wl = {
        "apiVersion": R.WORKLOAD_API,
        "kind": "Workload",
        "metadata": {
            "name": f"jobset-{job['metadata']['name']}-abcde",
            "namespace": job["metadata"]["namespace"],
            "uid": f"wl-{job['metadata']['name']}",
            "resourceVersion": rv,
            "ownerReferences": [
                {
                    "apiVersion": R.JOBSET_API,
                    "kind": "JobSet",
                    "name": job["metadata"]["name"],
                    "uid": job["metadata"]["uid"],
                    "controller": controller,
                }
            ],
        },
        "spec": {"queueName": "default"},
    }
    if annotations is not None:
        wl["metadata"]["annotations"] = annotations
    if active is not None:
        wl["spec"]["active"] = active
    return wl


def pod(job, name, phase="Running"):
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": job["metadata"]["namespace"],
            "labels": {"jobset.sigs.k8s.io/jobset-name": job["metadata"]["name"]},
        },
        "status": {"phase": phase},
    }


def alert(job, ns="team-a", state="firing", name=IDLE_ALERT):
    return {
        "metric": {"alertname": name, "alertstate": state, "namespace": ns, "job": job, "team": "a"},
        "value": [0, "1"],
    }
