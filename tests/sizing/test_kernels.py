"""The kernel terms of issue 32 against hand counts from their sources: eager attention, compiled
element-wise traffic, torchao float8 casts, MoE expert GEMMs at their size and transformers' per-expert
loop, hybrid sharding; and the profile fields that state them (exit 2 where a stack cannot run one)."""

from __future__ import annotations

import itertools

import pytest
import yaml

from trainstack.catalog import load_catalog
from trainstack.cli import main
from trainstack.models import find_preset
from trainstack.parallel_degrees import hybrid_replicas
from trainstack.profile import TrainingSpec
from trainstack.profile.kernels import ATTENTION_BY_FRAMEWORK, HYBRID_SHARDING, kernel_problems
from trainstack.sizing import constants as K
from trainstack.sizing import memory_estimate, throughput_estimate
from trainstack.sizing.activations import _attention_core
from trainstack.sizing.moe_time import expert_roofline, expert_work, loop_layers
from trainstack.sizing.traffic import _compiled_layer_bytes, _eager_layer_bytes, elementwise_bytes_per_token

from test_throughput import H200

L8B = find_preset("llama-3-8b").architecture
QWEN3_MOE = find_preset("qwen3-30b-a3b").architecture


def test_eager_attention_keeps_the_score_matrix():
    s = 4096
    flash = _attention_core(L8B)
    eager = _attention_core(L8B, s)
    # softmax's fp32 output and its bf16 copy per head and key; repeat_kv's expanded K and V
    assert eager - flash == pytest.approx(K.EAGER_SAVED_SCORE_BYTES * 32 * s + 2 * 4 * L8B.q_dim
                                          - 2 * (2 * L8B.q_dim + 2 * L8B.kv_dim) - 4 * 32)
    t = TrainingSpec(method="lora", sequence_length=s, gradient_checkpointing=True)
    eager_mem = memory_estimate(L8B, t.model_copy(update={"attention": "eager"})).phases_gib["recompute"]
    # the recomputed layer holds its s x s scores (one layer: checkpointing keeps only the layer inputs)
    assert eager_mem - memory_estimate(L8B, t).phases_gib["recompute"] == pytest.approx(
        (eager - flash) * s / K.GIB, rel=0.02)


def test_eager_memory_is_quadratic_and_flash_linear_in_the_sequence():
    def peak(att, s):
        t = TrainingSpec(method="lora", sequence_length=s, attention=att)   # every layer keeps its scores
        return memory_estimate(L8B, t).peak_gib_per_gpu
    base = peak("sdpa", 1024)
    assert peak("sdpa", 4096) - base < 4 * (peak("sdpa", 2048) - base)
    extra = {s: peak("eager", s) - peak("sdpa", s) for s in (2048, 4096, 8192)}
    assert extra[8192] > 3 * extra[4096] > 9 * extra[2048] > 0


def test_eager_attention_is_slower_at_long_contexts_and_the_matmuls_run_the_full_square():
    t = TrainingSpec(method="lora", sequence_length=8192, gradient_checkpointing=True)
    sdpa = throughput_estimate(L8B, t, H200)
    eager = throughput_estimate(L8B, t.model_copy(update={"attention": "eager"}), H200)
    assert eager.tokens_per_second_per_gpu < 0.8 * sdpa.tokens_per_second_per_gpu
    assert eager.model_flops_per_token == sdpa.model_flops_per_token    # MFU counts the causal model FLOPs
    assert eager.flops_per_token > sdpa.flops_per_token
    per_layer_scores = 32 * 8192 * (K.EAGER_SCORE_BYTES["forward"] * 2 + K.EAGER_SCORE_BYTES["backward"])
    assert elementwise_bytes_per_token(L8B, t.model_copy(update={"attention": "eager"})) - \
        elementwise_bytes_per_token(L8B, t) == pytest.approx(L8B.num_layers * per_layer_scores)


def test_compiled_traffic_is_the_fused_regions_io():
    h, q, kv, i = L8B.hidden_size, L8B.q_dim, L8B.kv_dim, L8B.intermediate_size
    assert _compiled_layer_bytes(L8B, 2) == (2 + 2) * h + 4 * (q + kv) + (4 + 4) * h + (4 + 2) * h + 6 * i
    assert _compiled_layer_bytes(L8B, 2) < _eager_layer_bytes(L8B, 2, False) / 2
    t = TrainingSpec(framework="torchtitan", precision="bf16-mixed", zero_stage=3, sequence_length=4096)
    eager = throughput_estimate(L8B, t, H200, gpus_per_node=8)
    compiled = throughput_estimate(L8B, t.model_copy(update={"compile": True}), H200, gpus_per_node=8)
    assert compiled.tokens_per_second_per_gpu > eager.tokens_per_second_per_gpu


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_fp8_adds_torchaos_cast_traffic_and_is_below_twice_bf16(recipe):
    h200 = load_catalog().gpu("H200")   # with its FP8 peak
    t = TrainingSpec(framework="torchtitan", precision="fp8-mixed", fp8_recipe=recipe, sequence_length=8192,
                     zero_stage=3, compile=True)
    fp8 = throughput_estimate(L8B, t, h200, gpus_per_node=8)
    bf16 = throughput_estimate(L8B, t.model_copy(update={"precision": "bf16-mixed", "fp8_recipe": None}), h200,
                               gpus_per_node=8)
    assert 1.0 < fp8.tokens_per_second_per_gpu / bf16.tokens_per_second_per_gpu < 1.6
    extra = elementwise_bytes_per_token(L8B, t) - elementwise_bytes_per_token(
        L8B, t.model_copy(update={"precision": "bf16-mixed", "fp8_recipe": None}))
    assert extra > 0
    rowwise = elementwise_bytes_per_token(L8B, t.model_copy(update={"fp8_recipe": "rowwise"}))
    assert rowwise >= elementwise_bytes_per_token(L8B, t.model_copy(update={"fp8_recipe": "tensorwise"}))


def test_small_experts_are_memory_bound_and_big_ones_compute_bound():
    t = TrainingSpec(framework="megatron", precision="bf16-mixed", sequence_length=4096)
    few = expert_work(QWEN3_MOE, t, 64.0, None, 1)        # 64 tokens a micro-batch: a handful per expert
    many = expert_work(QWEN3_MOE, t, 65536.0, None, 8)
    _, mem_few = expert_roofline(few, 989, 4800, 0.7)
    comp_many, mem_many = expert_roofline(many, 989, 4800, 0.7)
    assert mem_few > 0 and mem_many == 0 and comp_many == pytest.approx(many.flops)
    assert expert_work(L8B, t, 4096.0, None, 1) is None


def test_transformers_per_expert_loop_costs_launches_other_stacks_do_not():
    hf = TrainingSpec(framework="hf", sequence_length=4096)
    assert loop_layers(QWEN3_MOE, hf, 4096.0, None) == pytest.approx(
        QWEN3_MOE.moe_layers * QWEN3_MOE.num_experts * K.HF_EXPERT_LOOP_KERNELS / K.KERNELS_PER_LAYER, rel=1e-3)
    assert loop_layers(QWEN3_MOE, hf.model_copy(update={"framework": "megatron"}), 4096.0, None) == 0
    assert loop_layers(L8B, hf, 4096.0, None) == 0


def test_hybrid_sharding_shards_inside_a_node_and_reduces_across():
    assert hybrid_replicas("hybrid", 1, 1, 32, 8) == 4 and hybrid_replicas("full", 1, 1, 32, 8) == 1
    assert hybrid_replicas("hybrid", 2, 1, 16, 8) == 4 and hybrid_replicas("hybrid", 1, 1, 12, 8) == 1
    t = TrainingSpec(framework="torchtitan", zero_stage=3, sequence_length=4096)
    full = memory_estimate(L8B, t, 64)
    hsdp = memory_estimate(L8B, t.model_copy(update={"sharding": "hybrid"}), 64)
    assert hsdp.layout == "DP 64 (HSDP 8 x 8)" and hsdp.required_gib_per_gpu > full.required_gib_per_gpu
    # the states are sharded over the 8 GPUs of a node: 12 bytes per parameter / 8
    assert hsdp.breakdown_gib["optimizer_states"] == pytest.approx(8 * L8B.params / 8 / K.GIB, rel=0.01)
    # the weight gathers of every micro-batch stay on NVLink; the gradients cross the network once per step
    acc = t.model_copy(update={"gradient_accumulation_steps": 8})
    fast = throughput_estimate(L8B, acc.model_copy(update={"sharding": "hybrid"}), H200, gpus_per_node=8, nodes=8,
                               interconnect="nvswitch", network="erdma", network_gbps=100)
    slow = throughput_estimate(L8B, acc, H200, gpus_per_node=8, nodes=8, interconnect="nvswitch", network="erdma",
                               network_gbps=100)
    assert fast.tokens_per_second_per_gpu > 1.5 * slow.tokens_per_second_per_gpu
    assert any("hybrid sharding" in lab for lab in fast.labels)


# ---- the profile fields --------------------------------------------------------------------------------

FRAMEWORKS = sorted(ATTENTION_BY_FRAMEWORK)


@pytest.mark.parametrize("framework, attention", list(itertools.product(FRAMEWORKS, ["flash", "sdpa", "eager"])))
def test_every_framework_and_attention_pair_validates_or_names_what_is_allowed(framework, attention):
    allowed = ATTENTION_BY_FRAMEWORK[framework][0]
    if attention in allowed:
        assert TrainingSpec(framework=framework, attention=attention).attention == attention
    else:
        with pytest.raises(ValueError) as err:
            TrainingSpec(framework=framework, attention=attention)
        assert f"allowed with {framework}: {', '.join(allowed)}" in str(err.value)


@pytest.mark.parametrize("doc, field, needle", [
    ({"framework": "torchtitan", "attention": "eager"}, "training.attention", "allowed with torchtitan: sdpa"),
    ({"precision": "bf16", "fp8_recipe": "rowwise"}, "training.fp8_recipe", "needs precision fp8-mixed"),
    ({"sharding": "hybrid"}, "training.sharding", "needs zero_stage 3"),
    ({"framework": "megatron", "zero_stage": 3, "sharding": "hybrid"}, "training.sharding", "has no hybrid sharding"),
])
def test_an_impossible_kernel_choice_is_exit_2_at_its_field(tmp_path, capsys, doc, field, needle):
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump({"name": "demo", "model": {"preset": "llama-3-8b"}, "training": doc}))
    code = main(["validate", str(p)])
    err = capsys.readouterr().err
    assert code == 2 and field in err and needle in err and "Traceback" not in err


def test_the_rule_book_is_one_function():
    assert kernel_problems("hf", "bf16", 0, attention="eager") == []
    assert [f for f, _ in kernel_problems("litgpt", "bf16", 0, attention="flash", fp8_recipe="rowwise",
                                          sharding="hybrid")] == ["attention", "fp8_recipe", "sharding"]
    assert set(HYBRID_SHARDING) <= set(ATTENTION_BY_FRAMEWORK)
