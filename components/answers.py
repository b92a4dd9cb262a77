"""The answers of the `pulumi new` templates (stacks/templates/*/Pulumi.yaml), declared once, and their check.

A template's stack holds flat keys (`trainplane:gpu: H100`), from which components/quickstart.py builds the
`trainplane:platform` / `trainplane:job` object. They are checked like the keys of that object, before it
is built: a key no template asks for and the program does not read is an error with the nearest known key;
a yes/no answer is true or false; a count is a whole number in range; a choice (cloud, GPU) is one of its
values. What the built object's validation then finds is told under the answer key that gave the value,
in words (components/spec/base.py PATTERN_WORDS), not under the object's key path.

tests/unit/infra/test_template_answers.py checks each table against its template's Pulumi.yaml (the keys asked
and their defaults) and against the keys the builders read, so the three cannot drift.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

NS = "trainplane:"

Kind = Literal["text", "bool", "int", "choice", "nodes"]


def _clouds() -> Sequence[str]:
    from components.backends import backend_names

    return list(backend_names())


def _first_cloud() -> str:
    return next(iter(_clouds()), "")


def _gpus() -> Sequence[str]:
    from components.catalog import catalog

    return catalog().gpu_names()


@dataclass(frozen=True)
class Answer:
    """One answer key of a template, `trainplane:<name>`.

    `default` is what `pulumi new` writes when the prompt is accepted ("" writes nothing); a key the
    template does not ask (`asked=False`) has none: left out, the program picks (components/quickstart.py).
    `fills` are the key paths of the built object (under `platform.` / `job.`) that the answer gives;
    `{gpu}` stands for the index of the GPU pool among the platform's node pools.
    """

    name: str
    kind: Kind
    words: str
    fills: tuple[str, ...] = ()
    default: str | Callable[[], str] | None = ""
    asked: bool = True
    minimum: int = 1
    choices: Callable[[], Sequence[str]] | None = None

    @property
    def key(self) -> str:
        return NS + self.name

    def default_text(self) -> str | None:
        return self.default() if callable(self.default) else self.default

    def problem(self, text: str) -> str | None:
        """What is wrong with the answer `text`, as one line naming the key; None when it is fine."""
        value = text.strip()
        if self.kind == "bool" and value.lower() not in ("true", "false"):
            return f"{self.key}: {text!r} is not true or false"
        if self.kind == "int":
            return self._count_problem(text, value)
        if self.kind == "nodes":
            return self._nodes_problem(text)
        if self.kind == "choice" and self.choices is not None:
            return self._choice_problem(text, list(self.choices()))
        return None

    def _count_problem(self, text: str, value: str) -> str | None:
        try:
            number = int(value)
        except ValueError:
            return f"{self.key}: {text!r} is not a whole number; expected {self.words}"
        if number < self.minimum:
            return f"{self.key}: {number} is less than {self.minimum}; expected {self.words}"
        return None

    def _nodes_problem(self, text: str) -> str | None:
        parts = text.strip().split(":")
        try:
            counts = [int(p) for p in parts]
        except ValueError:
            counts = []
        if not counts or len(counts) > 2:
            return f"{self.key}: {text!r} is not {self.words}"
        if min(counts) < self.minimum:
            return f"{self.key}: {text!r} has a count less than {self.minimum}; expected {self.words}"
        if counts[0] > counts[-1]:
            return f"{self.key}: {text!r} has its minimum above its maximum; expected {self.words}"
        return None

    def _choice_problem(self, text: str, choices: list[str]) -> str | None:
        if text in choices:
            return None
        hint = did_you_mean(text, choices)
        return f"{self.key}: {text!r} is not {self.words}{hint} (known: {', '.join(choices)})"


def did_you_mean(given: str, known: Iterable[str], prefix: str = "") -> str:
    """`; did you mean <prefix>X?` for the known name X nearest to `given` (case aside), or ""."""
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(given.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {prefix}{by_lower[close[0]]}?" if close else ""


@dataclass(frozen=True)
class Template:
    """A `pulumi new` template's answers; `program_keys` are the other `trainplane:` keys its program reads."""

    name: str
    root: str
    answers: tuple[Answer, ...]
    program_keys: tuple[str, ...]

    def answer(self, name: str) -> Answer:
        return next(a for a in self.answers if a.name == name)

    def problems(self, values: Mapping[str, str]) -> dict[str, str]:
        """The answers (by name, without the namespace) that are not of their kind, each with its line."""
        found = {}
        for a in self.answers:
            text = values.get(a.name)
            if text not in (None, "") and (problem := a.problem(str(text))):
                found[a.name] = problem
        return found

    def unknown(self, values: Iterable[str], read: Iterable[str] = ()) -> list[str]:
        """One line per key that is no answer of this template and that neither its program nor what built
        the object (`read`: a cloud backend asks for its own answers) reads; with the nearest known key."""
        known = {a.name for a in self.answers} | set(self.program_keys) | set(read)
        return [
            f"unknown key {NS}{name}{did_you_mean(name, sorted(known), NS)}"
            for name in sorted(set(values) - known)
        ]

    def in_answer_terms(self, problems: Iterable[str], obj: Mapping[str, Any] | None = None) -> list[str]:
        """The built object's problems (`platform.cluster.name: ...`) told under the answer key that gave
        the value (`trainplane:clusterName: ...`); a line no answer gave is left as it is."""
        places = {"gpu": _gpu_pool_index(obj or {})}
        paths = sorted(
            ((f"{self.root}.{fill.format(**places)}", a) for a in self.answers for fill in a.fills),
            key=lambda pair: -len(pair[0]),
        )
        told = []
        for line in problems:
            path, sep, text = line.partition(": ")
            owner = next(
                (a for p, a in paths if sep and (path == p or path.startswith((p + ".", p + "[")))), None
            )
            line = f"{owner.key}: {text}" if owner else line
            if line not in told:  # one answer may fill two places (team: teams[0].name and team)
                told.append(line)
        return told


def _gpu_pool_index(obj: Mapping[str, Any]) -> int:
    pools = obj.get("nodePools") or []
    return next((i for i, p in enumerate(pools) if isinstance(p, dict) and p.get("name") == "gpu"), 0)


DNS_LABEL_WORDS = "lowercase letters, digits and '-', starting with a letter"
COUNT = "1 or more"

GPU_PLATFORM = Template(
    name="gpu-platform",
    root="platform",
    answers=(
        Answer("cloud", "choice", "a cloud trainplane has", ("cloud",), _first_cloud, choices=_clouds),
        Answer("region", "text", "the cloud's region (empty: the cloud's default region)", ("region",)),
        Answer(
            "project", "text", "the cloud project to deploy into (clouds that have projects)", ("project",)
        ),
        Answer("clusterName", "text", DNS_LABEL_WORDS + ", at most 40", ("cluster.name",), "ml-dev"),
        Answer(
            "kubernetesVersion",
            "text",
            'a Kubernetes minor version, e.g. "1.33"',
            ("cluster.kubernetesVersion",),
            None,
            asked=False,
        ),
        Answer(
            "context",
            "text",
            "the kubeconfig context of an existing cluster",
            ("cluster.context",),
            None,
            False,
        ),
        Answer("gpu", "choice", "a known GPU", ("nodePools[{gpu}].gpu",), "H100", choices=_gpus),
        Answer(
            "gpusPerNode", "int", COUNT + ", a count the GPU comes in", ("nodePools[{gpu}].gpusPerNode",), "8"
        ),
        Answer("maxGpuNodes", "int", COUNT, ("nodePools[{gpu}].maxNodes",), "2"),
        Answer("spot", "bool", "true or false", ("nodePools[{gpu}].capacity",), "true"),
        Answer("team", "text", DNS_LABEL_WORDS, ("teams[0].name", "team"), "ml"),
        Answer("costCenter", "text", "lowercase letters, digits, '-' and '_'", ("costCenter",)),
    ),
    program_keys=("kubeconfig", "platform"),
)

TRAINING_JOB = Template(
    name="training-job",
    root="job",
    answers=(
        Answer(
            "platformStack",
            "text",
            "a stack name: stack, project/stack or org/project/stack",
            ("platformStack",),
            "organization/gpu-platform/dev",
        ),
        Answer("jobName", "text", DNS_LABEL_WORDS + ", at most 40", ("name",), "gpt-small"),
        Answer("team", "text", DNS_LABEL_WORDS, ("team",), "ml"),
        Answer("image", "text", "a container image", ("image",), "ghcr.io/example/trainplane-trainer:0.1.0"),
        Answer("nodePool", "text", DNS_LABEL_WORDS, ("nodePool",), "gpu"),
        Answer("nodes", "nodes", 'a node count ("2") or an elastic range min:max ("1:2")', ("nodes",), "2"),
        Answer("gpusPerNode", "int", COUNT, ("gpusPerNode",), "8"),
        Answer(
            "model",
            "text",
            "a model preset (tiny, gpt-small) or module:function",
            ("trainer.model",),
            "gpt-small",
        ),
        Answer("steps", "int", COUNT, ("trainer.steps",), "20000"),
        Answer("globalBatchSize", "int", COUNT, ("trainer.globalBatchSize",), None, asked=False),
        Answer("microBatchSize", "int", COUNT, ("trainer.microBatchSize",), None, asked=False),
        Answer(
            "checkpointUri",
            "text",
            "a bucket URI, <scheme>://auto or a path",
            ("checkpoint.uri",),
            "s3://auto",
        ),
        Answer("checkpointIntervalSteps", "int", COUNT, ("checkpoint.intervalSteps",), None, asked=False),
        Answer("spot", "bool", "true or false", ("spot",), "true"),
    ),
    program_keys=("job",),
)

TEMPLATES = {t.name: t for t in (GPU_PLATFORM, TRAINING_JOB)}


def answer_values(config: Mapping[str, Any]) -> dict[str, str]:
    """The `trainplane:` keys of a stack's config by name (without the namespace), as strings."""
    return {k[len(NS) :]: str(v) for k, v in config.items() if k.startswith(NS)}
