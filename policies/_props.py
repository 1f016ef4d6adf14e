"""Read CrossGuard props safely: unwrap the engine's proxy, keep unknowns explicit, coerce numbers.

The engine hands a policy the resource inputs as camelCase wire names, numbers as floats, wrapped
by ``pulumi_policy.proxy.unknown_checking_proxy``: reading a value that is unknown during preview
raises ``UnknownValueError`` (the engine turns that into an advisory "can't run policy ...").
Even ``"key" in props`` and ``props.get(key)`` read the value and may raise.

:func:`plain` unwraps the proxy once into plain dicts and lists and replaces every unknown by an
:class:`Unknown` that remembers where it was. Policies then decide per value: ``key in p`` tests
presence without reading, :func:`need` raises the engine's ``UnknownValueError`` for a value the
policy cannot judge without, and the coercers return ``None`` for garbage instead of crashing the
analyzer (an exception other than ``UnknownValueError`` aborts the whole preview).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping  # isinstance: typing.Mapping's check is several times slower
from typing import Any, Iterable, Optional

from pulumi_policy.proxy import UnknownValueError, _DictProxy, _ListProxy, _is_unknown

from trainstack.rules.checks.values import number_of, whole

#: ``trainstack:role`` marks what a resource is for (docs/DESIGN.md "Markers the policies rely on").
ROLE_TAG = "trainstack:role"
ZONE_TAG = "trainstack:zone"
#: ``trainstack:name`` ties every trainstack resource to its profile (trainstack/tags.py).
NAME_TAG = "trainstack:name"


class Unknown:
    """A value the engine does not know yet (an Output of another resource at preview)."""

    __slots__ = ("sentinel", "path")

    def __init__(self, sentinel: str, path: tuple[str, ...]):
        self.sentinel = sentinel
        self.path = path

    def __repr__(self) -> str:
        return f"<unknown .{'.'.join(self.path)}>"

    def __bool__(self) -> bool:  # an accidental truth test must not silently pass or fail
        raise UnknownValueError(self.sentinel, list(self.path))


_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any, path: tuple[str, ...] = ()) -> Any:
    """Props as plain dicts/lists; unknown sentinels become :class:`Unknown` (never raises)."""
    kind = type(value)
    if kind in _SCALARS:  # most values: no proxy or container checks needed
        return Unknown(value, path) if kind is str and _is_unknown(value) else value
    if isinstance(value, (_DictProxy, _ListProxy)):
        value = value["__target"]  # reading ``__target`` returns the wrapped object unchecked
    if isinstance(value, Mapping):
        return {str(k): plain(value[k], path + (str(k),)) for k in value}
    if isinstance(value, (list, tuple)):
        return [plain(v, path + (str(i),)) for i, v in enumerate(value)]
    if _is_unknown(value):
        return Unknown(value, path)
    return value


_PLAIN_SEEN: "OrderedDict[int, tuple[Any, Any]]" = OrderedDict()
_PLAIN_KEPT = 4096


def plain_props(props: Any) -> Any:
    """:func:`plain` of a resource's props, once per props object: every policy of one analysis reads the
    same object (the runner and the engine's stack call pass it to each), and none changes what it reads."""
    hit = _PLAIN_SEEN.get(id(props))
    if hit is not None and hit[0] is props:
        return hit[1]
    out = plain(props)
    _PLAIN_SEEN[id(props)] = (props, out)  # the props are kept with it, so their id is not reused meanwhile
    if len(_PLAIN_SEEN) > _PLAIN_KEPT:
        _PLAIN_SEEN.popitem(last=False)
    return out


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown)


def need(value: Any) -> Any:
    """``value``, or the engine's ``UnknownValueError`` when it is unknown (policy can't run)."""
    if isinstance(value, Unknown):
        raise UnknownValueError(value.sentinel, list(value.path))
    return value


def first(props: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    """The value of the first key present (camelCase and snake_case spellings)."""
    for key in keys:
        if key in props:
            return props[key]
    return default


def present(props: Mapping[str, Any], *keys: str) -> bool:
    """Whether any key is set, whatever its value (even unknown); no value is read."""
    return any(key in props for key in keys)


def as_number(value: Any) -> Optional[float]:
    """A finite float, or ``None`` for missing/garbage. Unknown raises (see :func:`need`)."""
    return number_of(need(value))


def as_int(value: Any) -> Optional[int]:
    """Engine floats (``2.0``) back to ints; ``None`` for missing, garbage or fractions."""
    return whole(as_number(value))


def as_bool(value: Any) -> Optional[bool]:
    value = need(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, (int, float)):
        return bool(value)
    return None


def as_str(value: Any) -> Optional[str]:
    value = need(value)
    return value if isinstance(value, str) and value else None


def as_list(value: Any) -> list:
    """A list value (a single object becomes a one-item list); unknown raises."""
    value = need(value)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def tags(props: Mapping[str, Any]) -> dict[str, Any]:
    """The resource's tags (values may be :class:`Unknown`); unknown tag map raises."""
    value = need(props.get("tags"))
    return dict(value) if isinstance(value, dict) else {}


def tag(props: Mapping[str, Any], key: str) -> Any:
    return tags(props).get(key)


def role(props: Mapping[str, Any]) -> Optional[str]:
    return as_str(tag(props, ROLE_TAG))


def names(items: Iterable[str], limit: int = 6) -> str:
    """``a, b, c`` (and ``... (N more)`` past ``limit``) for one-line messages."""
    items = list(items)
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def fmt_money(value: float) -> str:
    return f"{value:,.2f}"
