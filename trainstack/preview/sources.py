"""What a plan or diff side names: a profile file, a stack, or a saved ``plan --format json``.

Also reads the Pulumi project (``Pulumi.yaml``) and a stack's config the way the Pulumi CLI
would hand it to the program: full ``namespace:key`` names, every value a string, secure values
marked secret (their ciphertext cannot be decrypted offline, so a placeholder stands in).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

import yaml

from ..errors import InputError, did_you_mean

PLAN_SCHEMA_VERSION = 2
#: Fields each schema version added. A saved plan of an older version is still read: what it
#: lacks is listed in its ``unknown_fields`` (the diff reports those as unknown, never as "no change").
#: (Version 1 wrote ``replace_on_changes`` only when set, so its absence there means none.)
FIELDS_ADDED: dict[int, tuple[str, ...]] = {
    2: ("profile", "resources[].ignore_changes", "resources[].delete_before_replace", "resources[].provider_urn"),
}
READABLE_SCHEMA_VERSIONS = (1, PLAN_SCHEMA_VERSION)
#: Stands in for a `pulumi config set --secret` value, which only the real CLI can decrypt.
SECRET_PLACEHOLDER = "offline-preview-secret"


@dataclass(frozen=True)
class Project:
    """The Pulumi project the program belongs to."""

    root: Path
    name: str
    program: Path
    stacks_dir: Path
    defaults: dict[str, str] = field(default_factory=dict)

    def stack_file(self, stack: str) -> Path:
        return self.stacks_dir / f"Pulumi.{stack}.yaml"

    def stacks(self) -> list[str]:
        return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in self.stacks_dir.glob("Pulumi.*.yaml"))


@dataclass(frozen=True)
class Source:
    """One side of a plan or diff."""

    kind: Literal["profile", "stack", "saved"]
    label: str                 # as the user wrote it
    path: Path                 # the profile, the stack file or the saved JSON
    stack: Optional[str] = None


def find_project(start: Optional[Path] = None) -> Project:
    """The nearest ``Pulumi.yaml`` at or above ``start`` (default: cwd), else the one next to
    the trainstack package (so the CLI works from any directory of a checkout)."""
    here = (start or Path.cwd()).resolve()
    candidates = [here, *here.parents, Path(__file__).resolve().parents[2]]
    for d in candidates:
        if (d / "Pulumi.yaml").is_file():
            return _read_project(d)
    raise InputError("no Pulumi.yaml found in this directory or above",
                     hint="run trainstack from the repository that holds Pulumi.yaml")


def _read_project(root: Path) -> Project:
    doc = _yaml(root / "Pulumi.yaml") or {}
    name = str(doc.get("name") or root.name)
    main = root / str(doc.get("main") or ".")
    program = main if main.suffix == ".py" else main / "__main__.py"
    defaults: dict[str, str] = {}
    for key, spec in (doc.get("config") or {}).items():
        value = spec.get("default") if isinstance(spec, dict) else spec
        if value is not None:
            defaults[_full_key(key, name)] = _config_string(value)
    return Project(root=root, name=name, program=program,
                   stacks_dir=root / str(doc.get("stackConfigDir") or "."), defaults=defaults)


def stack_config(project: Project, stack: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """``(config, secret_keys)`` for ``stack``: project defaults overlaid with the stack file."""
    path = project.stack_file(stack)
    if not path.is_file():
        raise unknown_stack(project, stack)
    doc = _yaml(path) or {}
    config = dict(project.defaults)
    secrets: list[str] = []
    for key, value in (doc.get("config") or {}).items():
        full = _full_key(str(key), project.name)
        if isinstance(value, dict) and "secure" in value:
            config[full] = SECRET_PLACEHOLDER
            secrets.append(full)
        else:
            config[full] = _config_string(value)
    return config, tuple(secrets)


def unknown_stack(project: Project, stack: str) -> InputError:
    known = project.stacks()
    close = did_you_mean(stack, known)
    hint = f"did you mean {' or '.join(repr(s) for s in close)}?" if close else None
    return InputError(f"unknown stack {stack!r} (no {project.stack_file(stack).relative_to(project.root)}); "
                      f"stacks: {', '.join(known) or 'none'}", hint=hint)


def classify(arg: str, project: Project) -> Source:
    """A diff side: a saved plan JSON, a profile YAML, or a stack name."""
    path = Path(arg)
    if path.is_file():
        if path.name.startswith("Pulumi.") and path.suffix in (".yaml", ".yml"):
            return Source("stack", arg, path, stack=path.name[len("Pulumi."):-len(path.suffix)])
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".json" or text.lstrip().startswith("{"):
            return Source("saved", arg, path)
        return Source("profile", arg, path)
    if project.stack_file(arg).is_file():
        return Source("stack", arg, project.stack_file(arg), stack=arg)
    if path.suffix in (".json", ".yaml", ".yml") or "/" in arg:
        raise InputError(f"{arg}: no such file")
    raise unknown_stack(project, arg)


def load_saved_plan(path: Path) -> dict[str, Any]:
    """A saved ``plan --format json`` document, checked for a schema version we can read."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable plan JSON ({exc})") from None
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise InputError(f"{path}: not a trainstack plan (no schema_version)",
                         hint="produce one with `trainstack plan ... --format json --out FILE`")
    if doc["schema_version"] not in READABLE_SCHEMA_VERSIONS:
        raise InputError(f"{path}: plan schema_version {doc['schema_version']!r} is not supported "
                         f"(this trainstack reads {', '.join(map(str, READABLE_SCHEMA_VERSIONS))})")
    return with_unknown_fields(doc)


def with_unknown_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with ``unknown_fields``: what its schema version does not record."""
    version = doc.get("schema_version")
    unknown = [f for added, fields in sorted(FIELDS_ADDED.items())
               if isinstance(version, int) and version < added for f in fields]
    return dict(doc, unknown_fields=unknown)


def _full_key(key: str, project: str) -> str:
    return key if ":" in key else f"{project}:{key}"


def _config_string(value: Any) -> str:
    """Pulumi passes every config value to the program as a string (objects as JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, sort_keys=True)


def _yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None


def load_policy_config(path: Optional[str]) -> Optional[dict[str, Any]]:
    """A ``--policy-pack-config`` style JSON file (``{policy: level | {enforcementLevel, ...}}``)."""
    if not path:
        return None
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable policy config JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: a policy config is a JSON object of policy name -> level or settings")
    return doc
