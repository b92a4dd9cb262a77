"""egress: on a network without internet egress, no agent of the platform needs it (issue 30).

A private network, read from the platform's spec:
- `network.internetEgress: false`; or, with the key unset,
- a brought VPC (`network.vpcId`) with `cluster.endpointAccess: private`: the platform makes no NAT gateway
  (components/aws/network.py makes one per zone only in a VPC of its own), and a private endpoint is how
  a cluster without internet access is reached;
- private nodes (`cluster.privateNodes`, on by default) in a brought network (`network.network`): the
  platform makes no Cloud NAT (components/gcp/network.py makes it only in a network of its own).
`network.internetEgress: true` says that a brought network routes to the internet after all.

On such a network the nodes reach only what the cloud serves privately, so each container of every pod
template the platform sends (its agents: the GPU health controller, the block-window controller, the
node diagnostic, the cloud's DaemonSets) is checked; each finding starts with its rule:
- `image`: the image is pinned by digest (`@sha256:`) and comes from a registry reached privately: the
  cloud's `privateRegistries` (its facts.yaml: ECR through VPC endpoints, Artifact Registry through
  Private Google Access), or a host that is none of facts.yaml `egress.publicRegistries` (a mirror of the
  user's own). A tag from Docker Hub is the failure this rule exists for: no route, and 10 anonymous
  pulls per hour per IP where there is one;
- `install`: no container's command installs packages at start (`pip install` from PyPI, apt, ...).
Helm releases' images are rendered in the cluster, not in the plan: a note says they need a mirror too.
On any network, a note names the controllers whose image is unset (`images.controller`: trainplane
publishes none, components/spec/images.py): their pods cannot start until it is built, pushed and named.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from textwrap import shorten
from typing import Any

from components.spec.images import CONTROLLER_IMAGE_UNSET
from infra.verify import facts as F
from infra.verify.checks.admission import pod_templates
from infra.verify.context import Context
from infra.verify.report import CheckResult

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def _spec(ctx: Context) -> Any:
    from pydantic import ValidationError

    from components.spec.platform import loaded_model

    try:
        # The model a stack loads with: the sections of a backend a program registered included.
        return loaded_model().model_validate(dict(ctx.platform.config or {}))
    except ValidationError:
        return None


def private_network(spec: Any) -> str | None:
    """Why the spec's nodes have no route to the internet, or None where they have one."""
    net, cluster = spec.network, spec.cluster
    if net.internet_egress is not None:
        return None if net.internet_egress else "a network without internet egress (network.internetEgress)"
    if net.vpc_id and cluster.endpoint_access == "private":
        return "a brought VPC with a private endpoint and no NAT of the platform's"
    if net.network and cluster.private_nodes is not False:
        return "private nodes in a brought network and no Cloud NAT of the platform's"
    return None


def registry(image: str) -> str:
    """The registry host of an image reference; Docker Hub's for a name without one (docker/distribution
    reference.ParseNormalizedNamed: the first part is a host only with a '.' or ':', or 'localhost')."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def private_registry(host: str, cloud: Mapping[str, Any]) -> bool:
    """Whether nodes without internet egress reach `host`: the cloud serves it privately, or it is none of
    the public registries (a mirror of the user's own)."""
    patterns = (cloud.get("privateRegistries") or {}).get("patterns") or []
    if any(re.match(p, host) for p in patterns):
        return True
    egress = F.facts()["egress"]
    name = host.split(":")[0]
    return name not in egress["publicRegistries"] and not name.endswith(
        tuple(egress["publicRegistrySuffixes"])
    )


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers"):
        yield from spec.get(key) or []


def _check_container(
    res: CheckResult,
    ref: str,
    name: str,
    c: Mapping[str, Any],
    why: str,
    cloud: Mapping[str, Any],
    install: re.Pattern[str],
) -> None:
    """The `image` and `install` rules on one container."""
    if c.get("imagePullPolicy") == "Never":
        return  # preloaded on the node (GKE's COS driver installer)
    image = str(c.get("image") or "")
    host = registry(image)
    if not DIGEST.search(image):
        res.fail(
            f"image: {name} runs {image}, not pinned by digest, on {why}: the nodes pull it by tag from a "
            "registry they may not reach; name a mirror by digest in `images`",
            ref,
        )
    elif not private_registry(host, cloud):
        res.fail(
            f"image: {name} pulls from {host}, a public registry the nodes do not reach on {why}; mirror "
            "it to a registry reached privately and name it in `images`",
            ref,
        )
    command = " ".join(str(a) for a in [*(c.get("command") or []), *(c.get("args") or [])])
    if install.search(command):
        res.fail(
            f"install: {name} installs packages at start ({shorten(command, 80)}) on {why}: nothing "
            "reaches the package index; use an image that has them (`images`)",
            ref,
        )


def _note_unset_controllers(ctx: Context, res: CheckResult) -> None:
    unset = sorted(
        obj.ref
        for obj in ctx.platform.iter_objects()
        for _where, _meta, pod in pod_templates(obj.body)
        if any(c.get("image") == CONTROLLER_IMAGE_UNSET for c in _containers(pod))
    )
    if unset:
        res.note(
            f"no controller image (platform.images.controller unset): {', '.join(unset)} name "
            f"{CONTROLLER_IMAGE_UNSET} and will not start; build it (`make image`), push it and name it by "
            'digest (docs/in-cluster.md "The controller image")'
        )


def run(ctx: Context) -> CheckResult:
    res = CheckResult("egress")
    if ctx.job_only:
        res.skipped = "a job stack: the platform's agents are judged on the platform"
        return res
    spec = _spec(ctx)
    if spec is None:
        res.skipped = "no platform config in the plan: whether the nodes reach the internet is unknown"
        return res
    _note_unset_controllers(ctx, res)
    why = private_network(spec)
    if why is None:
        res.note("the nodes reach the internet (a NAT, or addresses of their own): nothing to check")
        return res
    if spec.network.internet_egress is None:
        res.note(f"taken as without internet egress: {why}; network.internetEgress: true says it has one")
    cloud = F.cloud(ctx.platform.cloud)
    install = re.compile(F.facts()["egress"]["installPattern"])
    for obj in ctx.platform.iter_objects():
        templates = list(pod_templates(obj.body))
        if templates:
            res.examined.append(obj.ref)
        for where, _meta, pod in templates:
            for c in _containers(pod):
                _check_container(
                    res, obj.ref, f"{obj.ref} {where} container {c.get('name')}", c, why, cloud, install
                )
    releases = sorted({r.name for r in ctx.platform.releases()})
    if releases:
        res.note(
            "Helm releases' images are rendered in the cluster and not checked here; on this network they "
            f"need a mirror too (registry overrides in their values): {', '.join(releases)}"
        )
    return res
