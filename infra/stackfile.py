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


def project_root(start: Path | None = None) -> Path:
    """The nearest directory holding Pulumi.yaml from `start` (the cwd), else this checkout's root."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "Pulumi.yaml").is_file():
            return d
    return Path(__file__).resolve().parent.parent


def resolve(stack: str, root: Path | None = None) -> Path:
    """`aws-dev` -> <root>/stacks/Pulumi.aws-dev.yaml; a path is taken as it is."""
    p = Path(stack)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    return (root or project_root()) / "stacks" / f"Pulumi.{stack}.yaml"


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
    return StackFile(path=path, name=name, config=config, secret_keys=secrets)


def _stacks_beside(asked: str, path: Path) -> str:
    """For a stack asked by name: the stacks that do exist in its stacks/ folder, the closest first."""
    import difflib

    if path.parent.name != "stacks" or not path.parent.is_dir() or Path(asked).suffix in (".yaml", ".yml"):
        return ""
    names = sorted(p.name[len("Pulumi.") : -len(p.suffix)] for p in path.parent.glob("Pulumi.*.yaml"))
    if not names:
        return ""
    close = difflib.get_close_matches(asked, names, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint}; stacks: {', '.join(names)}"
