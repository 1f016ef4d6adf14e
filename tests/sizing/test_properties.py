"""Properties every estimate must have, over many shapes and settings (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainstack.architecture import Architecture
from trainstack.catalog.models import GpuModel
from trainstack.profile import LoraSpec, TrainingSpec
from trainstack.sizing import fit_suggestions, memory_estimate, throughput_estimate

GPU = GpuModel(name="G", architecture="hopper", memory_gb=80, usable_gib=79.0, memory_bandwidth_gbs=3000,
               bf16_tflops=900, supports_bf16=True, supports_fp8=False, sources=("TEST",))


@st.composite
def shapes(draw) -> Architecture:
    kv = draw(st.sampled_from([1, 2, 4, 8]))
    heads = kv * draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from([32, 64, 128]))
    return Architecture(hidden_size=heads * head_dim, num_layers=draw(st.integers(2, 48)),
                        num_attention_heads=heads, num_kv_heads=kv,
                        intermediate_size=draw(st.integers(64, 30000)), vocab_size=draw(st.integers(100, 260000)),
                        tie_embeddings=draw(st.booleans()))


@st.composite
def trainings(draw) -> TrainingSpec:
    method = draw(st.sampled_from(["full", "lora", "qlora", "pretrain"]))
    lora = LoraSpec(rank=draw(st.sampled_from([4, 16, 64])), targets=draw(st.sampled_from(["attention", "all-linear"]))) \
        if method in ("lora", "qlora") else None
    return TrainingSpec(method=method, precision=draw(st.sampled_from(["bf16", "bf16-mixed", "fp16-mixed", "fp8-mixed"])),
                        optimizer=draw(st.sampled_from(["adamw", "adamw-8bit", "sgd", "adafactor"])),
                        micro_batch_size=draw(st.integers(1, 16)), sequence_length=draw(st.integers(16, 16384)),
                        gradient_checkpointing=draw(st.booleans()), lora=lora, zero_stage=draw(st.integers(0, 3)))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(arch=shapes(), t=trainings(), dp=st.sampled_from([1, 2, 8, 64]))
def test_memory_is_consistent(arch, t, dp):
    m = memory_estimate(arch, t, dp)
    assert 0 < m.peak_gib_per_gpu < m.required_gib_per_gpu
    assert abs(sum(m.breakdown_gib.values()) - m.peak_gib_per_gpu) < 0.01
    assert all(v >= 0 for v in m.breakdown_gib.values())
    assert m.phases_gib[m.peak_phase] == max(m.phases_gib.values())


@settings(max_examples=100, deadline=None, derandomize=True)
@given(arch=shapes(), t=trainings())
def test_more_tokens_never_need_less_memory_and_checkpointing_never_needs_more(arch, t):
    base = memory_estimate(arch, t).peak_gib_per_gpu
    longer = t.model_copy(update={"sequence_length": t.sequence_length * 2})
    wider = t.model_copy(update={"micro_batch_size": t.micro_batch_size + 1})
    assert memory_estimate(arch, longer).peak_gib_per_gpu >= base
    assert memory_estimate(arch, wider).peak_gib_per_gpu >= base
    on = t.model_copy(update={"gradient_checkpointing": True})
    off = t.model_copy(update={"gradient_checkpointing": False})
    # (at most one recomputed layer more, when the peak is at the end of the backward anyway)
    assert memory_estimate(arch, on).peak_gib_per_gpu <= memory_estimate(arch, off).peak_gib_per_gpu * 1.01 + 1e-3


@settings(max_examples=60, deadline=None, derandomize=True)
@given(arch=shapes(), t=trainings())
def test_zero3_over_more_gpus_never_needs_more_per_gpu(arch, t):
    z = t.model_copy(update={"zero_stage": 3})
    peaks = [memory_estimate(arch, z, n).peak_gib_per_gpu for n in (2, 4, 16, 128)]
    assert all(a >= b - 1e-3 for a, b in zip(peaks, peaks[1:]))


@settings(max_examples=80, deadline=None, derandomize=True)
@given(arch=shapes(), t=trainings(), nodes=st.sampled_from([1, 2, 8]))
def test_speed_is_positive_and_more_gpus_never_speed_up_each_gpu(arch, t, nodes):
    one = throughput_estimate(arch, t, GPU)
    many = throughput_estimate(arch, t, GPU, gpus_per_node=8, nodes=nodes)
    assert one.tokens_per_second_per_gpu > 0 and 0 <= one.mfu <= one.hfu < 1
    assert many.tokens_per_second_per_gpu <= one.tokens_per_second_per_gpu * 1.0001
    assert 0 < many.scaling_efficiency <= 1.0001
    assert many.tokens_per_second == pytest.approx(many.tokens_per_second_per_gpu * 8 * nodes, abs=0.1 * 8 * nodes)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(arch=shapes(), t=trainings())
def test_every_suggestion_fits(arch, t):
    for s in fit_suggestions(arch, t, 20.0):
        needs = float(s.split("needs ")[1].split(" GiB")[0])
        assert needs <= 20.0
