"""The layout model (trainstack/sizing/parallel.py): what tensor, pipeline and context parallelism divide,
what they hold in flight, and the communication they add, each against a hand calculation."""

from __future__ import annotations

import pytest

from trainstack.architecture import presets
from trainstack.profile import TrainingSpec
from trainstack.sizing import constants as K
from trainstack.sizing import memory_estimate, throughput_estimate
from trainstack.sizing import parallel as P
from trainstack.sizing.communication import tp_seconds
from trainstack.sizing.links import group_span, links
from trainstack.sizing.phases import phase_components

from test_throughput import H200

L8B = presets()["llama-3-8b"].architecture
L70B = presets()["llama-3-70b"].architecture
L405B = presets()["llama-3.1-405b"].architecture
GIB = K.GIB


def spec(**kw) -> TrainingSpec:
    base = dict(method="full", precision="bf16-mixed", micro_batch_size=1, sequence_length=4096,
                gradient_checkpointing=True, zero_stage=1, framework="megatron")
    base.update(kw)
    return TrainingSpec(**base)


def test_layout_from_the_profile_and_world_size():
    lay = P.layout_for(spec(tensor_parallel=8, pipeline_parallel=2), 32)
    assert (lay.tp, lay.pp, lay.cp, lay.dp, lay.world, lay.shard) == (8, 2, 1, 2, 32, 2)
    assert lay.label == "TP 8 x PP 2 x DP 2"
    assert P.layout_for(spec(), 16) == P.Layout(dp=16)  # unset degrees are 1
    assert P.layout_for(spec(context_parallel=4), 8).shard == 8  # ZeRO shards over dp x cp


def test_micro_batches_in_flight_follow_megatron_warmup():
    # 1F1B: rank r holds pp - r micro-batches (warm-up pp - r - 1, plus the one in 1F1B), never more than m
    assert [P.in_flight_chunks(4, 1, r, 8) for r in range(4)] == [4, 3, 2, 1]
    assert P.in_flight_chunks(4, 1, 0, 2) == 2
    # interleaved: 2 (pp - r - 1) + (vp - 1) pp + 1 chunks, at most m x vp
    assert P.in_flight_chunks(4, 2, 0, 8) == 2 * 3 + 4 + 1
    assert P.in_flight_chunks(8, 2, 0, 8) == 16  # torchtitan's 405B run: capped by its 16 chunks
    first, last = P.stages(80, P.Layout(tp=8, pp=4, dp=1), 8)
    assert (first.layers, first.act_layers, first.first, last.act_layers, last.last) == (20, 80.0, True, 20.0, True)


def test_uneven_stages_give_the_middle_the_extra_layers():
    # torchtitan splits 126 layers over 8 stages as 15, 16 x 6, 15 (generate_split_points)
    stages = P.stages(126, P.Layout(tp=8, pp=8, dp=8), 8)
    assert [s.layers for s in stages] == [15, 16, 15]
    assert stages[1].act_layers == 7 * 16


def test_tensor_and_pipeline_parallelism_divide_the_held_memory():
    t = spec(zero_stage=0, gradient_checkpointing=True)
    one = memory_estimate(L70B, t, 1)
    tp8 = memory_estimate(L70B, t.model_copy(update={"tensor_parallel": 8}), 8)
    # weights, gradients and optimizer states: 1/8 on each GPU (norms are replicated: under 0.01 %)
    for k in ("weights", "gradients", "optimizer_states"):
        if one.breakdown_gib[k]:
            assert tp8.breakdown_gib[k] == pytest.approx(one.breakdown_gib[k] / 8, rel=1e-3), k
    assert tp8.layout == "TP 8 x DP 1" and tp8.data_parallel == 1
    pp4 = memory_estimate(L70B, t.model_copy(update={"pipeline_parallel": 4}), 4)
    # the first stage holds 20 layers and the embedding; 16 bytes per parameter under bf16-mixed autocast
    stage_params = (L70B.params - L70B.embedding_params - L70B.head_params) / 4 + L70B.embedding_params
    assert pp4.breakdown_gib["weights"] == pytest.approx(4 * stage_params / GIB, rel=1e-3)
    assert pp4.peak_stage in ("first", "last")


def test_sequence_parallel_activations_and_vocab_parallel_logits_split_over_tp():
    t = spec(gradient_checkpointing=False, zero_stage=0, precision="bf16")
    one = phase_components(L8B, t, 1)["forward"]
    lay = P.Layout(tp=4)
    stage = P.stages(L8B.num_layers, lay, 1)[0]
    tp4 = phase_components(L8B, t, 1, lay=lay, stage=stage)["forward"]
    assert tp4["activations"] == pytest.approx(one["activations"] / 4, rel=1e-9)
    assert tp4["logits_and_loss"] == pytest.approx(one["logits_and_loss"] / 4, rel=1e-9)


def test_torchtitan_loss_parallel_holds_more_of_its_vocabulary_shard():
    # DTensor loss_parallel (torchtitan with tp > 1): the decomposed log-softmax holds the bf16 logits, the fp32
    # input, shifted and exp(shifted) (2 + 12 bytes); its fused backward zeros_like(x), exp(x) and their sum beside
    # the saved log-probabilities (16): per token and vocabulary entry on the GPU, against 10 and 12
    t = spec(gradient_checkpointing=False, zero_stage=0, precision="bf16", framework="torchtitan")
    lay = P.Layout(tp=4)
    stage = P.stages(L8B.num_layers, lay, 1)[0]
    tp4 = phase_components(L8B, t, 1, lay=lay, stage=stage)
    shard = L8B.vocab_size * t.sequence_length / 4
    assert tp4["forward"]["logits_and_loss"] == pytest.approx(14 * shard, rel=1e-9)
    assert tp4["backward_start"]["logits_and_loss"] == pytest.approx(16 * shard, rel=1e-9)
    one = phase_components(L8B, t, 1)  # no tensor parallelism: the aten kernels
    assert one["backward_start"]["logits_and_loss"] == pytest.approx(12 * 4 * shard, rel=1e-9)
    megatron = phase_components(L8B, t.model_copy(update={"framework": "megatron"}), 1, lay=lay, stage=stage)
    assert megatron["backward_start"]["logits_and_loss"] == pytest.approx(2 * shard, rel=1e-9)  # fused


def test_context_parallelism_splits_each_sequence():
    t = spec(sequence_length=32768, zero_stage=3, gradient_checkpointing=True)
    dp8 = memory_estimate(L8B, t.model_copy(update={"sequence_length": 4096}), 8)
    cp8 = memory_estimate(L8B, t.model_copy(update={"context_parallel": 8}), 8)
    # 32k tokens over 8 GPUs hold what 4k tokens on one do; ZeRO still shards over all 8 (dp x cp)
    assert cp8.breakdown_gib["activations"] == pytest.approx(dp8.breakdown_gib["activations"], rel=1e-9)
    assert cp8.breakdown_gib["optimizer_states"] == pytest.approx(dp8.breakdown_gib["optimizer_states"], rel=1e-9)


def test_the_first_pipeline_stage_holds_pp_micro_batches_of_checkpoints():
    t = spec(gradient_checkpointing=True, zero_stage=0, gradient_accumulation_steps=8)
    lay = P.Layout(pp=4)
    first, last = P.stages(L8B.num_layers, lay, 8)
    a = phase_components(L8B, t, 1, lay=lay, stage=first)["forward"]["activations"]
    z = phase_components(L8B, t, 1, lay=lay, stage=last)["forward"]["activations"]
    ck = 4 * L8B.hidden_size * 4096  # the fp32 residual checkpoint per layer (autocast)
    assert a == pytest.approx(32 * ck, rel=1e-9)                    # 4 micro-batches x 8 layers
    assert z == pytest.approx(8 * ck + (4 + 4 + 2) * L8B.hidden_size * 4096, rel=1e-9)  # + the final norm


def test_pipeline_bubble_is_pp_minus_one_micro_batches():
    lay = P.Layout(pp=4, dp=2)
    assert P.bubble_micro_batches(lay) == 3 and P.bubble_fraction(lay, 9) == pytest.approx(3 / 12)
    assert P.bubble_micro_batches(P.Layout(pp=4, dp=2, vp=3)) == 1.0
    t = spec(global_batch_size=16)
    few = throughput_estimate(L8B, t.model_copy(update={"pipeline_parallel": 4}), H200, 8, 1, "nvswitch")
    many = throughput_estimate(L8B, t.model_copy(update={"pipeline_parallel": 4, "global_batch_size": 256}), H200,
                               8, 1, "nvswitch")
    assert few.bubble_fraction == pytest.approx(3 / (8 + 3), abs=1e-4)
    assert many.bubble_fraction == pytest.approx(3 / (128 + 3), abs=1e-4)
    assert many.tokens_per_second_per_gpu > few.tokens_per_second_per_gpu


def test_tensor_parallel_communication_by_hand():
    t = spec()
    stage = P.Stage(32, True, True, 32.0, tp=8)
    # 8 all-gathers/reduce-scatters per layer, 4 more recomputed; 7/8 of 4096 x 4096 x 2 bytes each
    by_hand = 32 * 12 * 7 / 8 * 4096 * 4096 * 2 / (360 * 1e9)
    inside = links(P.Layout(tp=8), H200, 8, 1, "nvswitch", "none", None).tp  # Hopper NVSwitch: 360 GB/s
    assert tp_seconds(L8B, t, stage, inside) == pytest.approx(by_hand)
    tp8 = throughput_estimate(L8B, t.model_copy(update={"tensor_parallel": 8}), H200, 8, 1, "nvswitch")
    assert any("tensor parallelism over 8" in lab for lab in tp8.labels)
    # one data-parallel rank: nothing else crosses a link; the all-gathers are the step's communication
    assert tp8.communication_seconds == pytest.approx(by_hand, abs=1e-6)


def test_context_parallel_kv_exchange_hides_under_attention_inside_a_node_not_across():
    t = spec(sequence_length=131072, context_parallel=8, zero_stage=3)
    inside = throughput_estimate(L8B, t, H200, 8, 1, "nvswitch")
    across = throughput_estimate(L8B, t.model_copy(update={"context_parallel": 16}), H200, 8, 2, "nvswitch",
                                 "erdma", 400)
    assert inside.communication_seconds < across.communication_seconds


def test_placement_puts_tp_inside_nodes_and_pp_across():
    lk = links(P.Layout(tp=8, pp=4, dp=2), H200, 8, 8, "nvswitch", "erdma", 400.0)
    assert (lk.tp.inside, lk.tp.nodes) == (8, 1) and (lk.dp.inside, lk.dp.nodes) == (1, 2)
    assert (lk.pp.inside, lk.pp.nodes) == (1, 4)
    assert group_span(16, 1, 1, 8) == (8, 8, 2)


def test_layout_problems_name_the_divisor():
    probs = P.layout_problems(L8B, P.Layout(tp=3, pp=5, cp=3), 4096, gpus=12)
    assert [f for f, _ in probs] == ["tensor_parallel", "pipeline_parallel", "context_parallel", "tensor_parallel"]
    assert "32 attention heads" in probs[0][1] and "32 layers" in probs[1][1] and "2 x 3 = 6" in probs[2][1]
    assert "= 45 must divide the world size (12 GPUs)" in probs[3][1]
    assert not P.layout_problems(L405B, P.Layout(tp=8, pp=8), 8192, 512, even_stages=False)
    assert P.layout_problems(L405B, P.Layout(tp=8, pp=8), 8192, 512)  # Megatron: 126 layers / 8 is uneven
    world = P.layout_problems(L8B, P.Layout(tp=8), 4096, gpus=12)
    assert world == [("tensor_parallel", "tensor_parallel 8 x pipeline_parallel 1 x context_parallel 1 = 8 must divide "
                                         "the world size (12 GPUs)")]
