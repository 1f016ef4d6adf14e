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

from ..errors import InputError, Problem, did_you_mean
from ..fsutil import KIB, MIB, decode_text, read_json_file, read_regular_file
from ..profile.yamlfile import parse_yaml_text
from ..secrets import scan, secret_texts

from ..plan.schema import FIELDS_ADDED, PLAN_SCHEMA_VERSION, migrated, readable_versions  # noqa: F401
from ..rules.policy_config import MAX_POLICY_CONFIG_BYTES, load_policy_config  # noqa: F401  (the one loader)
from .text_format import finite_number

#: size limits of what a plan or diff reads (a 512-node plan document is about 6 MB)
MAX_STACK_FILE_BYTES = 256 * KIB
MAX_SAVED_PLAN_BYTES = 64 * MIB
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
        try:
            found = list(self.stacks_dir.glob("Pulumi.*.yaml"))
        except OSError:
            return []
        return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in found)


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
    if not isinstance(doc, dict) or not isinstance(doc.get("config") or {}, dict):
        raise InputError(f"{root / 'Pulumi.yaml'}: a Pulumi project file is a mapping with a `config` mapping")
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
    if not _exists(path):
        raise unknown_stack(project, stack)
    doc = _yaml(path, "stack file") or {}
    if not isinstance(doc, dict):
        raise InputError(f"{path}: a stack file is a YAML mapping with a `config` mapping, not a "
                         f"{type(doc).__name__}")
    raw = doc.get("config") or {}
    if not isinstance(raw, dict):
        raise InputError(f"{path}: `config` must be a mapping of key: value, not a {type(raw).__name__}",
                         hint="see stacks/Pulumi.llama3-8b-lora.yaml")
    config = dict(project.defaults)
    secrets: list[str] = []
    plain: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.strip():
            raise InputError(f"{path}: config keys are names such as trainstack:profile")
        full = _full_key(key, project.name)
        if isinstance(value, dict) and "secure" in value:
            config[full] = SECRET_PLACEHOLDER
            secrets.append(full)
        else:
            config[full] = _config_string(value)
            plain[full] = value
    findings = scan(plain)
    if findings:
        raise InputError(f"{path}: stack config holds what looks like a credential in plain text",
                         secrets=secret_texts(findings),
                         problems=[Problem(path=f"config.{f.path}", message=f.message, file=str(path))
                                   for f in findings],
                         hint="`pulumi config set --secret KEY VALUE` encrypts it; better, use the credentials chain")
    return config, tuple(secrets)


def _exists(path: Path) -> bool:
    try:
        path.lstat()
        return True
    except (OSError, ValueError):
        return False


def unknown_stack(project: Project, stack: str) -> InputError:
    known = project.stacks()
    close = did_you_mean(stack, known)
    hint = f"did you mean {' or '.join(repr(s) for s in close)}?" if close else None
    return InputError(f"unknown stack {stack!r} (no {project.stack_file(stack).relative_to(project.root)}); "
                      f"stacks: {', '.join(known) or 'none'}", hint=hint)


def classify(arg: str, project: Project) -> Source:
    """A diff side: a saved plan JSON, a profile YAML, or a stack name."""
    path = Path(arg)
    if _exists(path):
        if path.name.startswith("Pulumi.") and path.suffix in (".yaml", ".yml"):
            return Source("stack", arg, path, stack=path.name[len("Pulumi."):-len(path.suffix)])
        if path.suffix == ".json":
            return Source("saved", arg, path)
        head = read_regular_file(path, what="plan or profile", limit=MAX_SAVED_PLAN_BYTES)[:4096]
        if head.lstrip().startswith(b"{"):
            return Source("saved", arg, path)
        return Source("profile", arg, path)
    if "/" not in arg and "\x00" not in arg and _exists(project.stack_file(arg)):
        return Source("stack", arg, project.stack_file(arg), stack=arg)
    if path.suffix in (".json", ".yaml", ".yml") or "/" in arg:
        raise InputError(f"{arg}: no such file")
    raise unknown_stack(project, arg)


def load_saved_plan(path: Path) -> dict[str, Any]:
    """A saved ``plan --format json`` document, checked for a schema version we can read."""
    doc = read_json_file(path, what="saved plan", limit=MAX_SAVED_PLAN_BYTES)
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise InputError(f"{path}: not a trainstack plan (no schema_version)",
                         hint="produce one with `trainstack plan ... --format json --out FILE`")
    version = doc["schema_version"]
    readable = readable_versions()
    if type(version) is not int or version not in readable:
        shown = version if type(version) is int else "not a whole number"
        raise InputError(f"{path}: plan schema_version {shown} is not supported "
                         f"(this trainstack reads {', '.join(map(str, readable))})")
    problems = saved_plan_problems(doc)
    if problems:
        raise InputError(f"{path}: not a usable trainstack plan ({len(problems)} problem(s))",
                         problems=[Problem(path=w, message=m, file=str(path)) for w, m in problems[:20]],
                         hint="produce it again with `trainstack plan ... --format json --out FILE`")
    return migrated(doc)




def _json_kind(value: Any) -> str:
    """What a JSON value is, named without its content (a saved plan's values may be credentials)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def saved_plan_problems(doc: dict) -> list[tuple[str, str]]:
    """``(path, what is wrong)`` for every part of a saved plan that `diff` reads with the wrong shape.

    Only the shape is checked (types of the parts diff and its renderers read); fields added by
    later versions of the same schema pass untouched. The message names the JSON type given, not
    the value."""
    out: list[tuple[str, str]] = []

    def need(where: str, value: Any, kinds: tuple, what: str, optional: bool = True) -> bool:
        if value is None and optional:
            return False
        if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
            out.append((where, f"must be {what}, not {_json_kind(value)}"))
            return False
        return True

    for key in ("stack", "catalog_date", "kind", "project"):
        need(key, doc.get(key), (str,), "a string or null")
    for key in ("summary", "exports", "plan", "source", "profile", "prices"):
        need(key, doc.get(key), (dict,), "an object or null")
    if need("cost", doc.get("cost"), (dict,), "an object or null"):
        cost = doc["cost"]
        for key in ("hourly_cny", "total_cny", "estimated_hours"):
            if cost.get(key) is not None and not finite_number(cost[key]):
                out.append((f"cost.{key}", "must be a finite number or null"))
        for kind in ("on_demand", "spot"):
            if need(f"cost.{kind}", cost.get(kind), (dict,), "an object or null"):
                for key in ("hourly_cny", "total_cny", "estimated_hours"):
                    v = cost[kind].get(key)
                    if v is not None and not finite_number(v):
                        out.append((f"cost.{kind}.{key}", "must be a finite number or null"))
        _records(out, "cost.breakdown", cost.get("breakdown"), "a list of billed lines", strings=(
            "type", "name", "kind", "unpriced", "unit", "pricing"), numbers=(
            "monthly_cny", "run_cny", "hourly_cny", "after_destroy_monthly_cny", "quantity", "count"),
            flags=("retained", "contingent"))
    capacity = doc["plan"].get("capacity") if isinstance(doc.get("plan"), dict) else None
    if need("plan.capacity", capacity, (dict,), "an object or null"):
        need("plan.capacity.zone_pinned", capacity.get("zone_pinned"), (bool,), "true or false")
        _records(out, "plan.capacity.candidates", capacity.get("candidates"), "a list of candidates",
                 strings=("instance_type", "zone", "gpu_model"), numbers=("hourly_cost_cny", "nodes", "gpus_per_node"),
                 flags=("spot", "planned"))
        if need("plan.capacity.reservation", capacity.get("reservation"), (dict,), "an object or null"):
            _fields(out, "plan.capacity.reservation", capacity["reservation"], strings=("instance_type",),
                    numbers=("hourly_cny", "instances"), flags=())
    if need("resources", doc.get("resources"), (list,), "a list of resources"):
        for i, r in enumerate(doc["resources"]):
            where = f"resources[{i}]"
            if not isinstance(r, dict):
                out.append((where, "must be an object with type and name"))
                continue
            for key in ("type", "name"):
                if not isinstance(r.get(key), str):
                    out.append((f"{where}.{key}", "must be a string"))
            for key in ("urn", "parent_urn", "provider_urn", "id", "parent"):  # the diff graph keys on them
                need(f"{where}.{key}", r.get(key), (str,), "a string or null")
            need(f"{where}.inputs", r.get("inputs"), (dict,), "an object or null")
            deps = r.get("property_dependencies")
            if deps is not None and not (isinstance(deps, dict) and all(
                    isinstance(v, list) and all(isinstance(x, str) for x in v) for v in deps.values())):
                out.append((f"{where}.property_dependencies",
                            f"must be an object of input -> list of URNs, not {_json_kind(deps)}"
                            + (" holding other values" if isinstance(deps, dict) else "")))
            for key in ("replace_on_changes", "ignore_changes", "dependencies"):
                names = r.get(key)
                if names is not None and not (isinstance(names, list) and all(isinstance(x, str) for x in names)):
                    out.append((f"{where}.{key}", "must be a list of names"))
            for key in ("protect", "retain_on_delete", "delete_before_replace"):
                need(f"{where}.{key}", r.get(key), (bool,), "true or false")
    if need("policy", doc.get("policy"), (list,), "a list of verdicts"):
        for i, v in enumerate(doc["policy"]):
            if not isinstance(v, dict):
                out.append((f"policy[{i}]", "must be an object (policy, level, resource, message)"))
                continue
            for key in ("policy", "level", "resource", "message"):
                need(f"policy[{i}].{key}", v.get(key), (str,), "a string or null")
    return out


def _records(out: list[tuple[str, str]], where: str, value: Any, what: str, **kinds: tuple[str, ...]) -> None:
    """A list of objects (null: absent), each checked by ``_fields``."""
    if value is None:
        return
    if not isinstance(value, list):
        out.append((where, f"must be {what}, not {_json_kind(value)}"))
        return
    for i, item in enumerate(value):
        if isinstance(item, dict):
            _fields(out, f"{where}[{i}]", item, **kinds)
        else:
            out.append((f"{where}[{i}]", f"must be an object, not {_json_kind(item)}"))


def _fields(out: list[tuple[str, str]], where: str, item: dict, strings: tuple[str, ...],
            numbers: tuple[str, ...], flags: tuple[str, ...]) -> None:
    """The fields of one record a renderer formats: strings, finite numbers, booleans (null: absent)."""
    for key in strings:
        if item.get(key) is not None and not isinstance(item[key], str):
            out.append((f"{where}.{key}", f"must be a string or null, not {_json_kind(item[key])}"))
    for key in numbers:
        if item.get(key) is not None and not finite_number(item[key]):
            out.append((f"{where}.{key}", "must be a finite number or null"))
    for key in flags:
        if item.get(key) is not None and not isinstance(item[key], bool):
            out.append((f"{where}.{key}", f"must be true or false, not {_json_kind(item[key])}"))


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


def _yaml(path: Path, what: str = "project file") -> Any:
    """A project or stack file, bounded like a profile (size, depth, aliases, plain types)."""
    raw = read_regular_file(path, what=what, limit=MAX_STACK_FILE_BYTES)
    return parse_yaml_text(decode_text(raw, str(path), what), str(path), what)
