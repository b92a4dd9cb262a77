"""The GPU health controller's pod: kopf run on the shipped files (gpu_health_operator.py and what it
imports), its RBAC rules and how it gets kopf. gpu_health.py deploys it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.incluster import (
    agent_runtime,
    gpu_health_operator,
    idle_hold,
    idle_names,
    idle_reclaim,
    idle_round,
    idle_startup,
    node_reconcile,
    node_recovery,
    node_return,
    quarantine,
    recovery_names,
    suspects,
)
from components.incluster import gpu_health_agent as agent
from components.incluster.idle_reclaim import IDLE_PERMISSIONS
from components.incluster.recovery_names import CONTROLLER_NAME as CONTROLLER
from components.incluster.recovery_names import CONTROLLER_PERMISSIONS
from components.spec import IdleSpec

# A team with an idle policy: (team, its namespace, the policy).
IdleTeam = tuple[str, str, IdleSpec]

# The controller runs kopf on a stock Python; an init container installs kopf's pinned, hashed wheels
# (gpu_health_requirements.txt) into an emptyDir, unless `images.gpuHealthController` names an image that
# already has them (clusters without egress to PyPI).
PYTHON_IMAGE = "docker.io/library/python:3.12-slim"
REQUIREMENTS = Path(__file__).with_name("gpu_health_requirements.txt")
# The files the operator runs from (the ConfigMap's keys): the kopf handlers, the decision, the quarantine
# plan, the contract's names and the API client; each imports the others as flat modules.
SHIPPED = (
    gpu_health_operator,
    node_reconcile,
    agent,
    quarantine,
    node_recovery,
    node_return,
    suspects,
    recovery_names,
    agent_runtime,
    idle_reclaim,
    idle_hold,
    idle_startup,
    idle_round,
    idle_names,
)
APP_DIR, DEPS_DIR = "/opt/gpu-health", "/opt/gpu-health-deps"
HEALTH_PORT = 8080
# The idle exemption series (idle_round.ExemptGauge), scraped by the controller's PodMonitor.
METRICS_PORT, METRICS_PORT_NAME = 8081, "metrics"


def shipped_files() -> dict[str, str]:
    """The operator's source files by name, as the ConfigMap carries them (and the tests run them)."""
    files = {Path(m.__file__).name: Path(m.__file__).read_text() for m in SHIPPED if m.__file__}
    files["requirements.txt"] = REQUIREMENTS.read_text()
    return files


def controller_rules(idle: bool = False) -> list[dict[str, list[str]]]:
    """The ClusterRole: the contract's permissions, nothing more (kopf itself needs none beyond them in
    the way gpu_health_operator.py runs it: standalone, no scanning, no Event posting, no finalizers); with
    a team's idle policy, also idle_reclaim.IDLE_PERMISSIONS."""
    perms = CONTROLLER_PERMISSIONS + (IDLE_PERMISSIONS if idle else ())
    return [{"apiGroups": [g], "resources": [r], "verbs": list(v)} for g, r, v in perms]


def idle_config(idle_teams: tuple[IdleTeam, ...]) -> dict[str, Any]:
    """The controller config's `idle` (idle_reclaim.TeamPolicy.from_config): each team's action and
    exemptions; the threshold and window are the alert's (the idle rules), repeated for the record."""
    return {
        "alert": idle_names.IDLE_ALERT,
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


def controller_pod(config_map: str, image: str | None = None, metrics: bool = False) -> dict[str, Any]:
    """The operator's pod: kopf run on the shipped files. Without `image`, python:3.12-slim and an init
    container that pip-installs the hashed wheels (the reference networks give nodes egress: EKS private
    subnets route through a NAT gateway per zone, components/aws/network.py; GKE nodes through Cloud NAT,
    components/gcp/network.py; the stock image comes from Docker Hub the same way)."""
    restricted = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    volumes: list[dict[str, Any]] = [
        {"name": "agent", "configMap": {"name": config_map}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
    ]
    mounts = [
        {"name": "agent", "mountPath": APP_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    path = APP_DIR
    init: list[dict[str, Any]] = []
    if image is None:
        volumes.append({"name": "deps", "emptyDir": {"sizeLimit": "256Mi"}})
        path = f"{DEPS_DIR}:{APP_DIR}"
        init.append(
            {
                "name": "install-kopf",
                "image": PYTHON_IMAGE,
                "command": [
                    "python3",
                    "-m",
                    "pip",
                    "install",
                    "--no-cache-dir",
                    "--disable-pip-version-check",
                ],
                # Exactly the pinned wheels, each checked against its hash; nothing resolved at run time.
                "args": [
                    "--require-hashes",
                    "--only-binary=:all:",
                    "--no-deps",
                    "--target",
                    DEPS_DIR,
                    "-r",
                    f"{APP_DIR}/requirements.txt",
                ],
                "env": [{"name": "HOME", "value": "/tmp"}],
                "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "securityContext": restricted,
                "volumeMounts": [*mounts, {"name": "deps", "mountPath": DEPS_DIR}],
            }
        )
        mounts = [*mounts, {"name": "deps", "mountPath": DEPS_DIR, "readOnly": True}]
    run = ["python3", "-m", "kopf", "run", "--standalone", "--all-namespaces"]
    run += [
        f"--liveness=http://0.0.0.0:{HEALTH_PORT}/healthz",
        f"{APP_DIR}/{Path(gpu_health_operator.__file__).name}",
    ]
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
                "image": image or PYTHON_IMAGE,
                "command": run,
                "env": [
                    {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                    {"name": "PYTHONPATH", "value": path},
                    {"name": "HOME", "value": "/tmp"},
                    {"name": gpu_health_operator.CONFIG_ENV, "value": f"{APP_DIR}/config.json"},
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
                "volumeMounts": mounts,
            }
        ],
        "volumes": volumes,
    }
    if metrics:  # the idle exemption series (teams with an idle policy)
        pod["containers"][0]["ports"] = [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT}]
    if init:
        pod["initContainers"] = init
    return pod


def controller_pod_monitor() -> dict[str, Any]:
    """The PodMonitor spec of the controller's metrics port. honorLabels: the exemption series' own
    `namespace` and `job` (the job's) win over the target's (the controller pod's namespace, the PodMonitor's
    job), as the idle alert joins on them (prometheus-operator PodMetricsEndpoint.honorLabels)."""
    return {
        "selector": {"matchLabels": {"app": CONTROLLER}},
        "podMetricsEndpoints": [{"port": METRICS_PORT_NAME, "interval": "30s", "honorLabels": True}],
    }
