"""Generated inputs for issue 34's new edges: Hugging Face configs, heartbeats and saved plans.

* **HF configs**: real config.json files (tests/data/hf_configs) with a shape key of the wrong JSON
  type, a key given twice, deep nesting, huge numbers or unknown keys. A config is either read into
  a shape with exactly the values it gives, or refused naming the key; never coerced.
* **Heartbeats**: a real one with its times (future, past), numbers (negative, huge, of the wrong
  type), nesting and size changed. ``calibrate`` either records a factor a GPU can physically reach
  or refuses (exit 2) leaving the overlay untouched; a record from the future is never accepted.
* **Saved plans**: hand-made documents of any shape, older schema versions, and credentials planted
  in any key, value, user data (plain, base64, gzip+base64) or profile field. ``diff`` ends with a
  documented exit code and prints none of them.

Every run: no traceback, within the time limit. ``TRAINSTACK_FUZZ_EXAMPLES`` scales each family.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import gzip
import json
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from test_fuzz_inputs import EXAMPLES, SETTINGS, run
from trainstack import calibration_overlay as cal
from trainstack.models import Architecture, HfConfigError, architecture_from_hf
from trainstack.models.hf_types import KEY_TYPES, type_problem
from trainstack.status import HeartbeatError, parse_heartbeat
from trainstack.status.record import CLOCK_SKEW_SECONDS

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {p.name: json.loads(p.read_text()) for p in sorted((ROOT / "tests" / "data" / "hf_configs").glob("*.json"))}
BEAT = json.loads((ROOT / "tests" / "data" / "heartbeats" / "llama3-8b-lora-node-0.json").read_text())
WRONG = st.one_of(st.booleans(), st.integers(-10, 10).map(str), st.floats(1, 1e4), st.none(), st.just([]),
                  st.just({}), st.text(max_size=8), st.integers(1 << 40, 1 << 70))


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# ---- Hugging Face configs ----------------------------------------------------------------------------
@settings(max_examples=max(30, EXAMPLES // 2), **SETTINGS)
@given(name=st.sampled_from(sorted(CONFIGS)), data=st.data())
def test_a_config_is_read_exactly_or_refused_never_coerced(name, data):
    doc = copy.deepcopy(CONFIGS[name])
    target = doc.get("text_config") if isinstance(doc.get("text_config"), dict) and data.draw(st.booleans()) else doc
    typed = sorted(k for k in target if k in KEY_TYPES and k not in ("text_config", "vision_config"))
    key = data.draw(st.sampled_from(typed)) if typed else None
    value = data.draw(WRONG)
    if key is not None:
        target[key] = value
    wrong_type = key is not None and type_problem(key, value) is not None
    try:
        arch = architecture_from_hf(doc)
    except HfConfigError as exc:
        assert exc.key, "a refusal names the key"
        return
    assert not wrong_type, f"{name}: {key}={value!r} was coerced into a shape"
    assert isinstance(arch, Architecture)
    for field, v in arch.model_dump().items():
        assert not isinstance(v, bool) or isinstance(Architecture.model_fields[field].default, bool), field


@settings(max_examples=max(20, EXAMPLES // 5), **SETTINGS)
@given(name=st.sampled_from(sorted(CONFIGS)), how=st.sampled_from(["duplicate", "deep", "huge", "unknown", "bom"]),
       depth=st.integers(65, 5000), data=st.data())
def test_config_files_through_the_cli(tmp_path_factory, name, how, depth, data):
    d = tmp_path_factory.mktemp("hf")
    doc = copy.deepcopy(CONFIGS[name])
    text = json.dumps(doc, indent=1)
    if how == "duplicate":
        key = data.draw(st.sampled_from(sorted(doc)))
        text = text.replace(f'"{key}":', f'"{key}": {json.dumps(doc[key])},\n "{key}":', 1)
    elif how == "deep":
        text = text[:-1] + f', "rope_scaling": {nested(depth)}}}'
    elif how == "huge":
        text = text.replace('"hidden_size":', '"hidden_size": 1' + "0" * 400 + ', "x_":', 1)
    elif how == "unknown":
        text = text[:-1] + ', "num_hidden_layers_extra": 3}'
    else:
        text = "\ufeff" + text
    (d / "config.json").write_text(text)
    (d / "p.yaml").write_text("name: fz\nmodel: {hf_config: config.json}\n")
    code, out, err = run(["estimate", "--json", "--gpu", "H200", str(d / "p.yaml")])  # the reading, not a placement
    assert code in {0, 2, 3}
    if how in ("duplicate", "deep", "huge"):
        assert code == 2, (how, out[-500:])


# ---- heartbeats ----------------------------------------------------------------------------------------
TIMES = ("written_at", "started_at", "progress.updated_at", "checkpoint.last_at")


def _set(doc: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    for p in parents:
        doc = doc[p]
    doc[last] = value


@settings(max_examples=max(30, EXAMPLES // 2), **SETTINGS)
@given(field=st.sampled_from(TIMES), offset=st.floats(-1e9, 4e9), now=st.floats(1.7e9, 2.5e9))
def test_a_heartbeat_from_the_future_is_never_accepted(field, offset, now):
    doc = copy.deepcopy(BEAT)
    for f in TIMES:
        _set(doc, f, now - 3600.0)
    _set(doc, field, max(0.0, now + offset))
    try:
        beat = parse_heartbeat(json.dumps(doc), "hb.json", now=now)
    except HeartbeatError as exc:
        assert exc.problems
        return
    assert beat.written_at <= now + CLOCK_SKEW_SECONDS
    for f in TIMES[1:]:
        value = beat
        for part in f.split("."):
            value = getattr(value, part)
        assert value is None or value <= beat.written_at + CLOCK_SKEW_SECONDS


NUMBERS = ("progress.tokens_per_second", "memory.peak_allocated_gib", "memory.peak_reserved_gib", "gpus", "nodes",
           "progress.window_seconds")


@st.composite
def heartbeat_texts(draw):
    doc = copy.deepcopy(BEAT)
    now = time.time() - 600
    for f in TIMES:
        _set(doc, f, now - 7200 if f == "started_at" else now)
    for _ in range(draw(st.integers(0, 3))):
        _set(doc, draw(st.sampled_from(NUMBERS + TIMES)), draw(st.one_of(
            st.floats(-1e6, 1e7), st.integers(-5, 100000), st.booleans(), st.none(), st.just("12"),
            st.sampled_from([now + 1e6, 4102444800.0, 0.0]))))
    text = json.dumps(doc, allow_nan=True)
    how = draw(st.sampled_from(["as is", "as is", "deep", "padded", "duplicate", "nan"]))
    if how == "deep":
        text = text[:-1] + ', "x": ' + nested(draw(st.integers(17, 20_000))) + "}"
    elif how == "padded":
        text = text[:-1] + ', "pad": "' + "x" * draw(st.sampled_from([10, 1 << 20])) + '"}'
    elif how == "duplicate":
        text = text.replace('"gpus":', '"gpus": 8, "gpus":', 1)
    elif how == "nan":
        text = text.replace('"tokens_per_second": ', '"tokens_per_second": NaN, "t_": ', 1)
    return text


@settings(max_examples=max(20, EXAMPLES // 4), database=None, **SETTINGS)
@given(text=heartbeat_texts())
def test_calibrate_records_only_what_a_gpu_can_do(tmp_path_factory, text):
    from trainstack import calibration_checks as phys
    from trainstack.catalog import load_catalog
    from trainstack.profile import load_profile

    d = tmp_path_factory.mktemp("hb")
    (d / "heartbeat.json").write_text(text)
    overlay = d / "calibration.json"
    with contextlib.chdir(ROOT), _overlay_at(overlay):
        code, out, err = run(["calibrate", "--stack", "llama3-8b-lora", "--heartbeat", str(d / "heartbeat.json"),
                              "--json"])
    assert code in {0, 2}, err[-800:]
    if code == 2:
        assert not overlay.exists(), "a refused heartbeat writes nothing"
        return
    entry = json.loads(out)["entry"]
    profile = load_profile(ROOT / "stacks" / "profiles" / "llama3-8b-lora.yaml")
    bound = phys.speed_bound(profile.architecture, profile.training, load_catalog().gpu(entry["key"]["gpu"]))
    assert entry["measured"]["tokens_per_second_per_gpu"] <= bound.tokens_per_second_per_gpu
    low, high = cal.FACTOR_RANGE
    assert low <= entry["throughput_factor"] <= high


@contextlib.contextmanager
def _overlay_at(path: Path):
    import os

    old = os.environ.get(cal.ENV)
    os.environ[cal.ENV] = str(path)
    try:
        yield
    finally:
        os.environ[cal.ENV] = old if old is not None else "off"


# ---- saved plans given to diff --------------------------------------------------------------------------
#: credentials by their shape (detectable anywhere) and plain ones (a secret only by the name they sit under)
SHAPED = ["hf_FuzzPlantedTokenAbCdEf0123456789", "sk-proj-FuzzPlantedKey0123456789ABCDEFxyz", "LTAI5tFuzzPlantedKey0001"]
PLAIN = ["Fuzz-Passw0rd-Value-9", "0123456789abcdef0123456789abcdef0fuzz123"]
SECRETS = SHAPED + PLAIN
SECRET_KEYS = ["password", "HF_TOKEN", "wandb_key", "apiKey", "db-secret", "OSS_ACCESS_KEY_SECRET"]


@st.composite
def planted_strings(draw, secret):
    how = draw(st.sampled_from(["bare", "assign", "flag", "b64", "gzip"] if secret in SHAPED else
                               ["assign", "flag", "b64", "gzip"]))
    if how == "bare":
        return secret
    if how == "assign":
        return f"#!/bin/bash\nexport {draw(st.sampled_from(SECRET_KEYS))}={secret}\n"
    if how == "flag":
        return f"python train.py --{draw(st.sampled_from(SECRET_KEYS))} {secret}"
    raw = f"#cloud-config\nruncmd:\n - HF_TOKEN={secret} python train.py\n".encode()
    return base64.b64encode(gzip.compress(raw) if how == "gzip" else raw).decode()


def _leaves(doc, path=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _leaves(v, path + (i,))
    yield path


@st.composite
def handmade_plans(draw):
    version = draw(st.sampled_from([1, 2]))
    inputs = draw(st.dictionaries(st.sampled_from(["instanceType", "userData", "tags", "imageId", "x"]),
                                  st.one_of(st.text(max_size=20), st.integers(), st.none()), max_size=4))
    doc = {"schema_version": version, "kind": "trainstack-plan", "stack": draw(st.one_of(st.none(), st.text(max_size=8))),
           "profile": draw(st.one_of(st.none(), st.just({"name": "x", "job": {"env": {}}}))),
           "resources": [{"type": draw(st.sampled_from(["alicloud:ecs/instance:Instance", "alicloud:oss/bucket:Bucket",
                                                        "custom:x"])), "name": f"r{i}", "inputs": dict(inputs)}
                         for i in range(draw(st.integers(0, 3)))],
           "policy": [], "cost": {"hourly_cny": draw(st.one_of(st.none(), st.floats(0, 100)))}}
    secrets = []
    for _ in range(draw(st.integers(1, 3))):
        secret = draw(st.sampled_from(SECRETS))
        secrets.append(secret)
        where = draw(st.sampled_from(["input", "key", "profile-env", "tag", "stack"]))
        if where == "input" and doc["resources"]:
            doc["resources"][0]["inputs"][draw(st.sampled_from(["userData", "note"]))] = draw(planted_strings(secret))
        elif where == "key" and doc["resources"]:
            doc["resources"][-1]["inputs"][draw(st.sampled_from(SECRET_KEYS))] = secret
        elif where == "profile-env" and doc["profile"]:
            doc["profile"]["job"]["env"][draw(st.sampled_from(SECRET_KEYS))] = secret
        elif where == "tag" and doc["resources"]:
            doc["resources"][0]["inputs"]["tags"] = {draw(st.sampled_from(SECRET_KEYS)): secret}
        else:
            doc["stack"] = draw(planted_strings(secret))
    return doc, secrets


@settings(max_examples=max(20, EXAMPLES // 3), database=None, **SETTINGS)
@given(base=handmade_plans(), head=handmade_plans(), fmt=st.sampled_from(["markdown", "json"]))
def test_diff_of_hand_made_and_older_plans_never_prints_what_they_hold(tmp_path_factory, base, head, fmt):
    d = tmp_path_factory.mktemp("saved")
    (d / "base.json").write_text(json.dumps(base[0]))
    (d / "head.json").write_text(json.dumps(head[0]))
    with contextlib.chdir(ROOT):
        code, out, err = run(["diff", str(d / "base.json"), str(d / "head.json"), "--format", fmt],
                             planted=[s for s in base[1] + head[1]])
    assert code in {0, 2, 4}
