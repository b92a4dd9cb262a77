"""Plan, cost, the offline engine and the logs stack ask the backend, never name a cloud (issue 23): each
cloud's creation times, prices, control-plane fee, mock answers and Loki storage live in its package."""

from __future__ import annotations

import ast
import re

import pytest

from components.backends import (
    BackendDefaults,
    CloudBackend,
    backend,
    backend_names,
    backends,
    register_backend,
)
from infra.verify.verifier import CloudVerifier
from tests.conftest import ROOT
from tests.helpers.source_rules import cloud_branches

# What used to hold cloud tables or branches.
ASKING = [
    *sorted((ROOT / "infra").glob("plan*.py")),
    *sorted((ROOT / "infra" / "mockcloud").glob("*.py")),
    ROOT / "infra" / "resources.py",
    ROOT / "components" / "incluster" / "logs.py",
    ROOT / "components" / "job_stack.py",
]
CLOUD_TOKEN = re.compile(r"""["'](aws|gcp):""")
BACKEND_PACKAGES = ("components.aws", "components.gcp", "components.kubernetes", "pulumi_aws", "pulumi_gcp")


@pytest.mark.parametrize("path", ASKING, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_cloud_is_named_outside_its_backend(path):
    source = path.read_text()
    assert cloud_branches(source) == []
    assert CLOUD_TOKEN.findall(source) == []
    imported = [n.module or "" for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)] + [
        a.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import) for a in n.names
    ]
    assert [m for m in imported if m.startswith(BACKEND_PACKAGES)] == []


def test_every_built_in_backend_answers_the_plan_and_engine_hooks():
    for b in backends():
        assert isinstance(b, BackendDefaults), b.name
        answers = b.mock_answers()
        # Each cloud answers for its own provider's tokens only.
        assert all(t.startswith(("kubernetes:", f"{b.name}:")) for t in [*answers.computed, *answers.invokes])
        assert all(t.startswith(f"{b.name}:") for t in b.create_seconds())


def _hooks(protocol: type) -> set[str]:
    return {n for n in vars(protocol) if not n.startswith("_")} | set(protocol.__annotations__)


def test_the_backend_answers_the_library_and_the_verifier_answers_verify():
    """Issue 32: the verify hooks take verify's types, so they are the verifier's (infra/verify/verifier.py);
    a backend answers none of them, and the two protocols share only the cloud's name."""
    assert _hooks(CloudBackend) & _hooks(CloudVerifier) == {"name"}
    verify_only = _hooks(CloudVerifier) - {"name"}
    assert {"pool_nodes", "verify_facts", "adopts_existing_clusters", "verify_cloud_api"} <= verify_only
    for b in backends():
        assert not [h for h in verify_only if hasattr(b, h)], b.name


def test_an_existing_cluster_is_not_priced():
    existing = backend("kubernetes")
    assert existing.price_basis() is None
    assert backend("aws").price_basis() is not None


def test_a_backend_that_lacks_a_hook_is_refused_in_one_line_when_registered():
    """A third-party backend starts from BackendDefaults: it must write the hooks only its cloud can answer
    (build, the checks, keys...), and every other member has a default (preemption_grace_seconds had none:
    such a backend broke with an AttributeError when a job stack first read the platform's grace). One that
    lacks a member is refused where it is registered, naming what it lacks."""

    class Bare(BackendDefaults):
        name = "bare"

    with pytest.raises(ValueError) as refused:
        register_backend("bare", Bare())
    assert str(refused.value) == (
        "cloud backend bare lacks build, check, check_pool, check_storage, keys, machine_of, twins: "
        "a CloudBackend defines them (components.backend_protocol)"
    )
    assert "bare" not in backend_names()
    assert Bare().preemption_grace_seconds == 120
