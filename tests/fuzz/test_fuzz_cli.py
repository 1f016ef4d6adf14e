"""Fuzzing the commands a user runs: every input ends in a result or a clean error.

Hypothesis generates valid profiles, near-valid ones (one field broken), extreme numbers and
random YAML/bytes, and drives `validate`, `estimate`, `resolve` and (fewer) `plan`
in-process. Allowed outcomes are the documented exit codes; any other exception is a bug.
`make fuzz` runs many more examples (TRAINSTACK_FUZZ_EXAMPLES).
"""

from __future__ import annotations

import io
import os
import contextlib

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainstack.cli import main

EXAMPLES = int(os.environ.get("TRAINSTACK_FUZZ_EXAMPLES", "250"))
PLAN_EXAMPLES = max(8, EXAMPLES // 12)
ALLOWED = {0, 2, 3}

PRESETS = ["llama-3.2-1b", "llama-3.2-3b", "llama-3-8b", "llama-3-70b", "qwen2.5-0.5b", "qwen2.5-7b",
           "qwen2.5-72b", "mistral-7b", "llama-3.1-405b"]
extreme_ints = st.one_of(st.integers(-10, 10), st.integers(0, 10**7), st.sampled_from([0, -1, 2**31, 2**63, 10**30]))
extreme_floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -1.0, 1e308, 1e-308]))
junk = st.one_of(st.none(), st.booleans(), extreme_ints, extreme_floats, st.text(max_size=20),
                 st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


def valid_profiles():
    training = st.fixed_dictionaries({
        "method": st.sampled_from(["full", "lora", "qlora", "pretrain"]),
        "precision": st.sampled_from(["bf16", "bf16-mixed", "fp16-mixed", "fp8-mixed"]),
        "optimizer": st.sampled_from(["adamw", "adamw-8bit", "sgd", "adafactor"]),
        "micro_batch_size": st.integers(1, 64),
        "sequence_length": st.sampled_from([128, 512, 2048, 8192, 32768]),
        "gradient_checkpointing": st.booleans(),
        "tokens": st.one_of(st.none(), st.floats(1e3, 1e13)),
    })
    resources = st.fixed_dictionaries({
        "target": st.sampled_from(["auto", "ecs", "dlc"]),
        "gpus": st.one_of(st.just("auto"), st.sampled_from([1, 2, 4, 8, 16, 64])),
        "max_nodes": st.integers(1, 16),
        "spot": st.sampled_from(["never", "allow", "require"]),
        "objective": st.sampled_from(["cost", "time"]),
        "deadline_hours": st.one_of(st.none(), st.floats(0.1, 1000)),
        "max_total_cost": st.one_of(st.none(), st.floats(1, 1e6)),
    })
    model = st.one_of(st.fixed_dictionaries({"preset": st.sampled_from(PRESETS)}),
                      st.fixed_dictionaries({"params_b": st.floats(0.1, 500)}))
    return st.fixed_dictionaries({
        "name": st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True),
        "region": st.sampled_from(["cn-shenzhen", "cn-beijing", "cn-hangzhou", "ap-southeast-1"]),
        "model": model, "training": training, "resources": resources,
        "storage": st.fixed_dictionaries({"dataset_gib": st.floats(0, 1e5),
                                          "checkpoint": st.sampled_from(["oss", "cpfs", "essd"])}),
    })


@st.composite
def broken_profiles(draw):
    doc = draw(valid_profiles())
    section = draw(st.sampled_from(list(doc)))
    if isinstance(doc[section], dict) and doc[section]:
        key = draw(st.sampled_from(list(doc[section])))
        if draw(st.booleans()):
            doc[section][key] = draw(junk)
        else:
            doc[section][draw(st.text(min_size=1, max_size=8))] = draw(junk)
    else:
        doc[section] = draw(junk)
    return doc


documents = st.one_of(valid_profiles(), broken_profiles(),
                      st.dictionaries(st.text(max_size=8), junk, max_size=4))
raw_texts = st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
                      st.sampled_from(["", "---", "- a\n- b", "a: [", "name: x\nname: y", "!!python/object:os.system x",
                                       "&a [*a]", "a: " + "[" * 200]))


def run_cli(args: list[str]) -> int:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as e:  # argparse usage errors
            code = e.code
    assert "Traceback" not in err.getvalue()
    return code


def _write(tmp_path_factory, doc) -> str:
    d = tmp_path_factory.mktemp("fz")
    f = d / "p.yaml"
    if isinstance(doc, str):
        f.write_bytes(doc.encode("utf-8", "replace"))
    else:
        f.write_text(yaml.safe_dump(doc, allow_unicode=True))
    return str(f)


FAST = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@FAST
@given(doc=st.one_of(documents, raw_texts))
def test_validate_estimate_resolve_never_crash(tmp_path_factory, doc):
    path = _write(tmp_path_factory, doc)
    for cmd in (["validate", path], ["estimate", path, "--json"], ["resolve", path, "--json"]):
        code = run_cli(cmd)
        assert code in ALLOWED, (cmd, code)


@settings(max_examples=PLAN_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(doc=st.one_of(valid_profiles(), broken_profiles()))
def test_plan_never_crashes(tmp_path_factory, doc):
    path = _write(tmp_path_factory, doc)
    code = run_cli(["plan", path, "--format", "json"])
    assert code in ALLOWED | {4}
