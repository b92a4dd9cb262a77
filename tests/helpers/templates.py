"""`pulumi new` of the templates under stacks/templates, done as pulumi does it (no pulumi CLI needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.helpers.plans import ROOT

TEMPLATES = ROOT / "stacks" / "templates"


def instantiate(
    name: str, dest: Path, answers: dict[str, str] | None = None, stack: str = "dev"
) -> dict[str, str]:
    """Do what `pulumi new <template> --stack <stack> --yes` does and return the stack config it writes.

    pulumi v3.259.0 pkg/cmd/pulumi/project/newcmd: new.go copies the files replacing ${PROJECT} and
    ${DESCRIPTION}, renames the project and removes the `template:` section from Pulumi.yaml; config.go
    (resolveTemplateConfig, encryptTemplateConfig) takes each `template.config` key (a key without a
    namespace gets the project's name as one), its answer or else its default, drops the empty ones
    ("Don't add empty values to the config") and saves the rest as strings in Pulumi.<stack>.yaml next to
    Pulumi.yaml (no stackConfigDir in a template).
    """
    project_name = dest.name
    shutil.copytree(TEMPLATES / name, dest, dirs_exist_ok=True)
    for f in dest.rglob("*"):
        if f.is_file():
            text = f.read_text().replace("${PROJECT}", project_name).replace("${DESCRIPTION}", "test")
            f.write_text(text)
    project = yaml.safe_load((dest / "Pulumi.yaml").read_text())
    template = project.pop("template")
    project["config"] = {"pulumi:tags": {"value": {"pulumi:template": str(TEMPLATES / name)}}}
    (dest / "Pulumi.yaml").write_text(yaml.safe_dump(project, sort_keys=False))
    config: dict[str, str] = {}
    for key, spec in template["config"].items():
        full = key if ":" in key else f"{project_name}:{key}"
        value = str((answers or {}).get(full, spec.get("default", "")))
        if value:
            config[full] = value
    (dest / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}))
    return config
