"""`trainstack calibrate`: a run's heartbeat becomes a calibration overlay entry that changes the
next estimate and plan of the same workload (and says so); malformed or mismatched heartbeats are
refused and leave the overlay as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trainstack import cli
from trainstack import calibration_overlay as cal

ROOT = Path(__file__).resolve().parents[2]
HEARTBEATS = ROOT / "tests" / "data" / "heartbeats"
LORA = str(ROOT / "stacks" / "profiles" / "llama3-8b-lora.yaml")
LORA_BEAT = str(HEARTBEATS / "llama3-8b-lora-node-0.json")


@pytest.fixture
def overlay(tmp_path, monkeypatch):
    path = tmp_path / "calibration.json"
    monkeypatch.setenv(cal.ENV, str(path))
    return path


def run(capsys, *args):
    rc = cli.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def estimate(capsys, *extra) -> dict:
    rc, out, _ = run(capsys, "estimate", LORA, "--gpu", "A10", "--json", *extra)
    assert rc == 0
    return json.loads(out)


def test_calibrate_changes_the_next_estimate_and_the_estimate_says_so(overlay, capsys):
    before = estimate(capsys)
    plan_before = json.loads(run(capsys, "resolve", LORA, "--json")[1])
    assert before["calibration"] == [] and not any("calibration overlay" in a for a in before["assumptions"])
    rc, out, err = run(capsys, "calibrate", "--stack", "llama3-8b-lora", "--heartbeat", LORA_BEAT)
    assert rc == 0, err
    assert "ESTIMATE" in out and "MEASURED" in out and f"wrote {overlay}" in out
    beat = json.loads(Path(LORA_BEAT).read_text())
    measured = beat["progress"]["tokens_per_second"] / beat["gpus"]
    (entry,) = json.loads(overlay.read_text())["entries"]
    factor = entry["throughput_factor"]
    assert factor == pytest.approx(measured / before["throughput"]["tokens_per_second_per_gpu"], rel=1e-3)
    assert entry["memory_factor"] == pytest.approx(18.9 / before["memory"]["reserved_gib_per_gpu"], rel=1e-3)

    after = estimate(capsys)
    assert after["throughput"]["tokens_per_second_per_gpu"] == pytest.approx(measured, rel=1e-3)
    assert after["hours"] == pytest.approx(before["hours"] / factor, rel=1e-3)
    assert after["memory"]["reserved_gib_per_gpu"] == pytest.approx(18.9, rel=1e-3)  # the run needed more
    (used,) = after["calibration"]
    assert used["gpu"] == "A10" and used["measured_by"] == "llama3-8b-lora llama3-8b-lora-node-0"
    assert any(a.startswith("calibration overlay: A10 speed x") for a in after["assumptions"])
    # the resolver uses it too: the plan of the same workload rests on the measurement, labelled
    rc, out, _ = run(capsys, "resolve", LORA, "--json")
    plan = json.loads(out)
    assert rc == 0 and any(label.startswith("calibration overlay: A10") for label in plan["labels"])
    assert plan["instance_type"] == plan_before["instance_type"]
    assert plan["estimated_hours"] == pytest.approx(plan_before["estimated_hours"] / factor, rel=1e-2)
    # another GPU is not this workload: no overlay
    rc, out, _ = run(capsys, "estimate", LORA, "--gpu", "A100-80G", "--json")
    assert json.loads(out)["calibration"] == []


def test_a_run_that_needed_less_memory_never_shrinks_the_prediction(overlay, capsys, tmp_path):
    beat = json.loads(Path(LORA_BEAT).read_text())
    beat["memory"].update(peak_allocated_gib=15.4, peak_reserved_gib=16.1)  # above the 14.96 GiB of weights
    saved = tmp_path / "less.json"
    saved.write_text(json.dumps(beat))
    before = estimate(capsys)
    rc, out, _ = run(capsys, "calibrate", LORA, "--heartbeat", str(saved))
    assert rc == 0 and "the run needed no more than predicted" in out
    after = estimate(capsys)
    assert after["memory"]["required_gib_per_gpu"] == before["memory"]["required_gib_per_gpu"]
    assert json.loads(overlay.read_text())["entries"][0]["memory_factor"] < 1


def test_a_second_calibration_replaces_the_first_and_dry_run_writes_nothing(overlay, capsys):
    rc, out, _ = run(capsys, "calibrate", LORA, "--heartbeat", LORA_BEAT, "--dry-run")
    assert rc == 0 and "would write (dry run)" in out and not overlay.exists()
    assert run(capsys, "calibrate", LORA, "--heartbeat", LORA_BEAT)[0] == 0
    rc, out, _ = run(capsys, "calibrate", LORA, "--heartbeat", LORA_BEAT, "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["replaced"] is not None and doc["written"] is True
    assert len(json.loads(overlay.read_text())["entries"]) == 1


@pytest.mark.parametrize("edit,why", [
    (lambda b: b.update(schema="trainstack.heartbeat/9"), "schema is 'trainstack.heartbeat/9'"),
    (lambda b: b["progress"].update(tokens_per_second=-3.0), "progress.tokens_per_second"),
    (lambda b: b.pop("billing"), "billing"),
    (lambda b: b["progress"].update(tokens_per_second=None), "has no measured speed yet"),
    (lambda b: b["progress"].update(window_seconds=20.0), "has no measured speed yet"),
    (lambda b: b.update(stack="someone-else"), "is a heartbeat of stack 'someone-else'"),
    (lambda b: b["progress"].update(tokens_per_second=b["progress"]["tokens_per_second"] / 8),
     "outside 0.25..4: not the same workload"),
    # physics: the issue-34 poisoning (5,340 tok/s for an 8B LoRA on one A10 wrote a 3.95x factor)
    (lambda b: b["progress"].update(tokens_per_second=5340.0), "above 80% of its 125 TFLOPS dense peak"),
    (lambda b: b["memory"].update(peak_allocated_gib=9.0), "below the 14.96 GiB of weights"),
    (lambda b: b.update(written_at=4102444800.0), "written_at: 2100-01-01T00:00:00Z is in the future"),
    (lambda b: b.update(gpus=8), "reports 8 GPUs, but 1 x ecs.gn7i-c8g1.2xlarge have 1"),
])
def test_a_malformed_or_mismatched_heartbeat_is_refused_and_the_overlay_untouched(overlay, capsys, tmp_path,
                                                                                  edit, why):
    overlay.write_text(json.dumps({"schema_version": 1, "entries": []}))
    beat = json.loads(Path(LORA_BEAT).read_text())
    edit(beat)
    bad = tmp_path / "heartbeat.json"
    bad.write_text(json.dumps(beat))
    rc, _, err = run(capsys, "calibrate", LORA, "--heartbeat", str(bad))
    assert rc == 2 and why in err and "Traceback" not in err
    assert json.loads(overlay.read_text()) == {"schema_version": 1, "entries": []}


def test_not_json_and_missing_files_are_refused(overlay, capsys, tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_text("not a heartbeat")
    rc, _, err = run(capsys, "calibrate", LORA, "--heartbeat", str(junk))
    assert rc == 2 and "not JSON" in err
    rc, _, err = run(capsys, "calibrate", LORA, "--heartbeat", str(tmp_path / "missing.json"))
    assert rc == 2 and "heartbeat file not found" in err
    assert not overlay.exists()


def test_a_broken_overlay_file_is_an_error_naming_it_never_ignored(overlay, capsys):
    overlay.write_text(json.dumps({"schema_version": 1, "entries": [{"throughput_factor": "fast"}]}))
    rc, _, err = run(capsys, "estimate", LORA, "--gpu", "A10")
    assert rc == 2 and str(overlay) in err and "calibration overlay is invalid" in err
    overlay.write_text('{"schema_version": 1, "entries": [], "x": NaN}')
    rc, _, err = run(capsys, "resolve", LORA)
    assert rc == 2 and "NaN is not a number" in err
    overlay.write_text('{"schema_version": 1, "entries": [], "entries": []}')
    rc, _, err = run(capsys, "resolve", LORA)
    assert rc == 2 and "duplicate key 'entries'" in err


@pytest.mark.parametrize("kind", ["fifo", "devzero", "directory", "dangling", "deep"])
def test_an_overlay_that_is_not_a_regular_json_file_is_an_error_never_ignored(overlay, capsys, kind):
    """Issue 34: a symlink to /dev/zero or a FIFO was silently ignored (no calibration, no word)."""
    import os

    if kind == "fifo":
        os.mkfifo(overlay)
    elif kind == "devzero":
        overlay.symlink_to("/dev/zero")
    elif kind == "directory":
        overlay.mkdir()
    elif kind == "dangling":
        overlay.symlink_to(overlay.parent / "nowhere.json")
    else:
        overlay.write_text('{"schema_version": 1, "entries": [], "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    for cmd in (["estimate", LORA, "--gpu", "A10"], ["resolve", LORA], ["calibrate", LORA, "--heartbeat", LORA_BEAT]):
        rc, _, err = run(capsys, *cmd)
        assert rc == 2 and str(overlay) in err and "Traceback" not in err, (cmd, err)


def test_the_overlay_lives_in_the_checkouts_stacks_and_the_old_place_is_named(monkeypatch, capsys, tmp_path):
    from trainstack.stack_config import PROJECT_ROOT

    assert cal.DEFAULT_PATH == PROJECT_ROOT / "stacks" / "calibration.json"
    assert cal.OLD_PATH == PROJECT_ROOT.parent / "stacks" / "calibration.json"
    monkeypatch.delenv(cal.ENV, raising=False)
    monkeypatch.setattr(cal, "DEFAULT_PATH", tmp_path / "checkout" / "stacks" / "calibration.json")
    monkeypatch.setattr(cal, "OLD_PATH", tmp_path / "stacks" / "calibration.json")
    monkeypatch.setattr(cal, "_warned", set())
    cal.OLD_PATH.parent.mkdir()
    cal.OLD_PATH.write_text(json.dumps({"schema_version": 1, "entries": []}))
    assert cal.overlay_path() == cal.DEFAULT_PATH and cal.load_overlay().entries == ()
    err = capsys.readouterr().err
    assert f"{cal.OLD_PATH} is a calibration overlay where older trainstack wrote it" in err
    assert f"move it to {cal.DEFAULT_PATH}" in err
    cal.load_overlay()
    assert "older trainstack" not in capsys.readouterr().err, "said once per process"
