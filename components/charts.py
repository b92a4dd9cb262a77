"""Every Helm chart trainplane installs, pinned in one place: name -> (repository, chart, version).

Bumping a chart is a one-line change here; the components look their chart up by name and never
spell a version themselves.
"""

from __future__ import annotations

from typing import NamedTuple


class Chart(NamedTuple):
    repo: str
    chart: str
    version: str


CHARTS: dict[str, Chart] = {
    # kubernetes/autoscaler; 9.47 ships cluster-autoscaler 1.33 (the image tag follows the cluster version).
    "cluster-autoscaler": Chart("https://kubernetes.github.io/autoscaler", "cluster-autoscaler", "9.47.0"),
    # aws/eks-charts; exposes vpc.amazonaws.com/efa on EFA-capable instance types.
    "aws-efa-k8s-device-plugin": Chart("https://aws.github.io/eks-charts", "aws-efa-k8s-device-plugin", "v0.5.20"),
}


def chart(name: str) -> Chart:
    """The pinned chart called `name` (KeyError names the known ones)."""
    try:
        return CHARTS[name]
    except KeyError:
        raise KeyError(f"no pinned chart {name!r}; known: {', '.join(sorted(CHARTS))}") from None
