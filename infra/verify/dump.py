"""The plan dump: `trainplane plan STACK --dump FILE` writes it, `trainplane verify --dump FILE` reads it.

A dump holds everything `trainplane verify STACK` looks at, so that verify of the dump reaches the same
verdict as verify of the stack: every resource with its inputs, parent and dependencies, the stack's
outputs, the stack's own trainplane config object, and for a job stack the plan of the platform it was
planned on. Format `trainplane-plan`, version 1 (docs/verify.md, "Plan dumps"):

    {"format": "trainplane-plan", "version": 1,
     "stack": "gpt-small-aws-dev", "kind": "job",            # or "platform"
     "config": {...},                                        # trainplane:job (or trainplane:platform)
     "resources": [{"urn", "type", "name", "parent", "custom", "provider", "dependencies", "inputs"}],
     "outputs": {...},
     "platform": {"stack", "kind", "config", "resources", "outputs", "platform": null}}   # null for a platform

Written with sorted keys, resources in URN order and dependencies sorted, so two dumps of the same stack
are byte-identical. The JSON of the test-side recorder mockplan.py (no `format`; `deps`; no config) is
still read, as a compatibility input only: a job's config is then recovered from the objects it sends.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from infra.verify.model import Plan, PlanError, build, on_existing_cluster

FORMAT = "trainplane-plan"
VERSION = 1
KINDS = ("platform", "job")


# ---- writing ---------------------------------------------------------------------------------------
def _resource_doc(r: Any) -> dict[str, Any]:
    return {
        "urn": r.urn,
        "type": r.type,
        "name": r.name,
        "parent": r.parent,
        "custom": r.custom,
        "provider": r.provider,
        "dependencies": sorted(r.deps),
        "inputs": r.inputs,
    }


def _plan_doc(plan: Plan) -> dict[str, Any]:
    # Registration order under the mock engine is not guaranteed from run to run; URN order is, and no
    # check depends on the order of resources.
    resources = sorted(
        (_resource_doc(r) for r in plan.resources),
        key=lambda d: (d["urn"], json.dumps(d, sort_keys=True, default=str)),
    )
    return {
        "stack": plan.stack,
        "kind": plan.kind,
        "config": dict(plan.config) if plan.config is not None else None,
        "resources": resources,
        "outputs": dict(plan.outputs),
        "platform": _plan_doc(plan.platform) if plan.platform is not None else None,
    }


def dumps(plan: Plan) -> str:
    """The dump of `plan` as text (deterministic: sorted keys, stable order, trailing newline)."""
    doc = {"format": FORMAT, "version": VERSION, **_plan_doc(plan)}
    return json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n"


def write_dump(plan: Plan, path: str | Path) -> None:
    """Write `plan` to `path`; PlanError (one line) when the file cannot be written."""
    p = Path(path)
    try:
        p.write_text(dumps(plan))
    except OSError as e:
        raise PlanError(f"{p}: cannot write the plan dump ({e.strerror or e})") from None


# ---- reading ---------------------------------------------------------------------------------------
def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise PlanError(f"{path}: cannot read a plan dump ({e.strerror or e})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PlanError(f"{path}: cannot read a plan dump (not JSON: {e})") from None
    if not isinstance(doc, dict):
        raise PlanError(f"{path}: not a plan dump (expected a JSON object, got {type(doc).__name__})")
    return doc


def _resources(path: Path, raw: Any, deps_key: str) -> list[Mapping[str, Any]]:
    if not isinstance(raw, list):
        raise PlanError(f"{path}: not a plan dump (expected a `resources` list)")
    out: list[Mapping[str, Any]] = []
    for i, r in enumerate(raw):
        missing = [k for k in ("urn", "type", "name") if not isinstance(r, dict) or not r.get(k)]
        if missing or not isinstance(r.get("inputs") or {}, dict):
            what = f"without {', '.join(missing)}" if missing else "whose inputs are not an object"
            raise PlanError(f"{path}: resource {i} {what} (expected urn, type, name, inputs)")
        out.append({**r, "deps": r.get(deps_key) or ()})
    return out


def _outputs(path: Path, doc: Mapping[str, Any], where: str = "") -> Mapping[str, Any]:
    outputs = doc.get("outputs")
    if outputs is None:
        return {}
    if not isinstance(outputs, dict):
        raise PlanError(f"{path}:{where} `outputs` is not an object")
    return outputs


def _plan_from_doc(path: Path, doc: Mapping[str, Any], source: str, where: str = "") -> Plan:
    kind = doc.get("kind")
    if kind not in KINDS:
        raise PlanError(f"{path}:{where} `kind` is {kind!r}, expected one of {', '.join(KINDS)}")
    config = doc.get("config")
    if config is not None and not isinstance(config, dict):
        raise PlanError(f"{path}:{where} `config` is not an object")
    platform = None
    if kind == "job" and doc.get("platform") is not None:
        if not isinstance(doc["platform"], dict):
            raise PlanError(f"{path}:{where} `platform` is not an object")
        platform = _plan_from_doc(path, doc["platform"], f"{source} (platform)", " platform:")
        if platform.kind != "platform":
            raise PlanError(f"{path}:{where} the embedded platform is a {platform.kind}'s plan")
    resources = _resources(path, doc.get("resources"), "dependencies")
    stack = str(doc.get("stack") or path.stem)
    # The recorded kind, not build's guess (a job dump may leave its platform to --ref).
    return _build(path, stack, resources, _outputs(path, doc, where), config, platform, source, kind)


def _from_product(path: Path, doc: Mapping[str, Any]) -> Plan:
    version = doc.get("version")
    if version != VERSION:
        raise PlanError(
            f"{path}: plan dump format version {version!r} is not supported (this trainplane reads "
            f"{FORMAT} version {VERSION}; write it again with `trainplane plan STACK --dump FILE`)"
        )
    return _plan_from_doc(path, doc, f"dump {path}")


def _from_mockplan(path: Path, doc: Mapping[str, Any]) -> Plan:
    """The test-side recorder mockplan.py's JSON, a compatibility input: no config, dependencies as
    `deps`, the stacks it read as `stack_references` (a stack reference is read, not registered)."""
    if doc.get("error"):
        raise PlanError(f"{path}: the dump records a failed run: {doc['error']}")
    resources = _resources(path, doc.get("resources"), "deps")
    outputs = _outputs(path, doc)
    stack = str(doc.get("stack") or path.stem)
    reads = [str(r) for r in doc.get("stack_references") or []]
    if reads and not outputs.get("nodePools"):
        # A job stack: it reads its platform's outputs and has no node pools of its own. Its config is
        # not recorded; the platform stack it names is the one it read.
        job = _build(
            path, stack, resources, outputs, {"platformStack": reads[0]}, None, f"dump {path}", "job"
        )
        if on_existing_cluster(job.cloud):
            return job
    return _build(path, stack, resources, outputs, None, None, f"dump {path}", None)


def _build(
    path: Path,
    stack: str,
    resources: list[Mapping[str, Any]],
    outputs: Mapping[str, Any],
    config: Mapping[str, Any] | None,
    platform: Plan | None,
    source: str,
    kind: str | None,
) -> Plan:
    """`build`, its PlanError (outputs its kind refuses) naming the dump file."""
    try:
        return build(stack, resources, outputs, config, platform, source, kind=kind)
    except PlanError as e:
        raise PlanError(f"{path}: {e}") from None


def read_dump(path: str | Path) -> Plan:
    """A plan from a dump file, as recorded (a job keeps its embedded platform, if any)."""
    p = Path(path)
    doc = _read(p)
    if "format" in doc:
        if doc["format"] != FORMAT:
            raise PlanError(f"{p}: not a plan dump (format {doc['format']!r}, expected {FORMAT!r})")
        return _from_product(p, doc)
    if isinstance(doc.get("resources"), list):
        return _from_mockplan(p, doc)
    raise PlanError(f"{p}: not a plan dump (no `format`; write one with `trainplane plan STACK --dump FILE`)")


# ---- a job and its platform ------------------------------------------------------------------------
def platform_stack(job: Plan) -> str | None:
    """The platform stack a job's plan names (its config's platformStack)."""
    return str(job.config["platformStack"]) if job.config and job.config.get("platformStack") else None


def _matches(labels: Mapping[str, Any], term: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a node with `labels` satisfies one nodeSelectorTerm's matchExpressions."""
    for e in term:
        key, op, values = str(e.get("key")), e.get("operator"), [str(v) for v in e.get("values") or []]
        has = key in labels
        ok = {
            "In": has and str(labels.get(key)) in values,
            "NotIn": not has or str(labels.get(key)) not in values,
            "Exists": has,
            "DoesNotExist": not has,
        }.get(str(op), False)
        if not ok:
            return False
    return True


def recovered_job_config(job: Plan, platform: Plan) -> dict[str, Any] | None:
    """What verify reads from a job's config (team, pools), recovered from the pod template it sends:
    for dumps that do not record the config (mockplan.py). One pool: the pool whose labels are the
    nodeSelector; several: one required node-affinity term per pool, in the job's order
    (components/incluster/job_pod.py node_placement)."""
    from infra.verify.jobs import runtime_jobs

    for _, obj in runtime_jobs(job):
        spec = ((obj.spec.get("template") or {}).get("spec")) or {}
        selector = dict(spec.get("nodeSelector") or {})
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or {}
        terms = [t.get("matchExpressions") or [] for t in affinity.get("nodeSelectorTerms") or []]
        pools: list[str] = []
        for term in terms or [None]:
            for p in platform.node_pools:
                labels = dict(p.labels)
                fits = (
                    labels == selector
                    if term is None
                    else selector.items() <= labels.items() and _matches(labels, term)
                )
                if fits and p.name not in pools:
                    pools.append(p.name)
        if not pools:
            return None
        config: dict[str, Any] = {"team": obj.namespace or "", "nodePool": pools[0]}
        if len(pools) > 1:
            config = {"team": obj.namespace or "", "nodePools": pools}
        if platform_stack(job):
            config["platformStack"] = platform_stack(job)
        return config
    return None


def _check_platform(path: Path, job: Plan, platform: Plan, ref_name: str | None, ref_path: str) -> None:
    if platform.kind != "platform":
        raise PlanError(
            f"{ref_path}: a {platform.kind}'s plan, not a platform's (given with --ref for {path})"
        )
    named = platform_stack(job)
    if named is None:
        return
    short = named.split("/")[-1]
    if ref_name is not None and ref_name not in (named, short):
        raise PlanError(f"--ref {ref_name}: the job in {path} reads platform stack {named}, not {ref_name}")
    if platform.stack != short:
        raise PlanError(
            f"{ref_path}: the plan of stack {platform.stack}, but the job in {path} reads platform stack {named}"
        )


def load_dump(
    path: str | Path, platform: Plan | str | Path | None = None, ref_name: str | None = None
) -> Plan:
    """A plan from a dump, ready to verify: a job on its platform's plan, embedded in the dump or given
    here (a Plan or a dump file; it replaces an embedded one), named `ref_name` on the command line."""
    p = Path(path)
    plan = read_dump(p)
    ref_path = str(platform) if isinstance(platform, str | Path) else "--ref"
    given = read_dump(platform) if isinstance(platform, str | Path) else platform
    if plan.kind == "platform":
        if given is not None:
            raise PlanError(f"{p}: a platform's plan takes no --ref (that is for a job's dump)")
        return plan
    if given is not None:
        _check_platform(p, plan, given, ref_name, ref_path)
    chosen = given or plan.platform
    if chosen is None:
        raise PlanError(
            f"{p}: a job stack's dump without its platform's plan: add --ref NAME=PLATFORM_DUMP "
            "(a dump of the platform stack it names)"
        )
    config = plan.config
    if not config or "team" not in config:  # not recorded (mockplan.py; `team` is required): recover it
        config = recovered_job_config(plan, chosen)
    return build(plan.stack, plan.resources, plan.outputs, config, chosen, plan.source)


def load_for_verify(path: str | Path, ref_pairs: Sequence[str]) -> Plan:
    """`verify --dump FILE [--ref NAME=PLATFORM_DUMP]`: the plan to verify; PlanError on bad input."""
    if len(ref_pairs) > 1:
        raise PlanError(f"verify --dump {path}: at most one --ref NAME=PLATFORM_DUMP (the job's platform)")
    if not ref_pairs:
        return load_dump(path)
    name, sep, ref_file = ref_pairs[0].partition("=")
    if not sep or not name or not ref_file:
        raise PlanError(
            f"--ref {ref_pairs[0]!r}: expected NAME=PLATFORM_DUMP, e.g. organization/trainplane/aws-dev=aws-dev.json"
        )
    return load_dump(path, ref_file, name)
