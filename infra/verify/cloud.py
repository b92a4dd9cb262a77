"""`trainplane verify STACK --cloud`: read-only checks of a platform stack against the cloud's own APIs,
with the user's credentials, beside the offline (plan) and live-cluster modes of `trainplane verify`.

What the offline checks cannot know is whether the cloud has what the stack names: a reservation that
exists, is of the pool's machine type, in its zone and big enough, and machine types offered in the
pools' zones. Each cloud's verifier asks its own cloud (`CloudVerifier.verify_cloud_api`, in its
cloud_api.py: infra/verify/clouds/aws/cloud_api.py, infra/verify/clouds/gcp/cloud_api.py) and fills a
`Report` of mode "cloud", the type offline and live verify return: one CheckResult per check, what passed
in `examined`, what failed as findings, what was not asked in notes (on a skipped check, so a pass is
never mistaken for a check). An existing cluster has no cloud to ask (the verifiers' default).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from components.spec import PlatformSpec
from infra.verify.report import CheckResult, Report

# The check of a report from a backend with no cloud API behind it (an existing cluster).
NO_API_CHECK = "cloud-api"


class CloudError(Exception):
    """The cloud cannot be asked at all (no SDK, no credentials): one line, exit 2."""


def cloud_report(spec: PlatformSpec, source: str) -> Report:
    """An empty `--cloud` report of `spec` for a backend to fill; `source`: where the answers come from
    (the endpoint and region). The stack's name is set by verify_cloud, which knows it."""
    return Report("", spec.cloud, spec.cluster.kubernetes_version, "cloud", source)


def verify_cloud(spec: PlatformSpec, stack: str, client: Any = None) -> Report:
    """Check `spec` (the platform of stack `stack`) against its cloud, through its verifier. `client`: an
    API client to use instead of the verifier's default one (an EC2 client on AWS)."""
    from infra.verify.verifiers import missing_verifier_note, verifier

    report = verifier(spec.cloud).verify_cloud_api(spec, client)
    if report is None:
        # A cloud with no cloud API behind it (an existing cluster) has nothing to ask.
        report = cloud_report(spec, "nothing asked: no cloud API")
        report.checks.append(
            CheckResult(
                NO_API_CHECK,
                notes=[f"cloud {spec.cloud}: no cloud API to ask"],
                skipped="no cloud API to ask",
            )
        )
    if note := missing_verifier_note(spec.cloud):
        report.notes.append(note)
    return replace(report, stack=stack)
