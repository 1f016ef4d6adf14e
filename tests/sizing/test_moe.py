"""Mixture-of-Experts sizing: memory holds every expert, compute follows the routed ones."""

from __future__ import annotations

import pytest

from trainstack.models import derive_architecture, find_preset
from trainstack.profile import LoraSpec, TrainingSpec
from trainstack.sizing import constants as K
from trainstack.sizing import flops_per_token, memory_estimate, throughput_estimate
from trainstack.sizing.shapes import head_params
from trainstack.sizing.communication import data_parallel_seconds

from test_throughput import H200

MIXTRAL = find_preset("mixtral-8x7b").architecture
DENSE_47B = derive_architecture(MIXTRAL.params / 1e9)   # a dense model of the same total size
FULL = TrainingSpec(method="full", precision="bf16", micro_batch_size=1, sequence_length=4096,
                    gradient_checkpointing=True, zero_stage=3)


def test_dense_twin_has_the_same_total_parameters():
    assert DENSE_47B.params == pytest.approx(MIXTRAL.params, rel=0.01) and not DENSE_47B.is_moe


def test_mixtral_flops_per_token_follow_its_active_parameters():
    f = flops_per_token(MIXTRAL, FULL, recompute=False)
    assert f["linear"] == 6 * (MIXTRAL.active_matmul_params + head_params(MIXTRAL))
    # about 6 x 12.9e9 (Mistral's active count includes the 0.13B embedding lookup, no FLOPs) plus attention
    assert f["linear"] == pytest.approx(6 * 12.9e9, rel=0.02)
    assert f["attention"] == 3 * 2 * 32 * 4096 * 4096
    dense = flops_per_token(DENSE_47B, FULL, recompute=False)
    assert dense["linear"] / f["linear"] > 3.4  # the "about 3.5x too many FLOPs" when sized dense


@pytest.mark.parametrize("nodes, ep", [(1, 1), (2, 8)])
def test_mixtral_runs_at_least_twice_as_fast_as_a_dense_model_of_its_size(nodes, ep):
    # across nodes ZeRO-3 alone would gather every expert each micro-batch (both models network-bound);
    # expert parallelism inside the node is how MoE jobs run there
    moe = throughput_estimate(MIXTRAL, FULL.model_copy(update={"expert_parallel": ep}), H200, gpus_per_node=8,
                              nodes=nodes, interconnect="nvswitch", network="erdma", network_gbps=400)
    dense = throughput_estimate(DENSE_47B, FULL, H200, gpus_per_node=8, nodes=nodes, interconnect="nvswitch",
                                network="erdma", network_gbps=400)
    assert moe.tokens_per_second >= 2 * dense.tokens_per_second
    assert any("MoE: balanced routing assumed" in lab for lab in moe.labels)


def test_mixtral_memory_holds_every_expert():
    one = memory_estimate(MIXTRAL, FULL.model_copy(update={"zero_stage": 0}), 1)
    assert one.breakdown_gib["weights"] == pytest.approx(2 * MIXTRAL.params / K.GIB, rel=1e-3)
    assert one.breakdown_gib["gradients"] == pytest.approx(2 * MIXTRAL.params / K.GIB, rel=1e-3)
    dense = memory_estimate(DENSE_47B, FULL.model_copy(update={"zero_stage": 0}), 1)
    assert one.breakdown_gib["optimizer_states"] == pytest.approx(dense.breakdown_gib["optimizer_states"], rel=0.01)
    eight = memory_estimate(MIXTRAL, FULL, 8)  # ZeRO-3 shards experts like any weight
    assert eight.breakdown_gib["weights"] == pytest.approx(one.breakdown_gib["weights"] / 8, rel=1e-3)


def test_expert_parallelism_divides_expert_memory():
    t = FULL.model_copy(update={"zero_stage": 0})
    base = memory_estimate(MIXTRAL, t, 8)
    ep = memory_estimate(MIXTRAL, t.model_copy(update={"expert_parallel": 8}), 8)
    experts = MIXTRAL.expert_total_params
    expected = 2 * (MIXTRAL.params - experts + experts / 8) / K.GIB
    assert ep.breakdown_gib["weights"] == pytest.approx(expected, rel=1e-3)
    held = ("weights", "optimizer_states")
    assert sum(ep.breakdown_gib[k] for k in held) < sum(base.breakdown_gib[k] for k in held) / 3


def test_expert_parallel_all_to_all_by_hand_and_slower_across_nodes():
    t = FULL.model_copy(update={"zero_stage": 1, "expert_parallel": 8})
    _, _, inside, labels = data_parallel_seconds(MIXTRAL, t, H200, 8, 2, "nvswitch", "erdma", 400.0)
    tokens = 4096
    per_gpu = tokens * 32 * 2 * 4096 * 2 * (4 + 2) * 7 / 8
    assert inside == pytest.approx(per_gpu / (K.INTRA_NODE_GBPS["hopper"] * 1e9))
    assert any("all-to-all" in lab for lab in labels)
    across = t.model_copy(update={"expert_parallel": 16})
    _, _, crossing, _ = data_parallel_seconds(MIXTRAL, across, H200, 8, 2, "nvswitch", "erdma", 400.0)
    assert crossing > inside * 2


def test_lora_on_moe_holds_adapters_on_every_expert_and_computes_the_routed_ones():
    lora = TrainingSpec(method="lora", precision="bf16", lora=LoraSpec(rank=8, targets="all-linear"),
                        micro_batch_size=1, sequence_length=2048)
    mem = memory_estimate(MIXTRAL, lora)
    h, i = 4096, 14336
    per_expert = 8 * ((h + i) + (h + i) + (i + h))
    attention = 8 * ((h + 4096) + (h + 1024) * 2 + (4096 + h))
    assert mem.trainable_params == 32 * (attention + 8 * per_expert)
    f = flops_per_token(MIXTRAL, lora, recompute=False)
    active_adapters = 32 * (attention + 2 * per_expert)
    assert f["linear"] == 4 * (MIXTRAL.active_matmul_params + head_params(MIXTRAL)) + 6 * active_adapters
