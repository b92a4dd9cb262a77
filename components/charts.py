"""Every Helm chart trainplane installs, pinned in one place.

Versions are those whose upstream default values are kept in ../shared/reference/charts/ (the values-key
check compares what the program sends with them), except where a note says otherwise. Bumping a chart is
a one-line change here; the components look their chart up by name and never spell a version themselves.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chart:
    repo: str
    chart: str
    version: str
    # The application version the chart version ships (its default image tag), where the two differ
    # and the app version is what matters (recorded for the charts of the AWS layer).
    app_version: str | None = None

    def release_args(self) -> dict[str, object]:
        """The chart-locating keyword arguments of `kubernetes.helm.v3.Release`.

        OCI charts carry their full reference in `chart` and take no repository options.
        """
        import pulumi_kubernetes as k8s

        if self.repo.startswith("oci://"):
            return {"chart": f"{self.repo.rstrip('/')}/{self.chart}", "version": self.version}
        return {
            "chart": self.chart,
            "version": self.version,
            "repository_opts": k8s.helm.v3.RepositoryOptsArgs(repo=self.repo),
        }


CHARTS: dict[str, Chart] = {
    # In-cluster layer (components/incluster).
    "gpu-operator": Chart("https://helm.ngc.nvidia.com/nvidia", "gpu-operator", "v26.7.0"),
    "kube-prometheus-stack": Chart(
        "https://prometheus-community.github.io/helm-charts", "kube-prometheus-stack", "88.5.3"
    ),
    # The OSS Loki chart moved to the grafana-community repository.
    "loki": Chart("https://grafana-community.github.io/helm-charts", "loki", "18.11.0"),
    # grafana/alloy tag helm-chart/1.11.1 (233907c, 2026-08-06), operations/helm/charts/alloy: chart 1.11.1
    # ships Alloy v1.18.1. Upstream defaults: ../shared/reference/charts/alloy-1.11.1.values.yaml.
    "alloy": Chart("https://grafana.github.io/helm-charts", "alloy", "1.11.1", app_version="v1.18.1"),
    "kueue": Chart("oci://registry.k8s.io/kueue/charts", "kueue", "0.19.2"),
    # kubernetes-sigs/jobset tag v0.12.0 (charts/jobset); the runtime of fixed-size training jobs.
    "jobset": Chart("oci://registry.k8s.io/jobset/charts", "jobset", "0.12.0"),
    # kubernetes-sigs/dra-driver-nvidia-gpu tag v0.4.1 (764900e), deployments/helm/dra-driver-nvidia-gpu
    # (chart and app 0.4.1; published at oci://registry.k8s.io/dra-driver-nvidia/charts): the ComputeDomains of
    # rack-scale pools (components/incluster/dra_driver.py).
    "dra-driver-nvidia-gpu": Chart(
        "oci://registry.k8s.io/dra-driver-nvidia/charts", "dra-driver-nvidia-gpu", "0.4.1"
    ),
    "aws-fsx-csi-driver": Chart(
        "https://kubernetes-sigs.github.io/aws-fsx-csi-driver", "aws-fsx-csi-driver", "1.17.0"
    ),
    # AWS layer (components/aws).
    # kubernetes/autoscaler tag cluster-autoscaler-chart-9.59.0 (5a0b98e, 2026-07-21),
    # cluster-autoscaler/charts/cluster-autoscaler (there since chart 9.52.0; charts/cluster-autoscaler
    # before): chart 9.59.0 ships cluster-autoscaler 1.35.0. The image tag is not the chart's: it follows
    # the cluster's minor (components/aws/autoscaler_images.py).
    "cluster-autoscaler": Chart(
        "https://kubernetes.github.io/autoscaler", "cluster-autoscaler", "9.59.0", app_version="1.35.0"
    ),
    # aws/eks-charts; exposes vpc.amazonaws.com/efa on EFA-capable instance types. Chart and app versions
    # differ: chart v0.5.20 ships app v0.5.13; app v0.5.20 (the plugin wanted here) is chart v0.5.30
    # (its values.yaml `image.tag`).
    "aws-efa-k8s-device-plugin": Chart(
        "https://aws.github.io/eks-charts", "aws-efa-k8s-device-plugin", "v0.5.30", app_version="v0.5.20"
    ),
    # aws/aws-node-termination-handler tag v1.25.6 (77ca841), config/helm/aws-node-termination-handler:
    # chart 0.27.6, app 1.25.6, published at oci://public.ecr.aws/aws-ec2/helm (its README); the
    # spot-notice DaemonSet (components/aws/spot_notice.py).
    "aws-node-termination-handler": Chart(
        "oci://public.ecr.aws/aws-ec2/helm", "aws-node-termination-handler", "0.27.6", app_version="1.25.6"
    ),
}


# Charts pinned below the newest values file kept in ../shared/reference/charts, each with the reason.
# tests/unit/components/test_charts.py fails when any other chart falls behind the reference (a new values file there
# is a new upstream release: bump the pin, re-read its templates, or list it here and say why).
BEHIND_REFERENCE: dict[str, str] = {}


def chart(name: str) -> Chart:
    """The pinned chart called `name` (KeyError names the known ones)."""
    try:
        return CHARTS[name]
    except KeyError:
        raise KeyError(f"no pinned chart {name!r}; known: {', '.join(sorted(CHARTS))}") from None
