"""Read one YAML mapping from a file the user gave: every failure is an InputError naming the file.

Duplicate keys are refused (PyYAML silently keeps the last) and only safe tags load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

import yaml

from ..errors import InputError, Problem

MAX_PROFILE_BYTES = 1 << 20


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys instead of silently keeping the last."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen[key] = True
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_yaml_document(path: Union[str, Path], what: str = "profile") -> dict[str, Any]:
    """Read one YAML mapping from a file; every failure is an InputError naming the file."""
    p = Path(path)
    name = str(path)

    def fail(msg: str, hint: Optional[str] = None) -> InputError:
        return InputError(f"{name}: {msg}", problems=[Problem(path="", message=msg, file=name)], hint=hint)

    if not p.exists():
        raise fail(f"{what} file not found", hint="check the path; sample profiles live in stacks/profiles/")
    if p.is_dir():
        raise fail(f"is a directory, not a {what} file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror}") from None
    if len(raw) > MAX_PROFILE_BYTES:
        raise fail(f"{len(raw)} bytes is too large for a {what} (limit {MAX_PROFILE_BYTES})")
    if b"\x00" in raw:
        raise fail(f"is a binary file, not a YAML {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise fail("is not UTF-8 text") from None
    if not text.strip():
        raise fail(f"is empty; a {what} needs at least `name` and `model`")
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise fail(f"is not valid YAML{where}: {exc.problem or exc.context}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise fail(f"is not valid YAML: {exc}") from None
    if doc is None:
        raise fail(f"is empty; a {what} needs at least `name` and `model`")
    if not isinstance(doc, dict):
        raise fail(f"must be a YAML mapping (key: value), not a {type(doc).__name__}")
    return doc
