"""Strict types and no control characters in every profile field (issue 34, item 1), by group.

The fields are read from the profile model itself, so a field added later (issue 32's
``training.attention`` / ``fp8_recipe`` / ``sharding``, the capacity issue's ``resources.capacity``)
is covered without editing this file: a number field refuses ``true`` and a quoted number, a
true/false field refuses ``1`` and ``"true"``, and every text field (ids, tags, names, list items,
map keys and values, the choices of a fixed list) refuses a control character, each with the
field's own path through ``parse_profile``, the path ``validate`` and ``plan`` take.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from trainstack.errors import InputError
from trainstack.profile import TrainingProfile, parse_profile

BASE = {"name": "demo", "model": {"preset": "llama-3-8b"}}
#: a dict of section models (job.secrets) is walked through one entry of this name
MAP_KEY = "HF_TOKEN"
#: characters no field may hold, free text included (C0 less tab/LF/CR, DEL, C1)
CONTROLS = [c for c in map(chr, [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0)])]


def _kinds(annotation: Any) -> set[type]:
    """The scalar kinds an annotation admits: int, float, bool, str (a Literal's choices are str)."""
    if annotation in (int, float, bool, str):
        return {annotation}
    if typing.get_origin(annotation) is typing.Literal:
        return {type(x) for x in typing.get_args(annotation)}
    return set().union(*(_kinds(a) for a in typing.get_args(annotation)))


def _leaves(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = []
    for name, field in model.model_fields.items():
        a = field.annotation
        args = typing.get_args(a)
        sub = [x for x in (a, *args) if isinstance(x, type) and issubclass(x, BaseModel)]
        if sub and typing.get_origin(a) is dict:
            out += _leaves(sub[0], prefix + (name, MAP_KEY))
        elif sub:
            out += _leaves(sub[0], prefix + (name,))
        else:
            out.append((prefix + (name,), a))
    return out


LEAVES = _leaves(TrainingProfile)
NUMBERS = [(p, a) for p, a in LEAVES if _kinds(a) & {int, float} and typing.get_origin(a) is not tuple]
FLAGS = [(p, a) for p, a in LEAVES if bool in _kinds(a) and not _kinds(a) & {int, float}]
TEXTS = [(p, a) for p, a in LEAVES if str in _kinds(a)]


def _doc(path: tuple[str, ...], value: Any) -> dict:
    doc: dict = {**BASE, "model": dict(BASE["model"])}
    node = doc
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return doc


def _refused_at(doc: dict, path: tuple[str, ...]) -> list[str]:
    with pytest.raises(InputError) as info:
        parse_profile(doc)
    where = ".".join(path)
    hits = [p.message for p in info.value.problems
            if p.path == where or p.path.startswith(where + "[") or p.path.startswith(where + ".")]
    assert hits, (where, [(p.path, p.message) for p in info.value.problems])
    return hits


def _text_value(annotation: Any, text: str) -> Any:
    if typing.get_origin(annotation) is tuple:
        return [text]
    if typing.get_origin(annotation) is dict:
        return {"NAME": text}
    return text


def test_the_walk_finds_every_kind_of_field():
    names = {".".join(p) for p, _ in LEAVES}
    assert {"training.tensor_parallel", "training.attention", "training.fp8_recipe", "training.sharding",
            "resources.capacity", "dlc.workspace_id", "dlc.image_tag", "job.secrets.HF_TOKEN.kms_secret",
            "model.architecture.num_kv_heads", "tags", "job.env"} <= names
    assert len(NUMBERS) > 40 and len(FLAGS) > 10 and len(TEXTS) > 30


@pytest.mark.parametrize("path, annotation", NUMBERS, ids=[".".join(p) for p, _ in NUMBERS])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.booleans(), st.integers(1, 64).map(str), st.floats(1, 64).map(lambda f: f"{f:g}")))
def test_a_number_field_never_takes_true_or_a_quoted_number(path, annotation, value):
    _refused_at(_doc(path, value), path)


@pytest.mark.parametrize("path, annotation", FLAGS, ids=[".".join(p) for p, _ in FLAGS])
@settings(max_examples=4, deadline=None)
@given(value=st.sampled_from([0, 1, "true", "false", "yes"]))
def test_a_true_false_field_never_takes_a_number_or_a_word(path, annotation, value):
    _refused_at(_doc(path, value), path)


@pytest.mark.parametrize("path, annotation", TEXTS, ids=[".".join(p) for p, _ in TEXTS])
@settings(max_examples=8, deadline=None)
@given(control=st.sampled_from(CONTROLS), head=st.sampled_from(["", "flash", "ws-1", "a"]),
       tail=st.sampled_from(["", "x", "rm -rf /"]))
def test_no_text_field_holds_a_control_character(path, annotation, control, head, tail):
    _refused_at(_doc(path, _text_value(annotation, head + control + tail)), path)


def test_the_named_cases_of_the_issue():
    for path, value in ((("training", "tensor_parallel"), True), (("training", "tensor_parallel"), "2"),
                        (("dlc", "workspace_id"), "123; rm -rf /"), (("dlc", "workspace_id"), "ws1\nws2"),
                        (("dlc", "image_tag"), "24.07\x07")):
        _refused_at(_doc(path, value), path)
