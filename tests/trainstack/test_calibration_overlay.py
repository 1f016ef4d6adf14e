"""The calibration overlay: keyed by the workload (the architecture's fingerprint, so a preset and
the same shape given by hand match), validated, applied as labelled factors, memory never lowered."""

from __future__ import annotations

import json

import pytest
from plan_factory import profile_for

from trainstack import sizing
from trainstack.catalog import load_catalog
from trainstack.errors import InputError
from trainstack import calibration_overlay as cal


def entry(profile, gpu="A10", speed=1.2, memory=1.1) -> cal.OverlayEntry:
    return cal.OverlayEntry(
        key=cal.workload_key(profile.architecture, profile.training, gpu), model_name=profile.model.label,
        throughput_factor=speed, memory_factor=memory,
        measured=cal.Measured(tokens_per_second_per_gpu=1000.0),
        predicted=cal.Predicted(tokens_per_second_per_gpu=900.0, peak_allocated_gib=10, peak_reserved_gib=11,
                                required_gib=12),
        setup=cal.Setup(instance_type="ecs.gn7i-c8g1.2xlarge", nodes=1, gpus=1, micro_batch_size=4,
                        sequence_length=2048),
        source=cal.Source(stack="s", node="s-node-0", heartbeat_at="2025-06-15T15:06:40Z"),
        calibrated_at="2025-06-15T16:00:00Z")


def test_the_key_is_the_workload_not_the_way_the_model_was_named():
    preset = profile_for("llama3-8b-lora")
    by_hand = profile_for("llama3-8b-lora", {"model": {"preset": None, "architecture":
                                                        preset.architecture.model_dump(exclude_defaults=True)}})
    assert cal.workload_key(preset.architecture, preset.training, "A10") == \
        cal.workload_key(by_hand.architecture, by_hand.training, "A10")
    full = profile_for("llama3-8b-lora", {"training": {"method": "full", "lora": None}})
    assert cal.workload_key(full.architecture, full.training, "A10") != \
        cal.workload_key(preset.architecture, preset.training, "A10")


def test_factors_scale_speed_and_raise_memory_with_a_label():
    profile = profile_for("llama3-8b-lora")
    gpu = load_catalog().gpu("A10")
    mem = sizing.memory_estimate(profile.architecture, profile.training, 1)
    thr = sizing.throughput_estimate(profile.architecture, profile.training, gpu)
    overlay = cal.CalibrationOverlay(entries=(entry(profile),))
    mem2, thr2, labels = cal.adjust(profile.architecture, profile.training, "A10", mem, thr, overlay)
    assert thr2.tokens_per_second_per_gpu == pytest.approx(thr.tokens_per_second_per_gpu * 1.2)
    assert thr2.step_seconds == pytest.approx(thr.step_seconds / 1.2)
    assert mem2.reserved_gib_per_gpu == pytest.approx(mem.reserved_gib_per_gpu * 1.1, abs=1e-3)
    assert mem2.required_gib_per_gpu - mem.required_gib_per_gpu == pytest.approx(
        mem2.reserved_gib_per_gpu - mem.reserved_gib_per_gpu, abs=1e-3), "the CUDA context does not scale"
    assert sum(mem2.breakdown_gib.values()) == pytest.approx(mem2.peak_gib_per_gpu, abs=0.01)
    assert labels[0].startswith("calibration overlay: A10 speed x1.200, memory x1.100 for llama-3-8b")
    # on another GPU the same workload is uncalibrated: nothing changes, no label
    assert cal.adjust(profile.architecture, profile.training, "A100-80G", mem, thr, overlay) == (mem, thr, ())
    # a run that needed less keeps the shipped memory prediction
    lower = cal.CalibrationOverlay(entries=(entry(profile, memory=0.8),))
    assert cal.adjust(profile.architecture, profile.training, "A10", mem, thr, lower)[0] == mem


@pytest.mark.parametrize("field,value", [("throughput_factor", 9.0), ("throughput_factor", 0.1),
                                         ("memory_factor", 5.0)])
def test_factors_far_from_the_model_are_refused(field, value):
    profile = profile_for("llama3-8b-lora")
    doc = {"schema_version": 1, "entries": [json.loads(entry(profile).model_dump_json())]}
    doc["entries"][0][field] = value
    with pytest.raises(InputError) as err:
        cal.parse_overlay(json.dumps(doc).encode(), "calibration.json")
    assert any(p.path == f"entries.0.{field}" for p in err.value.problems)


def test_the_overlay_file_is_read_from_the_env_path_and_off_turns_it_off(tmp_path, monkeypatch):
    profile = profile_for("llama3-8b-lora")
    path = tmp_path / "cal.json"
    cal.write_overlay(cal.CalibrationOverlay().with_entry(entry(profile)).with_entry(entry(profile, speed=1.3)), path)
    monkeypatch.setenv(cal.ENV, str(path))
    (only,) = cal.load_overlay().entries
    assert only.throughput_factor == 1.3, "a newer calibration of the same workload replaces the older"
    monkeypatch.setenv(cal.ENV, "off")
    assert cal.overlay_path() is None and cal.load_overlay().entries == ()
    monkeypatch.delenv(cal.ENV)
    assert cal.overlay_path() == cal.DEFAULT_PATH and cal.DEFAULT_PATH.parent.name == "stacks"
