"""Speed model: FLOPs against hand calculations, GPU scaling, multi-GPU communication."""

from __future__ import annotations

import pytest

from trainstack.architecture import Architecture, presets
from trainstack.catalog.models import GpuModel
from trainstack.profile import LoraSpec, TrainingSpec
from trainstack.sizing import constants as K
from trainstack.sizing import flops_per_token, throughput_estimate
from trainstack.sizing.communication import sync_seconds
from trainstack.sizing.traffic import elementwise_bytes_per_token, optimizer_bytes, per_step_bytes

TINY = Architecture(hidden_size=64, num_layers=2, num_attention_heads=4, num_kv_heads=2,
                    intermediate_size=128, vocab_size=1000, tie_embeddings=True)
BODY = 2 * 36_864       # decoder matmul weights
HEAD = 1000 * 64        # LM head matmul (tied, still a matmul)
ATTN_FWD = 2 * 2 * 16 * 64  # 2 x layers x sequence x q_dim: causal QK^T and AV per token


def gpu(name="H200", tflops=989.0, bandwidth=4800.0, arch="hopper", **kw) -> GpuModel:
    return GpuModel(name=name, architecture=arch, memory_gb=141, usable_gib=139.8, bf16_tflops=tflops,
                    fp16_tflops=kw.pop("fp16", tflops), memory_bandwidth_gbs=bandwidth,
                    supports_bf16=tflops is not None, supports_fp8=kw.get("fp8_tflops") is not None,
                    sources=("TEST",), **kw)


H200 = gpu()
EIGHT_B = presets()["llama-3-8b"].architecture


def spec(**kw) -> TrainingSpec:
    base = dict(micro_batch_size=2, sequence_length=16, precision="bf16")
    base.update(kw)
    return TrainingSpec(**base)


def test_flops_full_training_are_six_per_weight_plus_causal_attention():
    f = flops_per_token(TINY, spec())
    assert f["linear"] == 6 * (BODY + HEAD)
    assert f["attention"] == 3 * ATTN_FWD


def test_checkpointing_recomputes_the_layers_forward():
    f = flops_per_token(TINY, spec(gradient_checkpointing=True))
    assert f["linear"] == 6 * (BODY + HEAD) + 2 * BODY   # the LM head is not checkpointed
    assert f["attention"] == 4 * ATTN_FWD


def test_lora_skips_the_frozen_weights_gradients():
    adapters = 2 * 8 * 448
    f = flops_per_token(TINY, spec(method="lora", lora=LoraSpec(rank=8)))
    assert f["linear"] == 4 * (BODY + HEAD) + 6 * adapters


def test_flops_of_a_big_model_at_short_sequence_follow_the_6n_rule():
    # 6 FLOPs per weight that multiplies: every parameter but the embedding table (a lookup)
    f = flops_per_token(EIGHT_B, spec(sequence_length=128))
    matmul_weights = EIGHT_B.params - EIGHT_B.vocab_size * EIGHT_B.hidden_size
    assert f["linear"] + f["attention"] == pytest.approx(6 * matmul_weights, rel=0.01)


def test_step_time_is_matmul_time_plus_elementwise_traffic_time():
    t = TrainingSpec(precision="bf16-mixed", micro_batch_size=8, sequence_length=1024)
    arch = presets()["llama-3.2-1b"].architecture
    est = throughput_estimate(arch, t, H200)
    f = flops_per_token(arch, t)
    tokens = 8 * 1024
    compute = tokens * (f["linear"] / K.MATMUL_EFFICIENCY_BY_ARCH["hopper"]
                        + f["attention"] / K.ATTENTION_EFFICIENCY_BY_ARCH["hopper"]) / 989e12
    traffic = (tokens * elementwise_bytes_per_token(arch, t) + per_step_bytes(arch, t)) / (
        4800e9 * K.BANDWIDTH_EFFICIENCY)
    launches = arch.num_layers * K.LAYER_OVERHEAD_SECONDS
    assert est.step_seconds == pytest.approx(compute + traffic + launches, rel=1e-4)
    assert est.tokens_per_second_per_gpu == pytest.approx(tokens / (compute + traffic + launches), rel=1e-4)
    assert est.mfu == pytest.approx(est.tokens_per_second_per_gpu * est.flops_per_token / 989e12, rel=1e-3)


def test_small_models_with_big_vocabularies_run_at_lower_utilisation():
    t = TrainingSpec(precision="bf16-mixed", micro_batch_size=8, sequence_length=2048)
    small = throughput_estimate(presets()["qwen2.5-0.5b"].architecture, t, H200)
    big = throughput_estimate(presets()["llama-3.2-3b"].architecture, t, H200)
    assert small.mfu < big.mfu


def test_other_gpus_scale_with_tflops_and_bandwidth_and_say_so():
    t = spec(sequence_length=1024)
    half = throughput_estimate(TINY, t, gpu(name="HALF", tflops=989 / 2, bandwidth=2400.0))
    full = throughput_estimate(TINY, t, H200)
    launches = TINY.num_layers * K.LAYER_OVERHEAD_SECONDS  # the fixed per-layer cost does not scale
    assert half.step_seconds - launches == pytest.approx(2 * (full.step_seconds - launches), rel=0.02)
    assert any("fitted efficiencies of its generation" in lab for lab in half.labels)
    assert not any("generation" in lab for lab in full.labels)


def test_a_gpu_without_bf16_uses_its_fp16_peak_and_one_without_tflops_has_no_speed():
    t = spec()
    v100 = throughput_estimate(TINY, t, gpu(name="V100", tflops=None, fp16=125.0, arch="volta"))
    assert v100.tokens_per_second_per_gpu and any("FP16" in lab for lab in v100.labels)
    unknown = throughput_estimate(TINY, t, gpu(name="P100", tflops=None, fp16=None, arch="pascal"))
    assert unknown.tokens_per_second is None and any("unknown" in lab for lab in unknown.labels)


def test_fp8_uses_the_fp8_peak_for_matmuls_and_is_labelled():
    h100 = gpu(name="H100", bandwidth=3350.0, fp8_tflops=1979.0)
    t = TrainingSpec(precision="bf16-mixed", micro_batch_size=1, sequence_length=4096)
    bf16 = throughput_estimate(EIGHT_B, t, h100)
    fp8 = throughput_estimate(EIGHT_B, t.model_copy(update={"precision": "fp8-mixed"}), h100)
    assert fp8.tokens_per_second_per_gpu > bf16.tokens_per_second_per_gpu
    assert any("FP8" in lab for lab in fp8.labels)


# ---- data parallel ----------------------------------------------------------------------------

FULL_8B = TrainingSpec(precision="bf16", micro_batch_size=1, sequence_length=2048, gradient_checkpointing=True)


def test_ring_all_reduce_time_inside_one_nvlink_node_by_hand():
    seconds, labels = sync_seconds(EIGHT_B, FULL_8B, H200, 8, 1, "nvswitch", "none", None)
    grad_bytes = 2 * EIGHT_B.params  # bf16 gradients
    assert seconds == pytest.approx(2 * 7 / 8 * grad_bytes / (360e9))
    assert any("not calibrated" in lab for lab in labels)


def test_across_nodes_the_network_adds_its_own_ring():
    seconds, _ = sync_seconds(EIGHT_B, FULL_8B, H200, 8, 4, "nvswitch", "erdma", 400.0)
    grad_bytes = 2 * EIGHT_B.params
    intra = 2 * 7 / 8 * grad_bytes / 360e9
    inter = 2 * 3 / 4 * grad_bytes / (400 / 8 * 1e9 * 0.8)
    assert seconds == pytest.approx(intra + inter)


def test_exposed_communication_is_what_the_backward_pass_cannot_hide():
    one = throughput_estimate(EIGHT_B, FULL_8B, H200)
    eight = throughput_estimate(EIGHT_B, FULL_8B, H200, gpus_per_node=8, nodes=1, interconnect="nvswitch")
    sync, _ = sync_seconds(EIGHT_B, FULL_8B, H200, 8, 1, "nvswitch", "none", None)
    optimizer = optimizer_bytes(EIGHT_B, FULL_8B) / (4800e9 * K.BANDWIDTH_EFFICIENCY)
    backward = (one.step_seconds - optimizer) * 2 / 3  # the optimizer step is not part of the backward
    assert eight.communication_seconds == pytest.approx(sync - K.COMM_OVERLAP * min(sync, backward), rel=1e-3)
    assert eight.tokens_per_second == pytest.approx(8 * eight.tokens_per_second_per_gpu, rel=1e-5)
    assert 0 < eight.scaling_efficiency <= 1


def test_slower_links_scale_worse():
    nvlink = throughput_estimate(EIGHT_B, FULL_8B, H200, gpus_per_node=8, interconnect="nvlink")
    pcie = throughput_estimate(EIGHT_B, FULL_8B, H200, gpus_per_node=8, interconnect="pcie")
    assert pcie.tokens_per_second_per_gpu < nvlink.tokens_per_second_per_gpu
    erdma = throughput_estimate(EIGHT_B, FULL_8B, H200, gpus_per_node=8, nodes=4, network="erdma")
    tcp = throughput_estimate(EIGHT_B, FULL_8B, H200, gpus_per_node=8, nodes=4, network="tcp")
    assert tcp.tokens_per_second_per_gpu < erdma.tokens_per_second_per_gpu
    assert erdma.scaling_efficiency < nvlink.scaling_efficiency


def test_lora_syncs_only_adapter_gradients_so_it_scales_far_better_over_tcp():
    lora = FULL_8B.model_copy(update={"method": "lora", "lora": LoraSpec()})
    est = throughput_estimate(EIGHT_B, lora, H200, gpus_per_node=8, nodes=2, network="tcp")
    full = throughput_estimate(EIGHT_B, FULL_8B, H200, gpus_per_node=8, nodes=2, network="tcp")
    assert est.scaling_efficiency > 0.95 > 0.5 > full.scaling_efficiency
