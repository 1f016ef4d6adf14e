"""Recorded values as plain data: secrets kept marked, unknowns spelled out, internals dropped.

The engine keeps a secret as :class:`Secret` so the policies can still judge its value while every
rendering (text, markdown, JSON, diff) shows it redacted; nothing relies on key names alone.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterator

from ..fsutil import json_or_none
from ..secrets import REDACTED, redact

#: What an output not known at preview time is shown as (only with ``preview=True``).
UNKNOWN_TEXT = "(known after apply)"


class Secret:
    """A value Pulumi marked secret (``pulumi.Output.secret``, ``config --secret``)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other.value == self.value

    def __hash__(self) -> int:
        return hash(repr(self.value))

    def __repr__(self) -> str:
        return "Secret(***)"


def clean_value(value: Any) -> Any:
    """Deserialised Pulumi properties -> plain data (``__``-prefixed internals such as a dynamic
    provider's pickled ``__provider`` are dropped: they are code, not configuration)."""
    from pulumi.output import Unknown
    from pulumi.runtime.rpc import is_rpc_secret

    if isinstance(value, dict):
        if is_rpc_secret(value):
            return Secret(clean_value(value.get("value")))
        return {k: clean_value(v) for k, v in value.items() if not str(k).startswith("__")}
    if isinstance(value, (list, tuple)):
        return [clean_value(v) for v in value]
    if isinstance(value, Unknown):
        return UNKNOWN_TEXT
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    urn = getattr(value, "urn", None)  # a resource reference
    if urn is not None:
        return f"resource reference {type(value).__name__}"
    return repr(value)


def reveal(value: Any) -> Any:
    """The real values (for policies only: they judge what would be deployed)."""
    if isinstance(value, Secret):
        return reveal(value.value)
    if isinstance(value, dict):
        return {k: reveal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal(v) for v in value]
    return value


#: Strings longer than this (cloud-init user data, policy documents) are shown by size and digest.
LONG_TEXT = 2048


def shorten(value: Any) -> Any:
    """Long strings as ``(N bytes, sha256:...)``: a change still shows, the document stays small
    (a node's base64 user data is ~26 KB; 512 nodes would make a 13 MB plan)."""
    if isinstance(value, str) and len(value) > LONG_TEXT:
        return f"({len(value.encode())} bytes, sha256:{hashlib.sha256(value.encode()).hexdigest()[:16]})"
    if isinstance(value, dict):
        return {k: shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shorten(v) for v in value]
    return value


def public(value: Any) -> Any:
    """What may be printed: marked secrets and credential-shaped keys/values redacted."""
    return redact(_mask(value))


def _mask(value: Any) -> Any:
    if isinstance(value, Secret):
        return REDACTED
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, leaf)`` pairs: ``dataDisks[0].size``; lists of scalars stay one value; a string
    holding a JSON document (a RAM policy) is opened up: ``policyDocument(json).Statement[0]...``."""
    if isinstance(value, str) and value[:1] in "{[" and len(value) > 2:
        parsed = json_or_none(value)  # bounded: a hand-made plan's string may nest 100,000 deep
        if isinstance(parsed, (dict, list)) and parsed:
            yield from flatten(parsed, f"{path}(json)")
            return
    if isinstance(value, dict) and value:
        for k in sorted(value):
            yield from flatten(value[k], f"{path}.{k}" if path else str(k))
    elif isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        for i, v in enumerate(value):
            yield from flatten(v, f"{path}[{i}]")
    else:
        yield path, value
