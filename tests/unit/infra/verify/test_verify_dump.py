"""`trainplane plan STACK --dump FILE` then `verify --dump FILE` reaches the verdict `verify STACK` does.

Every reference stack is planned once per test process (tests/conftest.py `planned`), dumped, read back
and verified; the report of the dump must equal the report of the stack check by check (status,
findings, notes, what was examined), and a broken plan's dump fails with the stack's finding. Before
the product had its own dump format a clean job dump failed (its config was dropped: a job on several
pools lost its pools), and nothing could write a dump but a checker outside the product.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest

from infra import stackfile
from infra.cli import main
from infra.verify import verify
from infra.verify.dump import FORMAT, VERSION, dumps, load_dump, write_dump
from infra.verify.model import Plan
from tests.helpers.plans import FLEET_JOB_STACKS, FLEET_STACKS, JOB_STACKS, ROOT, platform_object, stack_files
from tests.helpers.verify_plans import (
    edit,
    outcome,
    plan,
    plan_of,
    prometheus_class,
    release,
    stack_plan,
    stack_report,
)

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

# Fleet stacks and jobs on a fleet have no dump format yet (a fleet plan holds several clusters' plans).
STACKS = [
    n
    for p in stack_files()
    if (n := p.name.removeprefix("Pulumi.").removesuffix(".yaml")) not in {*FLEET_STACKS, *FLEET_JOB_STACKS}
]


def resources(p: Plan) -> dict[str, tuple[Any, ...]]:
    return {
        r.urn: (r.type, r.name, r.parent, r.custom, r.provider, sorted(r.deps), r.inputs) for r in p.resources
    }


def same_plan(a: Plan, b: Plan) -> None:
    assert (a.stack, a.kind, a.cloud, a.kubernetes_version) == (
        b.stack,
        b.kind,
        b.cloud,
        b.kubernetes_version,
    )
    assert a.config == b.config
    assert a.outputs == b.outputs
    assert resources(a) == resources(b)
    assert (a.platform is None) == (b.platform is None)
    if a.platform is not None and b.platform is not None:
        same_plan(a.platform, b.platform)


def test_every_stack_file_is_a_platform_or_a_listed_job_stack():
    for stack in STACKS:
        raw = stackfile.load(stack, ROOT)
        assert raw.object("trainplane:platform") is not None or stack in JOB_STACKS, stack


@pytest.mark.parametrize("stack", STACKS)
def test_a_dump_verifies_like_its_stack(stack: str, tmp_path: Path):
    original = stack_plan(stack)
    path = tmp_path / f"{stack}.json"
    write_dump(original, path)
    doc = json.loads(path.read_text())
    assert (doc["format"], doc["version"], doc["kind"]) == (FORMAT, VERSION, original.kind)
    # The stack's own config object travels with it: a job's (team, pools) and its platform's.
    key = "trainplane:job" if stack in JOB_STACKS else "trainplane:platform"
    assert doc["config"] == stackfile.load(stack, ROOT).object(key)
    if stack in JOB_STACKS:
        assert doc["platform"]["stack"] == JOB_STACKS[stack]
        assert doc["platform"]["config"] == platform_object(JOB_STACKS[stack])
    loaded = load_dump(path)
    same_plan(loaded, original)
    assert loaded.source == f"dump {path}"
    assert outcome(verify(loaded)) == outcome(stack_report(stack))


def test_plan_dump_cli_writes_the_same_bytes_each_time_and_a_clean_job_dump_passes(tmp_path: Path, capsys):
    # A job on three pools (block, on-demand, spot): it failed from a dump when the job config was dropped.
    stack = "gpt-small-aws-h100-reserved"
    path = tmp_path / "job.json"
    assert main(["plan", stack, "--dump", str(path)]) == 0
    assert f"to {path}" in capsys.readouterr().out
    # A second, independent plan of the same stack (this process's cached one) dumps byte for byte alike.
    assert path.read_text() == dumps(stack_plan(stack))
    assert main(["verify", "--dump", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["source"] == f"dump {path}"
    assert [c["status"] for c in doc["checks"]] == [c[1] for c in outcome(stack_report(stack))]


def test_a_broken_platform_dump_fails_like_the_stack(tmp_path: Path, capsys):
    broken = edit(plan("aws-dev"), release("kube-prometheus-stack"), prometheus_class("nope"))
    path = tmp_path / "broken.json"
    write_dump(broken, path)
    assert main(["verify", "--dump", str(path), "--check", "storage"]) == 1
    printed = capsys.readouterr().out
    expected = [f.line() for f in verify(broken, ["storage"]).findings]
    assert any("PVC monitoring/prometheus-kube-prometheus-stack-prometheus-db" in line for line in expected)
    for line in expected:
        assert line in printed
    assert outcome(verify(load_dump(path), ["storage"])) == outcome(verify(broken, ["storage"]))


def _drop_gpu_toleration(inputs: dict) -> None:
    for rj in inputs["spec"]["replicatedJobs"]:
        pod = rj["template"]["spec"]["template"]["spec"]
        pod["tolerations"] = [t for t in pod.get("tolerations") or [] if t.get("key") != "nvidia.com/gpu"]


def test_a_broken_job_dump_fails_like_the_stack(tmp_path: Path):
    job = stack_plan("gpt-small-aws-h100-reserved")
    broken = edit(job, lambda r: r.inputs.get("kind") == "JobSet", _drop_gpu_toleration)
    path = tmp_path / "broken-job.json"
    write_dump(broken, path)
    from_stack, from_dump = verify(broken, ["scheduling"]), verify(load_dump(path), ["scheduling"])
    assert not from_stack.ok
    assert any(
        "does not tolerate" in f.message and "nvidia.com/gpu" in f.message for f in from_stack.findings
    )
    assert outcome(from_dump) == outcome(from_stack)


def test_a_gke_lustre_dump_on_the_legacy_lnet_port_verifies_like_its_plan(tmp_path: Path):
    # GKE before 1.33.2-gke.4780000: Managed Lustre serves LNet on 6988 (gke_support_enabled) and the
    # platform opens 6988. The dump carries what decides the port (the instance's input, the firewall
    # rule, the cluster version in the config), so a rule on it sees the same plan from a dump.
    platform = platform_object("gcp-h100-mega")
    platform["cluster"]["kubernetesVersion"] = "1.33"
    legacy = plan_of(platform, "gcp-h100-mega")
    path = tmp_path / "legacy.json"
    write_dump(legacy, path)
    doc = json.loads(path.read_text())
    lustre = [r for r in doc["resources"] if r["type"] == "gcp:lustre/instance:Instance"]
    assert [r["inputs"].get("gkeSupportEnabled") for r in lustre] == [True]
    assert "6988" in json.dumps([r for r in doc["resources"] if r["type"] == "gcp:compute/firewall:Firewall"])
    assert doc["config"]["cluster"]["kubernetesVersion"] == "1.33"
    loaded = load_dump(path)
    same_plan(loaded, legacy)
    assert outcome(verify(loaded, ["storage", "network"])) == outcome(verify(legacy, ["storage", "network"]))


# ---- bad input: one line, exit 2, no traceback ----------------------------------------------------
@functools.cache
def _job_doc() -> dict[str, Any]:
    return json.loads(dumps(stack_plan("gpt-small-aws-dev")))


def _write(tmp_path: Path, name: str, doc: Any) -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def _bad_inputs(tmp_path: Path) -> list[tuple[list[str], str]]:
    job = copy.deepcopy(_job_doc())
    platform_doc = {"format": FORMAT, "version": VERSION, **job["platform"]}
    orphan = {**job, "platform": None}
    return [
        (["verify", "--dump", str(tmp_path / "missing.json")], "cannot read a plan dump (No such file"),
        (["verify", "--dump", _write(tmp_path, "bad.json", "{not json")], "not JSON"),
        (
            ["verify", "--dump", _write(tmp_path, "v2.json", {**job, "version": 2})],
            "version 2 is not supported",
        ),
        (["verify", "--dump", _write(tmp_path, "other.json", {**job, "format": "x"})], "not a plan dump"),
        (["verify", "--dump", _write(tmp_path, "list.json", [])], "not a plan dump"),
        (["verify", "--dump", _write(tmp_path, "orphan.json", orphan)], "without its platform's plan"),
        (
            ["verify", "--dump", _write(tmp_path, "res.json", {**job, "resources": [{"urn": "u"}]})],
            "resource 0 without type, name",
        ),
        (
            [
                "verify",
                "--dump",
                _write(tmp_path, "orphan2.json", orphan),
                "--ref",
                f"organization/trainplane/gcp-dev={_write(tmp_path, 'p.json', platform_doc)}",
            ],
            "reads platform stack organization/trainplane/aws-dev, not organization/trainplane/gcp-dev",
        ),
        (
            [
                "verify",
                "--dump",
                _write(tmp_path, "p2.json", platform_doc),
                "--ref",
                f"aws-dev={tmp_path / 'p.json'}",
            ],
            "a platform's plan takes no --ref",
        ),
        (["verify", "--dump", str(tmp_path / "p.json"), "--ref", "aws-dev"], "expected NAME=PLATFORM_DUMP"),
        (
            [
                "verify",
                "--dump",
                str(tmp_path / "orphan.json"),
                "--ref",
                f"aws-dev={tmp_path / 'orphan.json'}",
            ],
            "a job's plan, not a platform's",
        ),
        (
            ["verify", "--dump", _write(tmp_path, "out.json", {**job, "outputs": []})],
            "`outputs` is not an object",
        ),
        (["plan", "onprem-dev", "--dump", str(tmp_path / "no-such-dir" / "x.json")], "no such directory"),
        (["plan", "onprem-dev", "--dump", str(tmp_path / "x.json"), "--json"], "use one of them"),
    ]


def test_bad_dump_input_is_one_line_and_exit_2(tmp_path: Path, capsys):
    for argv, message in _bad_inputs(tmp_path):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err, (argv, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_an_orphan_job_dump_verifies_with_its_platform_given_by_ref(tmp_path: Path, capsys):
    job = copy.deepcopy(_job_doc())
    platform = _write(tmp_path, "aws-dev.json", {"format": FORMAT, "version": VERSION, **job["platform"]})
    orphan = _write(tmp_path, "job.json", {**job, "platform": None})
    argv = ["verify", "--dump", orphan, "--ref", f"organization/trainplane/aws-dev={platform}", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(c["name"], c["status"]) for c in doc["checks"]] == [
        c[:2] for c in outcome(stack_report("gpt-small-aws-dev"))
    ]
