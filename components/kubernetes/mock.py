"""What the Kubernetes provider would answer for the few computed outputs the program reads.

The in-cluster layer is planned on the bundles the real cloud backends build (tests plan the real
stacks), so nothing here stands in for a cloud layer.
"""

from __future__ import annotations

COMPUTED = {
    "kubernetes:helm.sh/v3:Release": lambda n, i: {
        "status": {"status": "deployed", "namespace": i.get("namespace"), "name": i.get("name") or n},
    },
}

INVOKES: dict = {}
