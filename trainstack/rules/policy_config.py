"""The one policy config: a ``--policy-pack-config`` JSON file, read and checked once.

Shape: ``{policy: level}`` or ``{policy: {"enforcementLevel": level, **settings}}``, ``level`` one of
``advisory``, ``mandatory``, ``remediate`` (= mandatory), ``disabled``; the key ``all`` sets every
level (entries for single policies still win). Schema defaults fill unset settings, as the Pulumi
CLI does. ``validate``, ``resolve``, ``plan`` and ``diff`` take it as ``--policy-config FILE`` or from
the stack setting ``trainstack:policyConfig``; the workflows pass the same file to ``pulumi
preview/up --policy-pack-config``; ``policies/runner.py`` checks a config with these same rules.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional, Union

from ..errors import InputError, Problem
from .policy_book import NO_PCIE_MULTI_GPU_TRAINING, POLICY_SPECS

if TYPE_CHECKING:
    from ..placement.allowances import PolicyAllowances

LEVELS = ("advisory", "mandatory", "remediate", "disabled")
MAX_POLICY_CONFIG_BYTES = 1 << 20
_JSON_TYPES = {"string": (str,), "number": (int, float), "integer": (int,), "boolean": (bool,),
               "array": (list, tuple), "object": (dict,)}
#: (name, default level, config schema properties) of each policy a config may name
PolicyShape = tuple[str, str, Mapping[str, Mapping[str, Any]]]


class PolicyConfigError(ValueError):
    """A config the pack would refuse; ``key`` is where (``policy`` or ``policy.setting``)."""

    def __init__(self, message: str, key: str, given: Any = None):
        super().__init__(message)
        self.key, self.given = key, given


def spec_shapes() -> list[PolicyShape]:
    return [(s.name, s.level, s.config_schema) for s in POLICY_SPECS]


def parse_level(value: Any, where: str) -> str:
    if isinstance(value, str) and value.strip().lower() in LEVELS:
        return value.strip().lower()
    raise PolicyConfigError(f"policy config {where}: enforcement level {value!r} is not one of {', '.join(LEVELS)}",
                            where, value)


def check_setting(policy: str, schema: Mapping[str, Mapping[str, Any]], key: str, value: Any) -> None:
    """A setting's type and bounds, as the pack's config schema states them."""
    where = f"{policy}.{key}"
    if key not in schema:
        known = ", ".join(sorted(schema)) or "none"
        raise PolicyConfigError(f"policy config {policy}: unknown setting {key!r} (settings: {known})", where)
    kind = schema[key].get("type")
    ok = _JSON_TYPES.get(kind or "", (object,))
    if isinstance(value, bool) and kind in ("number", "integer") or not isinstance(value, ok):
        raise PolicyConfigError(f"policy config {where}: expected {kind}, got {json.dumps(value)}", where, value)
    if kind in ("number", "integer") and not math.isfinite(value):
        raise PolicyConfigError(f"policy config {where}: expected a finite {kind}, got {value}", where, value)
    if kind in ("number", "integer") and "minimum" in schema[key] and value < schema[key]["minimum"]:
        raise PolicyConfigError(f"policy config {where}: must be at least {schema[key]['minimum']}, got {value}",
                                where, value)
    if kind == "array" and "items" in schema[key]:
        for item in value:
            if not isinstance(item, _JSON_TYPES.get(schema[key]["items"].get("type"), (object,))):
                raise PolicyConfigError(f"policy config {where}: expected a list of "
                                        f"{schema[key]['items'].get('type')}s, got {json.dumps(value)}", where, value)


def resolve_policy_config(config: Optional[Mapping[str, Any]],
                          policies: Optional[Iterable[PolicyShape]] = None) -> dict[str, tuple[str, dict]]:
    """``{policy: (level, settings)}`` from a config (defaults filled in); PolicyConfigError when bad.
    Levels are the config's words (``remediate`` stays ``remediate``: it blocks like ``mandatory``)."""
    shapes = list(spec_shapes() if policies is None else policies)
    by_name = {name: schema for name, _, schema in shapes}
    config = dict(config or {})
    every = parse_level(config.pop("all"), "all") if "all" in config else None
    out: dict[str, tuple[str, dict]] = {}
    for name, default, schema in shapes:
        out[name] = (every or default, {k: v["default"] for k, v in schema.items() if "default" in v})
    for name, value in config.items():
        if name not in by_name:
            raise PolicyConfigError(f"policy config: unknown policy {name!r} (policies: {', '.join(by_name)})",
                                    str(name))
        level, props = out[name]
        if isinstance(value, Mapping):
            value = dict(value)
            if "enforcementLevel" in value:
                level = parse_level(value.pop("enforcementLevel"), name)
            for key, setting in value.items():
                check_setting(name, by_name[name], key, setting)
            props.update(value)
        else:
            level = parse_level(value, name)
        out[name] = (level, props)
    return out


def blocks(level: str) -> bool:
    """Whether a verdict at ``level`` stops ``pulumi up`` (and makes the CLI exit 4)."""
    return level in ("mandatory", "remediate")


class PolicyConfigDocument(dict):
    """A loaded policy config (a plain mapping for every reader) that remembers its file, so the
    offline plan can hand the recorded program the same file (``trainstack:policyConfig``)."""

    def __init__(self, doc: Mapping[str, Any], path: Union[str, Path]):
        super().__init__(doc)
        self.path = Path(path)


def load_policy_config(path: Union[str, Path, None]) -> Optional[dict[str, Any]]:
    """The config in ``path`` (None: no config), checked: exit 2 naming the file and the key; the
    document remembers its file (:class:`PolicyConfigDocument`)."""
    if not path:
        return None
    from ..fsutil import read_json_file

    doc = read_json_file(path, what="policy config", limit=MAX_POLICY_CONFIG_BYTES, max_depth=16)
    if not isinstance(doc, dict):
        raise InputError(f"{path}: a policy config is a JSON object of policy name -> level or settings",
                         hint="policy config format: docs/policies.md")
    try:
        resolve_policy_config(doc)
    except PolicyConfigError as exc:
        raise InputError(f"{path}: {exc}", problems=[Problem(path=exc.key, message=str(exc), file=str(path),
                                                             given=exc.given, has_given=exc.given is not None)],
                         hint="policy config format: docs/policies.md") from None
    return PolicyConfigDocument(doc, path)


def policy_allowances(config: Optional[Mapping[str, Any]], source: Union[str, Path, None] = None
                      ) -> "PolicyAllowances":
    """What ``config`` lets the resolver plan beyond the engine's own rules, so it plans exactly what the
    pack lets through: ``no-pcie-multi-gpu-training.allowed_types`` (any level), or every PCIe type when
    that policy is disabled (itself or through ``all``). ``advisory`` lifts nothing: a warning level names
    no type, and the engine's PCIe rule is the product's promise. ``source``: the file, for the labels."""
    from ..placement.allowances import NO_ALLOWANCES, PolicyAllowances

    if not config:
        return NO_ALLOWANCES
    level, settings = resolve_policy_config(config)[NO_PCIE_MULTI_GPU_TRAINING]
    types = frozenset(str(t) for t in settings.get("allowed_types") or ())
    if not types and level != "disabled":
        return NO_ALLOWANCES
    return PolicyAllowances(pcie_multi_gpu_types=types, every_pcie_type=level == "disabled",
                            policy=NO_PCIE_MULTI_GPU_TRAINING, source=display_path(source))


def display_path(path: Union[str, Path, None]) -> str:
    """A policy config's path as labels show it: relative to the working directory when inside it (the
    project root for the CLI and ``pulumi up`` alike), else absolute."""
    if not path:
        return ""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(resolved)


def load_allowances(path: Union[str, Path, None]) -> "PolicyAllowances":
    """The allowances of the policy config in ``path`` (checked as :func:`load_policy_config` checks it)."""
    return policy_allowances(load_policy_config(path), path)
