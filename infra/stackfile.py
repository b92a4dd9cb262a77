"""Reading `stacks/Pulumi.<stack>.yaml` the way the Pulumi engine feeds it to the program."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# Marker handed to the program for a secret that cannot be decrypted offline (no Pulumi CLI, no key).
OFFLINE_SECRET = "(secret: not decrypted offline)"


class StackFileError(Exception):
    """A stack file that cannot be read; the message is one line naming the file."""


@dataclass(frozen=True)
class StackFile:
    path: Path
    name: str
    # Namespaced keys ("trainplane:platform") to the values as the engine passes them: strings, with
    # objects and lists as JSON text.
    config: dict[str, str]
    secret_keys: list[str] = field(default_factory=list)

    def object(self, key: str) -> object | None:
        """A config value decoded back into Python (objects and lists), or None when absent."""
        text = self.config.get(key)
        if text is None:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text


def _project(root: Path) -> dict:
    """The project file (Pulumi.yaml) of `root` as a mapping, or {} when it has none or it is unreadable."""
    try:
        doc = yaml.safe_load((root / "Pulumi.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return doc if isinstance(doc, dict) else {}


def stack_dir(root: Path) -> Path:
    """Where a project keeps its Pulumi.<stack>.yaml files: `stackConfigDir` of its Pulumi.yaml, else the
    project directory itself (pulumi v3.259.0 sdk/go/common/workspace/project.go StackConfigDir: "combined
    with the folder" of Pulumi.yaml; a `pulumi new` project has its stack files next to Pulumi.yaml). A
    root without a Pulumi.yaml is taken as a trainplane checkout (stacks/)."""
    project = _project(root)
    if not project:
        return root / "stacks"
    return root / str(project.get("stackConfigDir") or ".")


def _project_dir(root: Path, name: str) -> Path | None:
    """The project named `name`: `root` itself, else a sibling directory of it whose Pulumi.yaml has that
    name (a platform project and a job project created side by side with `pulumi new`)."""
    if _project(root).get("name") == name:
        return root
    candidates = [root.parent / name, *sorted(p.parent for p in root.parent.glob("*/Pulumi.yaml"))]
    return next((d for d in candidates if _project(d).get("name") == name), None)


def project_root(start: Path | None = None) -> Path:
    """The nearest directory holding Pulumi.yaml from `start` (the cwd), else this checkout's root."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "Pulumi.yaml").is_file():
            return d
    return Path(__file__).resolve().parent.parent


def resolve(stack: str, root: Path | None = None) -> Path:
    """`aws-dev` -> <root>/stacks/Pulumi.aws-dev.yaml (the project's stackConfigDir); a path is taken as it
    is. A fully qualified `org/project/stack` (a job's platformStack) is looked up in the project of that
    name: the current one or a sibling directory; when no such project is found, in the current one."""
    p = Path(stack)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    base = root or project_root()
    parts = stack.split("/")
    if len(parts) == 3:
        base = _project_dir(base, parts[1]) or base
    return stack_dir(base) / f"Pulumi.{parts[-1]}.yaml"


def load(stack: str | Path, root: Path | None = None) -> StackFile:
    path = resolve(str(stack), root)
    if not path.is_file():
        raise StackFileError(f"{path}: no such stack file{_stacks_beside(str(stack), path)}")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise StackFileError(f"{path}:{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise StackFileError(f"{path}: expected a mapping with a `config:` mapping")
    config: dict[str, str] = {}
    secrets: list[str] = []
    for key, value in (doc.get("config") or {}).items():
        if ":" not in str(key):
            raise StackFileError(f"{path}: config key {key!r} needs a namespace, e.g. trainplane:{key}")
        if isinstance(value, dict) and set(value) == {"secure"}:
            config[key] = OFFLINE_SECRET
            secrets.append(key)
            continue
        config[key] = value if isinstance(value, str) else json.dumps(value)
    base = path.name
    name = base[len("Pulumi.") : -len(path.suffix)] if base.startswith("Pulumi.") else path.stem
    from components.spec import ConfigError

    try:
        config = from_template_answers(config)
    except ConfigError as e:  # an answer of the template (components/answers.py), one line each
        raise StackFileError("\n".join(f"{path}: {line}" for line in e.problems)) from None
    return StackFile(path=path, name=name, config=config, secret_keys=secrets)


# The key that tells each `pulumi new` template's flat answers apart (stacks/templates/*/Pulumi.yaml):
# both templates prompt for it with a non-empty default, so `pulumi new` always writes it.
_TEMPLATE_KINDS = {"trainplane:cloud": "trainplane:platform", "trainplane:platformStack": "trainplane:job"}


def from_template_answers(config: dict[str, str]) -> dict[str, str]:
    """A stack made by `pulumi new` from stacks/templates/ holds the template's flat answers
    (`trainplane:cloud`, `trainplane:gpu`, ...), not the `trainplane:platform` / `trainplane:job` object;
    its program builds the object from them (components/quickstart.py). Do the same here, so that such a
    stack plans and verifies like one written by hand, with the answers checked as the programs check them
    (a ConfigError naming the answer keys). A stack that has the object is returned as it is (the template
    programs prefer the object too)."""
    if "trainplane:platform" in config or "trainplane:job" in config:
        return config
    kinds = [obj for key, obj in _TEMPLATE_KINDS.items() if key in config]
    if len(kinds) != 1:
        return config
    from components.quickstart import job_from_answers, platform_from_answers

    build = platform_from_answers if kinds == ["trainplane:platform"] else job_from_answers
    return {**config, kinds[0]: json.dumps(build(config))}


def _stacks_beside(asked: str, path: Path) -> str:
    """For a stack asked by name: the stacks that do exist in its stacks/ folder, the closest first."""
    import difflib

    if path.parent.name != "stacks" or not path.parent.is_dir() or Path(asked).suffix in (".yaml", ".yml"):
        return ""
    names = sorted(p.name[len("Pulumi.") : -len(p.suffix)] for p in path.parent.glob("Pulumi.*.yaml"))
    if not names:
        return ""
    # `org/project/stack` (a job's platformStack) is matched on its stack name
    close = difflib.get_close_matches(asked.split("/")[-1], names, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint}; stacks: {', '.join(names)}"
