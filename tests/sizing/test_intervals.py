"""The interval rule (issue 32): an estimate's 80 % interval from its class's leave-one-source-out errors,
thin classes widened and labelled, FP8 without a published measurement widened, and the three-way fit
verdict on the required-memory interval's upper end. Property tests run every combination of the new
inputs through estimate()."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainstack.catalog import load_catalog
from trainstack.models import find_preset
from trainstack.profile import TrainingSpec
from trainstack.profile.kernels import ATTENTION_BY_FRAMEWORK
from trainstack.sizing import estimate, gpu_fit, memory_estimate
from trainstack.sizing import intervals as I

TABLE = {"hopper/hf/lora/dense": (-0.10, 0.20, 30, 4), "hopper/*/lora/dense": (-0.2, 0.3, 40, 5),
         "hopper/*/*/dense": (-0.25, 0.35, 80, 8), "*/*/*/dense": (-0.3, 0.4, 200, 12),
         "*/*/*/moe": (-0.5, 1.0, 12, 3), "*/*/*/*": (-0.3, 0.5, 212, 13),
         "ampere/hf/lora/dense": (-0.01, 0.01, 9, 1)}
CLS = I.EstimateClass("hopper", "hf", "lora", "dense")


def test_the_interval_is_the_range_the_class_errors_imply():
    iv = I.interval("speed", 1000.0, CLS, table=TABLE)
    # true = estimate / (1 + error): the 90th-percentile error gives the low end
    assert iv.low == pytest.approx(1000 / 1.2, abs=0.1) and iv.high == pytest.approx(1000 / 0.9, abs=0.1)
    assert iv.basis == "hopper/hf/lora/dense" and not iv.few_rows and iv.labels == ()


def test_a_thin_class_takes_its_parent_widened_and_says_so():
    thin = I.EstimateClass("ampere", "hf", "lora", "dense")   # 9 rows from one source: too few
    iv = I.interval("speed", 1000.0, thin, table=TABLE)
    assert iv.few_rows and iv.basis == "*/*/*/dense"
    lo, hi = math.log(1 / 1.4), math.log(1 / 0.7)
    mid, half = (lo + hi) / 2, (hi - lo) / 2 * I.FEW_ROWS_WIDEN["speed"]
    assert iv.low == pytest.approx(1000 * math.exp(mid - half), abs=0.1)
    assert iv.high == pytest.approx(1000 * math.exp(mid + half), abs=0.1)
    assert "few rows for ampere/hf/lora/dense" in iv.labels[0]


def test_fp8_on_a_gpu_without_a_published_fp8_measurement_is_widened_and_labelled():
    plain = I.interval("speed", 1000.0, CLS, table=TABLE)
    iv = I.interval("speed", 1000.0, CLS, table=TABLE, fp8_unmeasured_gpu="H20")
    assert iv.high - iv.low > plain.high - plain.low
    assert any("no FP8 training measurement on H20" in lab for lab in iv.labels)
    t = TrainingSpec(precision="fp8-mixed")
    assert I.fp8_unmeasured(t, "H20", ("H100",)) == "H20" and I.fp8_unmeasured(t, "H100", ("H100",)) is None
    assert I.fp8_unmeasured(TrainingSpec(), "H20", ()) is None


@settings(max_examples=300, deadline=None)
@given(st.floats(1, 200), st.floats(1, 200), st.floats(0, 10), st.floats(0.5, 3))
def test_the_fit_verdict(required, usable, margin, high):
    v = I.fit_verdict(required, usable, margin, high)
    upper = required * max(1.0, high)
    assert v == ("fits" if upper + margin <= usable else "at_risk" if required + margin <= usable else "does_not_fit")
    # the upper end is never below the estimate: fits implies the estimate fits too
    if v == "fits":
        assert I.fit_verdict(required, usable, margin, 1.0) == "fits"


CATALOG = load_catalog()
GPUS = [CATALOG.gpu(n) for n in ("A10", "A100-80G", "H100", "H20", "L20")]
ARCHS = {"dense": find_preset("llama-3-8b").architecture, "moe": find_preset("mixtral-8x7b").architecture}


@settings(max_examples=60, deadline=None)
@given(framework=st.sampled_from(sorted(ATTENTION_BY_FRAMEWORK)), method=st.sampled_from(["full", "lora", "qlora"]),
       precision=st.sampled_from(["bf16", "bf16-mixed", "fp8-mixed"]), moe=st.sampled_from(["dense", "moe"]),
       data=st.data())
def test_every_estimate_carries_its_intervals_and_class(framework, method, precision, moe, data):
    attention = data.draw(st.sampled_from([None, *ATTENTION_BY_FRAMEWORK[framework][0]]))
    t = TrainingSpec(framework=framework, method=method, precision=precision, attention=attention,
                     sequence_length=data.draw(st.sampled_from([512, 4096])), gradient_checkpointing=True,
                     zero_stage=3, fp8_recipe=data.draw(st.sampled_from([None, "tensorwise", "rowwise"]))
                     if precision == "fp8-mixed" else None)
    est = estimate(ARCHS[moe], t, GPUS, gpu_count=8)
    m = est.memory
    assert m.interval_class == f"*/{framework}/{'full' if method == 'full' else method}/{moe}"
    lo, hi = m.required_gib_interval
    assert 0 < lo <= hi
    for f in est.fits:
        assert f.fit in ("fits", "at_risk", "does_not_fit") and f.peak_gib_interval == m.peak_gib_interval
        assert (f.fit != "does_not_fit") == (f.usable_gib - m.required_gib_per_gpu >= f.min_margin_gib)
    for s in est.throughput:
        if s.tokens_per_second_per_gpu:
            a, b = s.tokens_per_second_per_gpu_interval
            assert 0 < a <= b and s.interval_class.split("/")[1:] == m.interval_class.split("/")[1:]
            if precision == "fp8-mixed" and s.gpu in ("H20", "L20"):
                assert any("no FP8 training measurement" in lab for lab in s.labels)
    kind = attention or ATTENTION_BY_FRAMEWORK[framework][1]
    labelled = any(a.startswith(f"attention {kind}:") for a in est.assumptions)
    assert labelled == (not (framework == "hf" and kind == "sdpa"))   # the calibrated setting needs no label


def test_gpu_fit_uses_the_upper_end_of_the_required_interval():
    arch = ARCHS["dense"]
    t = TrainingSpec(method="lora", sequence_length=2048)
    mem = memory_estimate(arch, t)
    lo, hi = mem.required_gib_interval
    assert hi >= mem.required_gib_per_gpu
    gpu = CATALOG.gpu("A10")
    for usable, expect in ((hi / 0.97 + 0.5, "fits"), ((mem.required_gib_per_gpu + hi) / 2 / 0.97, "at_risk"),
                           (mem.required_gib_per_gpu * 0.9, "does_not_fit")):
        g = gpu.model_copy(update={"usable_gib": round(usable, 2)})
        f = gpu_fit(mem, g, 0.03)
        if hi > mem.required_gib_per_gpu * 1.001 or expect != "at_risk":
            assert f.fit == expect, (usable, f)
