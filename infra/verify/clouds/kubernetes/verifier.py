"""The existing-cluster verifier (`cloud: kubernetes`): a plain cluster (`VerifierDefaults`) that a plan
with no cloud of its own runs on; its facts (facts.yaml) mark what is unknown offline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.verify.verifier import VerifierDefaults, folder_facts


class ExistingClusterVerifier(VerifierDefaults):
    name = "kubernetes"

    def verify_facts(self) -> Mapping[str, Any]:
        return folder_facts(self)

    def adopts_existing_clusters(self) -> bool:
        # The cluster exists: the plan creates none, and a job stack's plan, which names no cloud of
        # its own, runs on one too until its platform's plan says which.
        return True


VERIFIER = ExistingClusterVerifier()
