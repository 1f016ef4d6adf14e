"""A plan the calibration overlay changed says so first, with the plan without it beside (issue 34:
after a calibration, resolve moved from an A10 to an A100-40G type not seen offered in the region
without naming the calibration as the cause)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from plan_factory import profile_for

from trainstack import calibration_overlay as cal
from trainstack.calibration_effect import effect
from trainstack.cli import main
from trainstack.placement import resolve

ROOT = Path(__file__).resolve().parents[2]
LORA = str(ROOT / "stacks" / "profiles" / "llama3-8b-lora.yaml")


def entry(profile, gpu: str, speed: float) -> cal.OverlayEntry:
    return cal.OverlayEntry(
        key=cal.workload_key(profile.architecture, profile.training, gpu), model_name=profile.model.label,
        throughput_factor=speed, memory_factor=None,
        measured=cal.Measured(tokens_per_second_per_gpu=1000.0),
        predicted=cal.Predicted(tokens_per_second_per_gpu=900.0, peak_allocated_gib=16, peak_reserved_gib=17,
                                required_gib=18),
        setup=cal.Setup(instance_type="ecs.gn7i-c8g1.2xlarge", nodes=1, gpus=1, micro_batch_size=1,
                        sequence_length=1024),
        source=cal.Source(stack="llama3-8b-lora", node="llama3-8b-lora-node-0", heartbeat_at="2025-06-15T15:06:40Z"),
        calibrated_at="2025-06-15T16:00:00Z")


@pytest.fixture
def overlay(tmp_path, monkeypatch):
    path = tmp_path / "calibration.json"
    monkeypatch.setenv(cal.ENV, str(path))

    def write(*entries):
        cal.write_overlay(cal.CalibrationOverlay(entries=entries), path)
        return path
    return write


def run(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_calibration_that_moves_the_plan_is_named_first_with_before_and_after(overlay, capsys):
    profile = profile_for("llama3-8b-lora")
    uncalibrated = resolve(profile)
    path = overlay(entry(profile, "A10", 0.25))
    rc, out, _ = run(capsys, "resolve", LORA)
    assert rc == 0
    first = out.splitlines()[:4]
    assert first[0].startswith("calibration changes this plan (instance_type, gpu_model") and str(path) in first[0]
    assert "A10 speed x0.250, measured by llama3-8b-lora llama3-8b-lora-node-0" in first[1]
    assert first[2].startswith(f"  without it: 1 x {uncalibrated.instance_type} (1 x A10")
    after = json.loads(run(capsys, "resolve", LORA, "--json")[1])
    assert after["gpu_model"] != "A10" and first[3].startswith(f"  with it:    1 x {after['instance_type']}")
    if after["prices"]["type_seen_in_region"] is False:  # the case: named, not buried in the labels
        assert f"{after['instance_type']} not seen offered in cn-shenzhen" in first[3]
    cal_doc = after["calibration"]
    assert cal_doc["before"]["instance_type"] == uncalibrated.instance_type
    assert cal_doc["after"]["instance_type"] == after["instance_type"] and "instance_type" in cal_doc["changed"]


def test_the_plan_command_says_it_first_in_every_format(overlay, capsys):
    overlay(entry(profile_for("llama3-8b-lora"), "A10", 2.0))
    rc, text, _ = run(capsys, "plan", "--stack", "llama3-8b-lora")
    assert rc == 0 and text.splitlines()[1].startswith("calibration changes this plan (tokens_per_second")
    rc, md, _ = run(capsys, "plan", "--stack", "llama3-8b-lora", "--format", "markdown")
    assert "> [!WARNING]\n> calibration changes this plan" in md
    assert md.index("calibration changes") < md.index("| target |")
    rc, js, _ = run(capsys, "plan", "--stack", "llama3-8b-lora", "--format", "json")
    doc = json.loads(js)
    assert list(doc).index("calibration") == list(doc).index("prices") + 1
    before, after = doc["calibration"]["before"], doc["calibration"]["after"]
    assert after["estimated_hours"] == pytest.approx(before["estimated_hours"] / 2, rel=0.01)


def test_no_calibration_or_one_of_another_workload_changes_nothing_and_adds_nothing(overlay, capsys):
    rc, plain, _ = run(capsys, "plan", "--stack", "llama3-8b-lora", "--format", "json")
    other = profile_for("llama3-8b-lora", {"training": {"method": "full", "lora": None}})
    overlay(entry(other, "A10", 0.5))
    assert effect(profile_for("llama3-8b-lora"), resolve(profile_for("llama3-8b-lora"))) is None
    rc2, same, _ = run(capsys, "plan", "--stack", "llama3-8b-lora", "--format", "json")
    assert rc == rc2 == 0 and "calibration" not in json.loads(plain) and same == plain
