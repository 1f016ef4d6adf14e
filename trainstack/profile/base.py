"""What every profile section model shares: frozen, strict types, finite numbers, and no control
character in any string field, whether trainstack uses the field on this plan or not.

Strict types: a YAML ``true`` is never the number 1 and a quoted ``"2"`` never the number 2 (a
``tensor_parallel: true`` would otherwise plan a layout nobody asked for); a whole number is
accepted where a decimal is. Lists are read into tuples. One spelling is read as the number it is
in YAML 1.2 (https://yaml.org/spec/1.2.2/#1023-core-schema): an exponent without a dot or a sign,
``5.0e7``, ``1e9``, which PyYAML's YAML 1.1 rules leave a string (trainstack's own reader resolves
it, trainstack/profile/yamlfile.py; a document parsed by plain PyYAML reaches a decimal field so).

Control characters (C0, DEL, C1, the Unicode line and paragraph separators) are refused in every
string, key and list item; the free-text fields of a section (``FREE_TEXT``: ``job.command`` and
``job.env`` values) may hold tab, line feed, carriage return and the Unicode separators, which a
shell line and a variable carry safely (the node files quote them).
"""

from __future__ import annotations

import functools
import re
import types
import typing
from typing import Any, ClassVar, Optional, Union

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

#: characters that never belong in an id, a tag or a URI: C0/C1 controls, DEL, line separators
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: C0, DEL and C1 less tab, line feed and carriage return (free text: a command, a variable's value;
#: the Unicode separators are text there, and the node files quote them)
CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


CONTROL_WHY = "control characters have no place in an id, a name, a path or an option (a pasted newline or escape?)"


#: a YAML 1.2 float with an exponent: what PyYAML (YAML 1.1) leaves a string
EXPONENT_FLOAT = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+")


def _no_control(v: Optional[str], what: str = "value") -> Optional[str]:
    if v is not None and CONTROL.search(v):
        raise ValueError(f"the {what} holds a control character (a newline or tab?)")
    return v


def control_char(text: str, free_text: bool = False) -> Optional[str]:
    """The first control character of ``text`` as ``U+000A``, or None."""
    m = (CONTROL_IN_TEXT if free_text else CONTROL).search(text)
    return f"U+{ord(m.group(0)):04X}" if m else None


def _strings(value: Any, free_text: bool) -> Optional[str]:
    """Where a control character sits in a field's value (a string, list item, key or value)."""
    if isinstance(value, str):
        ch = control_char(value, free_text)
        return f"holds a control character ({ch})" if ch else None
    if isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            if isinstance(item, str) and (ch := control_char(item)):
                return f"item {i} holds a control character ({ch})"
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and (ch := control_char(key)):
                return f"a key holds a control character ({ch})"
            if isinstance(item, str) and (ch := control_char(item, free_text)):
                return f"the value of {key!r} holds a control character ({ch})"
    return None


class _Strict(BaseModel):
    # NaN and Infinity are never a size, a price or a budget: refused like any wrong number
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=True)
    #: fields whose text may hold tab, line feed and carriage return
    FREE_TEXT: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _yaml12_exponents(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in _decimal_fields(cls):
                v = data.get(name)
                if isinstance(v, str) and EXPONENT_FLOAT.fullmatch(v):
                    data = {**data, name: float(v)}
        return data

    @model_validator(mode="after")
    def _no_control_characters(self) -> "_Strict":
        # after the fields' own validators (a specific message, "must be DNS-safe", comes first)
        errors = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            where = _strings(value, name in self.FREE_TEXT)
            if where:
                errors.append(InitErrorDetails(
                    type=PydanticCustomError("value_error", "{why}", {"why": f"{where}: {CONTROL_WHY}"}),
                    loc=(name,), input=value))
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self


@functools.lru_cache(maxsize=None)
def _decimal_fields(cls: type) -> tuple[str, ...]:
    """The fields of ``cls`` typed ``float`` or ``Optional[float]``."""
    out = []
    for name, field in cls.model_fields.items():  # type: ignore[attr-defined]
        ann = field.annotation
        args = typing.get_args(ann) if typing.get_origin(ann) in (Union, types.UnionType) else (ann,)
        if float in args and all(a in (float, type(None)) for a in args):
            out.append(name)
    return tuple(out)
