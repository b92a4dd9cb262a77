"""What a fresh interpreter loads: a stack plans with its own cloud's SDK only, and the light modules
(NCCL floors, the trainer's contract) load without Pulumi or torch. Real processes (tests/helpers/deps.py)."""

from __future__ import annotations

import pytest

from tests.helpers.deps import modules_after, top_level
from tests.helpers.trainer import env


def test_an_aws_stack_does_not_import_the_gcp_sdk():
    loaded = modules_after(
        "import warnings; warnings.filterwarnings('ignore')\nfrom infra.mockcloud import run_stack; run_stack('aws-dev')"
    )
    assert "pulumi_gcp" not in loaded


@pytest.mark.parametrize(
    ("stack", "must_not_import"),
    [
        ("aws-dev", "pulumi_gcp"),
        ("gcp-dev", "pulumi_aws"),
        ("onprem-dev", "pulumi_aws"),
        ("onprem-dev", "pulumi_gcp"),
    ],
)
def test_a_stack_imports_only_the_sdks_of_its_cloud(stack, must_not_import):
    loaded = modules_after(f"from infra.mockcloud import run_stack\nrun_stack({stack!r})")
    imported = {m for m in ("pulumi_aws", "pulumi_gcp", "pulumi_kubernetes") if m in loaded}
    assert must_not_import not in imported
    assert "pulumi_kubernetes" in imported


def test_the_nccl_floors_module_imports_without_pulumi():
    assert not any(m.startswith("pulumi") for m in modules_after("import components.nccl_floors"))


def test_importing_the_contract_and_validating_loads_neither_torch_nor_pulumi():
    code = "import trainer.contract, trainer.config as c\nassert c.validate_trainer_config({'steps': 0})"
    assert (
        top_level(modules_after(code, env=env(), timeout=60)) & {"torch", "pulumi", "numpy", "fsspec"}
        == set()
    )


def test_reading_the_registry_imports_no_backend_and_no_sdk():
    loaded = modules_after(
        "from components.backends import backend_names\nassert backend_names()[:3] == ('aws', 'gcp', 'kubernetes')"
    )
    assert not [
        m
        for m in loaded
        if m.startswith(("components.aws", "components.gcp", "components.kubernetes", "pulumi_"))
    ]
    loaded = modules_after("from components.backends import backend\nbackend('aws')")
    # The spec is composed from every installed cloud's section (components/spec/sections.py), so GCP's
    # keys module comes (pydantic only, so that an AWS stack with a GCP key is told whose key it is);
    # nothing else of GCP's does, and no SDK.
    gcp = [m for m in loaded if m.startswith("components.gcp") and m != "components.gcp"]
    assert gcp == ["components.gcp.spec_keys"]
    assert not [m for m in loaded if m.startswith(("pulumi_aws", "pulumi_gcp"))]


def test_loading_every_backend_imports_neither_verify_nor_a_cloud_sdk():
    loaded = modules_after("from components.backends import backends\nbackends()")
    assert not [m for m in loaded if m.startswith(("infra", "pulumi_aws", "pulumi_gcp", "boto3"))]


def test_the_verify_library_loads_without_the_cli():
    loaded = modules_after(
        "import infra.verify, infra.verify.live, infra.verify.view, infra.verify.registry, infra.stacks\n"
        "import infra.verify.checks.live_cluster, infra.verify.dump"
    )
    assert not [m for m in loaded if m == "infra.cli" or m.startswith("infra.commands")]
