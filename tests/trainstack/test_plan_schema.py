"""One plan schema version, and the path a bump takes: older saved plans stay readable."""

from __future__ import annotations

import json

import pytest

from trainstack.errors import InputError
from trainstack.plan import PLAN_SCHEMA_VERSION, schema
from trainstack.preview.sources import load_saved_plan

import plan_factory as F


def _doc(version: int) -> dict:
    return {"schema_version": version, "kind": "trainstack-plan", "resources": [], "policy": []}


def test_the_plan_and_the_plan_document_carry_the_same_version():
    assert F.single_gpu_lora_plan().schema_version == PLAN_SCHEMA_VERSION
    from trainstack.preview import sources

    assert sources.PLAN_SCHEMA_VERSION is PLAN_SCHEMA_VERSION


def test_every_version_after_the_oldest_readable_records_what_it_added():
    for version in range(schema.OLDEST_READABLE_SCHEMA_VERSION + 1, PLAN_SCHEMA_VERSION + 1):
        assert schema.FIELDS_ADDED.get(version), f"schema version {version} must list the fields it added"


@pytest.mark.parametrize("version", schema.readable_versions())
def test_a_saved_plan_of_each_readable_version_lists_what_it_lacks(version, tmp_path):
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(_doc(version)))
    doc = load_saved_plan(saved)
    expected = [f for v in range(version + 1, PLAN_SCHEMA_VERSION + 1) for f in schema.FIELDS_ADDED[v]]
    assert doc["unknown_fields"] == expected and doc["schema_version"] == version


def test_a_bump_is_the_constant_and_its_fields(monkeypatch, tmp_path):
    """What the next bump (e.g. the cost breakdown) does: the current version's plans stay readable and
    report the new fields as unknown; a structural step runs its migration."""
    nxt = PLAN_SCHEMA_VERSION + 1
    monkeypatch.setattr(schema, "PLAN_SCHEMA_VERSION", nxt)
    monkeypatch.setitem(schema.FIELDS_ADDED, nxt, ("cost.breakdown",))
    monkeypatch.setitem(schema.MIGRATIONS, nxt, lambda d: dict(d, cost=dict(d.get("cost") or {}, breakdown=None)))
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(_doc(PLAN_SCHEMA_VERSION)))
    doc = load_saved_plan(saved)
    assert doc["unknown_fields"] == ["cost.breakdown"] and doc["cost"] == {"breakdown": None}
    oldest = schema.OLDEST_READABLE_SCHEMA_VERSION
    saved.write_text(json.dumps(_doc(oldest)))
    assert load_saved_plan(saved)["unknown_fields"][-1] == "cost.breakdown"
    monkeypatch.delitem(schema.FIELDS_ADDED, nxt)
    with pytest.raises(KeyError):
        schema.migrated(_doc(PLAN_SCHEMA_VERSION))  # a bump that does not say what it added cannot read old plans


@pytest.mark.parametrize("version", [0, PLAN_SCHEMA_VERSION + 1, 1.5, True, "2"])
def test_versions_it_cannot_read_are_exit_2(version, tmp_path):
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(_doc(1) | {"schema_version": version}))
    with pytest.raises(InputError, match="schema_version") as info:
        load_saved_plan(saved)
    assert info.value.exit_code == 2
