"""The existing-cluster verifier (`cloud: kubernetes`): a plain cluster (`VerifierDefaults`) that a plan
with no cloud of its own runs on; its facts (facts.yaml) mark what is unknown offline."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from components.backends import load_data_file
from infra.verify.verifier import VerifierDefaults


class ExistingClusterVerifier(VerifierDefaults):
    name = "kubernetes"

    @cache  # noqa: B019 - one instance for the life of the process
    def verify_facts(self) -> Mapping[str, Any]:
        return load_data_file("infra.verify.clouds.kubernetes", "facts.yaml")

    def adopts_existing_clusters(self) -> bool:
        # The cluster exists: the plan creates none, and a job stack's plan, which names no cloud of
        # its own, runs on one too until its platform's plan says which.
        return True


VERIFIER = ExistingClusterVerifier()
