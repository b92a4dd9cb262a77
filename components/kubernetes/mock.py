"""What the Kubernetes provider would answer the offline engine, for the few computed outputs the
program reads.

Every platform's in-cluster layer runs on this provider, whatever its backend: the engine merges every
backend's answers (infra/mockcloud), so these answer for AWS and GCP stacks too. The in-cluster layer is
planned on the bundles the real cloud backends build (tests plan the real stacks), so nothing here stands
in for a cloud layer.
"""

from __future__ import annotations

from components.backends import MockAnswers

COMPUTED = {
    "kubernetes:helm.sh/v3:Release": lambda n, i: {
        "status": {"status": "deployed", "namespace": i.get("namespace"), "name": i.get("name") or n},
    },
}

INVOKES: dict = {}

ANSWERS = MockAnswers(computed=COMPUTED, invokes=INVOKES)
