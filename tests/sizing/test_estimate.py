"""The wrapped estimate: fit per GPU, hours, assumption labels, and what would make a job fit."""

from __future__ import annotations

import re

import pytest

from trainstack.architecture import presets
from trainstack.catalog.models import GpuModel
from trainstack.profile import TrainingSpec
from trainstack.sizing import assumptions, estimate, fit_suggestions, memory_estimate


def gpu(name: str, usable: float, tflops: float) -> GpuModel:
    return GpuModel(name=name, architecture="hopper", memory_gb=usable * 1.1, usable_gib=usable,
                    memory_bandwidth_gbs=3000, bf16_tflops=tflops, supports_bf16=True, supports_fp8=False,
                    sources=("TEST",))


SMALL, BIG, FAST = gpu("SMALL", 16.0, 300.0), gpu("BIG", 140.0, 500.0), gpu("FAST", 80.0, 900.0)
EIGHT_B = presets()["llama-3-8b"].architecture
THREE_B = presets()["llama-3.2-3b"].architecture
TOO_BIG = TrainingSpec(precision="bf16-mixed", micro_batch_size=2, sequence_length=4096, tokens=1e9)


def test_fits_compare_the_requirement_with_each_gpu():
    t = TrainingSpec(method="lora", precision="bf16", micro_batch_size=1, sequence_length=1024,
                     gradient_checkpointing=True, tokens=1e8)
    est = estimate(EIGHT_B, t, [SMALL, BIG, FAST])
    need = memory_estimate(EIGHT_B, t).required_gib_per_gpu
    assert [f.gpu for f in est.fits] == ["SMALL", "BIG", "FAST"]
    for f in est.fits:
        assert f.margin_gib == pytest.approx(f.usable_gib - need, abs=0.01)
        assert f.fits == (f.margin_gib >= 0)
    assert not est.fits[0].fits and est.fits[1].fits
    assert est.reference_gpu() == "FAST"  # the fastest GPU that fits
    speed = est.speed("FAST")
    assert est.hours("FAST") == pytest.approx(1e8 / speed.tokens_per_second / 3600)


def test_no_hours_without_tokens():
    t = TrainingSpec(method="lora", micro_batch_size=1, sequence_length=512)
    assert estimate(EIGHT_B, t, [BIG]).hours("BIG") is None


def test_a_job_that_fits_nowhere_is_still_an_estimate():
    est = estimate(THREE_B, TOO_BIG, [SMALL, FAST])
    assert not est.fits_anywhere and all(not f.fits for f in est.fits)
    assert est.reference_gpu() == "FAST"  # the roomiest, for the speed headline


def test_the_calibrated_setting_needs_no_assumption_label():
    assert assumptions(EIGHT_B, TrainingSpec(precision="bf16-mixed")) == ()


@pytest.mark.parametrize("change, words", [
    (dict(method="qlora"), "QLoRA"),
    (dict(precision="fp8-mixed"), "FP8"),
    (dict(optimizer="adafactor"), "adafactor"),
    (dict(zero_stage=3), "DeepSpeed layout"),
    (dict(zero_stage=3, framework="torchtitan"), "FSDP2 mixed precision"),
    (dict(method="pretrain"), "pretraining"),
])
def test_what_the_calibration_did_not_confirm_is_labelled(change, words):
    labels = assumptions(EIGHT_B, TrainingSpec(**change), data_parallel=8)
    assert any(words in lab for lab in labels)


def test_multi_gpu_is_labelled_an_assumption():
    assert any("all-reduce" in lab for lab in assumptions(EIGHT_B, TrainingSpec(), data_parallel=8))


# ---- fit suggestions ---------------------------------------------------------------------------

def _needs(s: str) -> float:
    return float(re.search(r"needs ([0-9.]+) GiB", s).group(1))


def test_suggestions_name_concrete_changes_each_resized_by_the_model():
    usable = 79.35
    assert memory_estimate(THREE_B, TOO_BIG).required_gib_per_gpu > usable
    out = fit_suggestions(THREE_B, TOO_BIG, usable)
    text = "\n".join(out)
    for words in ("gradient checkpointing", "LoRA", "QLoRA", "ZeRO-3 over", "sequence_length"):
        assert words in text
    for s in out:
        assert _needs(s) <= usable
    gc = next(s for s in out if s.startswith("enable gradient checkpointing"))
    with_gc = TOO_BIG.model_copy(update={"gradient_checkpointing": True})
    assert _needs(gc) == pytest.approx(memory_estimate(THREE_B, with_gc).required_gib_per_gpu, abs=0.05)
    zero = next(s for s in out if s.startswith("ZeRO-3"))
    n = int(re.search(r"over (\d+) GPUs", zero).group(1))
    sharded = TOO_BIG.model_copy(update={"zero_stage": 3})
    assert memory_estimate(THREE_B, sharded, n).required_gib_per_gpu <= usable
    assert memory_estimate(THREE_B, sharded, n // 2).required_gib_per_gpu > usable  # the smallest count
    seq = next(s for s in out if s.startswith("sequence_length"))
    length = int(re.search(r"sequence_length (\d+)", seq).group(1))
    assert length < 4096
    assert memory_estimate(THREE_B, TOO_BIG.model_copy(update={"sequence_length": length})).required_gib_per_gpu \
        <= usable


def test_a_job_that_fits_needs_no_suggestion():
    assert fit_suggestions(EIGHT_B, TrainingSpec(method="lora", sequence_length=512), 140.0) == []


def test_nothing_is_suggested_when_nothing_the_model_knows_would_fit():
    assert fit_suggestions(THREE_B, TOO_BIG, 0.5) == []  # below the CUDA context alone
