"""The heartbeat contract (trainstack.heartbeat/1): the recorded fixtures parse, malformed records
are refused with every reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainstack.status import HeartbeatError, parse_heartbeat

HEARTBEATS = Path(__file__).resolve().parents[1] / "data" / "heartbeats"
FIXTURES = sorted(HEARTBEATS.glob("*.json"))


def good() -> dict:
    return json.loads((HEARTBEATS / "llama3-8b-lora-node-0.json").read_text())


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_every_recorded_heartbeat_parses(path):
    beat = parse_heartbeat(path.read_bytes(), path.name)
    assert beat.stack and beat.node.startswith(beat.stack) and beat.billing.billed_seconds > 0


def test_a_replaced_spot_node_counts_its_instances_and_notices():
    beat = parse_heartbeat((HEARTBEATS / "qwen-7b-spot-node-0.json").read_bytes())
    assert beat.replacements == 1 and beat.interruptions == 1 and beat.memory.source == "nvidia-smi"


def _with(path: str, value) -> dict:
    doc = good()
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return doc


@pytest.mark.parametrize("path,value,why", [
    ("schema", "trainstack.heartbeat/2", "schema is 'trainstack.heartbeat/2'"),
    ("progress.tokens", -1, "progress.tokens"),
    ("progress.tokens_per_second", "fast", "progress.tokens_per_second"),
    ("billing.spent_cny", "12.5", "billing.spent_cny"),          # strict: a number, not a string
    ("memory.source", "guess", "memory.source"),
    ("state", "dancing", "state"),
    ("stop", {"reason": "bored", "message": "x"}, "stop.reason"),
    ("nodes", 0, "nodes"),
    ("billing", KeyError, "billing"),
    ("instances", "i-abc", "instances"),
])
def test_a_malformed_heartbeat_is_refused_naming_the_field(path, value, why):
    with pytest.raises(HeartbeatError) as err:
        parse_heartbeat(json.dumps(_with(path, value)), "hb.json")
    assert why in str(err.value) and str(err.value).startswith("hb.json: not a valid trainstack heartbeat")


@pytest.mark.parametrize("text,why", [
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"schema": "trainstack.heartbeat/1", "progress": {"tokens_per_second": NaN}}', "NaN is not a number"),
    (b" " * (1 << 20) + b"{}", "a heartbeat is at most"),
])
def test_what_is_not_a_heartbeat_at_all_is_refused(text, why):
    with pytest.raises(HeartbeatError, match=why):
        parse_heartbeat(text)


def test_infinite_numbers_are_refused_and_unknown_keys_ignored():
    doc = good()
    doc["a_field_a_newer_node_adds"] = {"anything": 1}
    assert parse_heartbeat(json.dumps(doc)).node == "llama3-8b-lora-node-0"
    doc["billing"]["spent_cny"] = 1e400  # json.dumps writes Infinity
    with pytest.raises(HeartbeatError, match="Infinity is not a number"):
        parse_heartbeat(json.dumps(doc))


# ---- issue 34: times, nesting, duplicates ----------------------------------------------------------------
NOW = 1_750_000_600.0  # ten minutes after the fixtures were written


@pytest.mark.parametrize("path, value, why", [
    ("written_at", 4102444800.0, "written_at: 2100-01-01T00:00:00Z is in the future"),
    ("written_at", NOW + 301, "is in the future (301 s after"),
    ("started_at", 1750000000.0 + 3600, "started_at: 2025-06-15T16:06:40Z is after the record was written"),
    ("progress.updated_at", 1750000000.0 + 86400, "progress.updated_at"),
    ("checkpoint.last_at", 4102444800.0, "checkpoint.last_at"),
])
def test_a_heartbeat_from_the_future_is_refused(path, value, why):
    with pytest.raises(HeartbeatError) as err:
        parse_heartbeat(json.dumps(_with(path, value)), "hb.json", now=NOW)
    assert why in str(err.value)


def test_clock_skew_within_five_minutes_is_accepted():
    assert parse_heartbeat(json.dumps(_with("written_at", NOW + 299)), now=NOW).written_at == NOW + 299
    doc = good()
    doc["progress"]["updated_at"] = doc["written_at"] + 250  # the trainer's clock a little ahead of the node's
    assert parse_heartbeat(json.dumps(doc), now=NOW)


@pytest.mark.parametrize("text, why", [
    (json.dumps(good())[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested more than 16 levels"),
    (json.dumps(good()).replace('"gpus": 1,', '"gpus": 1, "gpus": 8,'), "duplicate key 'gpus'"),
])
def test_a_deep_or_duplicated_heartbeat_is_refused_without_recursing(text, why):
    with pytest.raises(HeartbeatError, match=why):
        parse_heartbeat(text, now=NOW)
