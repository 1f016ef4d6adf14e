"""pydantic's validation errors as the user's problems: field path, value given, what is allowed."""

from __future__ import annotations

import re
from typing import Any, Optional

from pydantic import BaseModel

from ..models import preset_names
from ..errors import Problem, did_you_mean, value_at
from .model import TrainingProfile


def dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        key = (p.path, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _model_at(loc: tuple) -> Optional[type[BaseModel]]:
    """The pydantic model class that owns the location ``loc`` (for 'did you mean')."""
    model: Any = TrainingProfile
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        ann = field.annotation
        for cand in getattr(ann, "__args__", ()) or (ann,):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                ann = cand
                break
        model = ann
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _allowed_for(err: dict) -> Optional[str]:
    ctx = err.get("ctx") or {}
    typ = err["type"]
    if "expected" in ctx:
        return str(ctx["expected"])
    bounds = {"greater_than": "> {gt}", "greater_than_equal": ">= {ge}", "less_than": "< {lt}",
              "less_than_equal": "<= {le}"}
    if typ in bounds:
        return bounds[typ].format(**ctx)
    return {"int_parsing": "a whole number", "int_type": "a whole number", "float_parsing": "a number",
            "float_type": "a number", "bool_parsing": "true or false", "bool_type": "true or false",
            "string_type": "a string", "dict_type": "a mapping", "model_type": "a mapping",
            "int_from_float": "a whole number"}.get(typ)


_UNION_TAG = re.compile(r"^(literal\[.*\]|int|str|float|bool|none|function-after\[.*\]|.*\[.*\])$")


def _document_loc(raw: tuple, doc: Any) -> tuple:
    """pydantic's error location with union-member tags (``int``, ``literal['auto']``) removed.

    A part is kept when the document has it at that depth (so a user's key named ``str`` or
    ``a[0]`` survives); a part the document lacks is dropped only if it looks like a union tag.
    """
    out, cur = [], doc
    for part in raw:
        if isinstance(cur, dict) and part in cur:
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
        elif isinstance(part, str) and _UNION_TAG.match(part):
            continue
        else:
            out.append(part)
            cur = None
    return tuple(out)


_NAME_LIKE = re.compile(r"[\w.:/@+ \[\]-]{1,64}")
#: the whole-profile and section fields whose values come from a fixed list (enums, names)
#: (model.preset is not one: Hugging Face repo ids are accepted, mixed case and all)
CLOSED_VOCABULARY = {"region", "zone"}


def echoable_key(key: Any) -> bool:
    """Whether a key the user wrote may be repeated in a message: it reads like a field name."""
    from ..secrets import looks_secret_value

    return not isinstance(key, str) or (bool(_NAME_LIKE.fullmatch(key)) and not looks_secret_value(key))


def _path_text(loc: tuple, doc: Any) -> str:
    """``loc`` as ``a.b[0].c``; a key that does not read like a name is shown by position."""
    parts, cur = [], doc
    for part in loc:
        if isinstance(cur, dict) and not echoable_key(part):
            pos = next((i for i, k in enumerate(cur, 1) if k == part), "?")
            parts.append(f"<key {pos}>")
        else:
            parts.append(str(part))
        cur = cur.get(part) if isinstance(cur, dict) else (
            cur[part] if isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur) else None)
    return ".".join(parts)


def closed_value_hidden(given: Any, allowed: list[str]) -> Optional[str]:
    """Why a value given for a fixed-list field is not repeated, or None to repeat it.

    A near miss of an allowed word (a typo) or a plain lowercase word is shown; anything else
    (``hunterSpot``, ``SuperSecretRegionValue``) may be something pasted into the wrong field, so
    the message names the field and what is allowed without repeating it."""
    if not isinstance(given, str):
        return None
    if did_you_mean(given, allowed) or re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,31}", given):
        return None
    return f"{len(given)} characters, not close to any allowed value"


_NUMBER_TYPES = ("int_type", "float_type", "int_from_float", "bool_type")


def _strict_number(given: Any, msg: str) -> str:
    """Why a value of another type is not taken for a number or a flag (strict types: never coerced)."""
    if isinstance(given, bool):
        return "a boolean (YAML reads true/false/yes/no/on/off as one) is not a number"
    if isinstance(given, str):
        return "a quoted string is not a number or a boolean: write the value without quotes"
    if isinstance(given, float) and msg.startswith("Input should be a valid integer"):
        return "must be a whole number, not a decimal"
    if isinstance(given, (int, float)) and msg.startswith("Input should be a valid boolean"):
        return "a number is not true or false"
    return msg


def problem_from(err: dict, doc: dict, file: Optional[str]) -> Problem:
    loc = _document_loc(tuple(err["loc"]), doc)
    path = _path_text(loc, doc)
    typ = err["type"]
    if typ == "extra_forbidden" and loc:
        owner = _model_at(loc[:-1])
        names = list(owner.model_fields) if owner else []
        shown = echoable_key(loc[-1])
        return Problem(path=path, message="unknown field" if shown else
                       "unknown field (its name is not repeated: it does not read like a field name)", file=file,
                       allowed=", ".join(names) if names else None,
                       suggestions=did_you_mean(str(loc[-1]), names) if shown else ())
    if typ == "missing":
        return Problem(path=path, message="required field is missing", file=file)
    found, given = value_at(doc, loc) if loc else (False, None)  # whole-profile rules: no "given"
    if found and isinstance(given, (dict, list)) and typ in ("value_error", "assertion_error"):
        found = False  # a section-level rule: the message says what is wrong, the dump would not
    msg = err["msg"].removeprefix("Value error, ")
    if found and typ in _NUMBER_TYPES:
        msg = _strict_number(given, msg)
    suggestions: list[str] = []
    allowed = _allowed_for(err)
    if path == "model" and "unknown preset" in msg:
        given = (doc.get("model") or {}).get("preset")
        found = True
        path = "model.preset"
        msg = "unknown model preset"
        allowed = ", ".join(preset_names()) + " (case-insensitive; Hugging Face repo ids accepted)"
        suggestions = did_you_mean(str(given), preset_names())
    elif typ == "literal_error" and found and isinstance(given, (str, bool)):
        options = [o.strip(" '") for o in str((err.get("ctx") or {}).get("expected", "")).replace(" or ", ",").split(",")]
        suggestions = did_you_mean(str(given), [o for o in options if o])
        if isinstance(given, bool):
            msg += " (YAML read yes/no/on/off as a boolean: quote the word)"
        hidden = closed_value_hidden(given, [o for o in options if o])
        if hidden:
            return Problem(path=path, message=msg, file=file, hidden=hidden, allowed=allowed, suggestions=suggestions)
    if found and path in CLOSED_VOCABULARY:
        hidden = closed_value_hidden(given, [])
        if hidden:
            return Problem(path=path, message=msg, file=file, hidden=hidden, allowed=allowed, suggestions=suggestions)
    return Problem(path=path, message=msg, file=file, given=given, has_given=found,
                   allowed=allowed, suggestions=suggestions)
