"""The GPU health controller's pod: `trainplane-controller gpu-health` in the controller image (controllers/,
images/controller/), its RBAC rules and its config. gpu_health.py deploys it."""

from __future__ import annotations

from typing import Any

from components.spec import IdleSpec
from contract.idle import IDLE_ALERT, IDLE_PERMISSIONS
from contract.recovery import CONFIG_ENV, CONTROLLER_PERMISSIONS
from contract.recovery import CONTROLLER_NAME as CONTROLLER

# A team with an idle policy: (team, its namespace, the policy).
IdleTeam = tuple[str, str, IdleSpec]

# The controller's config file: the ConfigMap (config.json only, no source) mounted here.
CONFIG_DIR = "/etc/trainplane"
HEALTH_PORT = 8080
# The idle exemption series (idle_round.ExemptGauge), scraped by the controller's PodMonitor.
METRICS_PORT, METRICS_PORT_NAME = 8081, "metrics"


def controller_rules(idle: bool = False) -> list[dict[str, list[str]]]:
    """The ClusterRole: the contract's permissions, nothing more (kopf itself needs none beyond them in
    the way gpu_health_operator.py runs it: standalone, no scanning, no Event posting, no finalizers); with
    a team's idle policy, also the contract's IDLE_PERMISSIONS."""
    perms = CONTROLLER_PERMISSIONS + (IDLE_PERMISSIONS if idle else ())
    return [{"apiGroups": [g], "resources": [r], "verbs": list(v)} for g, r, v in perms]


def idle_config(idle_teams: tuple[IdleTeam, ...]) -> dict[str, Any]:
    """The controller config's `idle` (idle_reclaim.TeamPolicy.from_config): each team's action and
    exemptions; the threshold and window are the alert's (the idle rules), repeated for the record."""
    return {
        "alert": IDLE_ALERT,
        "metricsPort": METRICS_PORT,
        "teams": [
            {
                "team": team,
                "namespace": namespace,
                "action": idle.action,
                "exemptLabels": dict(sorted(idle.exempt_labels.items())),
                "gpuUtilBelow": idle.gpu_util_below,
                "forMinutes": idle.minutes,
            }
            for team, namespace, idle in sorted(idle_teams, key=lambda t: t[1])
        ],
    }


def controller_pod(config_map: str, image: str, metrics: bool = False) -> dict[str, Any]:
    """The operator's pod: the controller image's entry point (images.controller_image: by digest), its
    config from the ConfigMap; nothing installed or shipped at start."""
    restricted = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    pod: dict[str, Any] = {
        "serviceAccountName": CONTROLLER,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "runAsGroup": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "controller",
                "image": image,
                "command": ["trainplane-controller", "gpu-health"],
                "args": [f"--liveness=http://0.0.0.0:{HEALTH_PORT}/healthz"],
                "env": [
                    {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                    {"name": "HOME", "value": "/tmp"},
                    {"name": CONFIG_ENV, "value": f"{CONFIG_DIR}/config.json"},
                ],
                # kopf's liveness endpoint answers once the operator runs (kopf docs, "Health-checks").
                "livenessProbe": {
                    "httpGet": {"path": "/healthz", "port": HEALTH_PORT},
                    "initialDelaySeconds": 30,
                    "periodSeconds": 30,
                    "timeoutSeconds": 5,
                },
                "resources": {
                    "requests": {"cpu": "20m", "memory": "128Mi"},
                    "limits": {"memory": "256Mi"},
                },
                "securityContext": restricted,
                "volumeMounts": [
                    {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            }
        ],
        "volumes": [
            {"name": "config", "configMap": {"name": config_map}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        ],
    }
    if metrics:  # the idle exemption series (teams with an idle policy)
        pod["containers"][0]["ports"] = [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT}]
    return pod


def controller_pod_monitor() -> dict[str, Any]:
    """The PodMonitor spec of the controller's metrics port. honorLabels: the exemption series' own
    `namespace` and `job` (the job's) win over the target's (the controller pod's namespace, the PodMonitor's
    job), as the idle alert joins on them (prometheus-operator PodMetricsEndpoint.honorLabels)."""
    return {
        "selector": {"matchLabels": {"app": CONTROLLER}},
        "podMetricsEndpoints": [{"port": METRICS_PORT_NAME, "interval": "30s", "honorLabels": True}],
    }
