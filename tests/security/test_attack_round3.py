"""Issue 34, hardening round 3: one reproducer of each failing class (tracebacks, false successes,
calibration poisoning, leaks, launch intent) replayed in-process through the CLI's ``main()``.

``tests/data/attack/round3.json`` lists them with their inputs in ``round3/``; the special inputs a
file cannot ship (a 100,000-deep heartbeat, a FIFO, an overlay that is a symlink to /dev/zero) are
built here from each case's ``setup``. Each case must end with its promised exit code, without a
traceback, within a time limit, naming the field paths the case lists under ``names``, with none of
its planted secrets on stdout or stderr, and with the calibration overlay unwritten.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from test_attack_failures import TIME_LIMIT_S, run_main  # noqa: F401 - the same in-process runner
from trainstack import calibration_overlay as cal
from trainstack.cli import main

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "attack"
CASES = json.loads((DATA / "round3.json").read_text())["cases"]
BEAT = ROOT / "tests" / "data" / "heartbeats" / "llama3-8b-lora-node-0.json"


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    overlay = tmp_path / "calibration.json"
    monkeypatch.setenv(cal.ENV, str(overlay))
    return tmp_path, overlay


def _setup(case: dict, tmp: Path, overlay: Path) -> dict[str, str]:
    """The special inputs of ``case``: '<name>' arguments -> the path built for them."""
    made: dict[str, str] = {}
    kind = case.get("setup")
    if kind == "deep-heartbeat":
        beat = json.loads(BEAT.read_text())
        text = json.dumps(beat)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
        (tmp / "deep.json").write_text(text)
        made["<deep-heartbeat>"] = str(tmp / "deep.json")
    elif kind == "fifo":
        os.mkfifo(tmp / "beat.fifo")
        made["<fifo>"] = str(tmp / "beat.fifo")
    elif kind == "overlay-devzero":
        overlay.symlink_to("/dev/zero")
    elif kind == "overlay-fifo":
        os.mkfifo(overlay)
    elif kind == "overlay-empty":
        overlay.write_text(json.dumps({"schema_version": 1, "entries": []}))
    return made


def _argv(case: dict, made: dict[str, str]) -> list[str]:
    out = []
    for a in case["args"]:
        if a in made:
            out.append(made[a])
        elif a.startswith("round3/"):
            out.append(str(DATA / a))
        else:
            out.append(a)
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["label"][:90])
def test_round3_case_fails_cleanly_or_passes_as_promised(world, case):
    tmp, overlay = world
    argv = _argv(case, _setup(case, tmp, overlay))
    before = overlay.read_bytes() if overlay.is_file() and not overlay.is_symlink() else None
    code, out, err = run_main(main, argv)
    assert code == case["expected"], (case["label"], code, err[-1500:])
    assert "Traceback" not in out + err
    for name in case.get("names", ()):  # the field path the refusal must name
        assert name in err, (case["label"], err[-1500:])
    for secret in case["planted"]:
        assert secret not in out and secret not in err, f"{case['label']}: leaked {secret!r}"
    if overlay.is_file() and not overlay.is_symlink():
        assert overlay.read_bytes() == before, "a refused calibration leaves the overlay as it was"


def test_every_class_of_the_issue_has_a_reproducer():
    assert {c["class"] for c in CASES} == {"tracebacks", "false successes", "calibration poisoning", "leaks",
                                          "launch intent"}


# ---- re-tested here, fixed by the sizing issue (stated degrees with gpus: auto were a ZeroDivisionError) --------------------------------------------------------------------
DEGREES = [(fw, cmd, pp, cp) for fw, cmd in (("megatron", "torchrun pretrain_gpt.py"),
                                             ("torchtitan", "torchrun -m torchtitan.train --job.config_file c.toml"))
           for pp, cp in ((2, None), (None, 2), (4, 2))]


@pytest.mark.parametrize("framework, command, pp, cp", DEGREES, ids=[f"{d[0]}-pp{d[2]}-cp{d[3]}" for d in DEGREES])
def test_stated_pipeline_and_context_degrees_end_cleanly(world, tmp_path, framework, command, pp, cp):
    import yaml

    training = {"framework": framework, "method": "pretrain", "sequence_length": 8192}
    training.update({k: v for k, v in (("pipeline_parallel", pp), ("context_parallel", cp)) if v})
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({"name": "degrees", "model": {"preset": "llama-3-8b"}, "training": training,
                                 "job": {"command": command}, "resources": {"gpus": "auto"}}))
    for cmd in ("validate", "resolve"):
        code, out, err = run_main(main, [cmd, str(f)])
        assert code in {0, 2, 3} and "Traceback" not in out + err, (cmd, code, err[-800:])


# ---- found by make fuzz at 3,000 (tests/fuzz/test_fuzz_round3.py): diff --format json stays standard JSON ------------
@pytest.mark.parametrize("before, after", [(2.2250738585072014e-308, 1.0), (-1.7e308, 1.7e308), (5e-324, 3.0)])
def test_diff_of_costs_near_the_float_limits_prints_standard_json(world, tmp_path, before, after):
    def plan(hourly):
        return {"schema_version": 1, "kind": "trainstack-plan", "stack": "s", "profile": None, "resources": [],
                "policy": [], "cost": {"hourly_cny": hourly, "total_cny": hourly}}

    (tmp_path / "b.json").write_text(json.dumps(plan(before)))
    (tmp_path / "h.json").write_text(json.dumps(plan(after)))
    code, out, err = run_main(main, ["diff", str(tmp_path / "b.json"), str(tmp_path / "h.json"), "--format", "json"])
    assert code == 0 and "Traceback" not in err, err[-800:]
    json.loads(out, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
