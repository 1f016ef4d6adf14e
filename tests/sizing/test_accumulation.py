"""Gradient accumulation (issue 19.4): gradient sync once per optimizer step, ZeRO-3 gathers per micro-batch."""

from __future__ import annotations

import pytest

from trainstack.models import find_preset
from trainstack.profile import TrainingSpec
from trainstack.sizing import constants as K
from trainstack.sizing import throughput_estimate
from trainstack.sizing.communication import data_parallel_seconds
from trainstack.sizing.traffic import optimizer_bytes

from test_throughput import H200

EIGHT_B = find_preset("llama-3-8b").architecture
DDP = TrainingSpec(method="full", precision="bf16", micro_batch_size=1, sequence_length=2048,
                   gradient_checkpointing=True)
NODES = dict(gpus_per_node=8, nodes=4, interconnect="nvswitch", network="erdma", network_gbps=200.0)


def speed(t):
    return throughput_estimate(EIGHT_B, t, H200, **NODES)


@pytest.mark.parametrize("zero", [0, 1, 2])
def test_accumulation_raises_tokens_per_second_when_gradient_sync_is_the_bottleneck(zero):
    t = DDP.model_copy(update={"zero_stage": zero})
    one = speed(t)
    assert one.scaling_efficiency < 0.6  # 4 nodes over 200 Gbit/s eRDMA: communication-bound
    rates = [speed(t.model_copy(update={"gradient_accumulation_steps": g})).tokens_per_second for g in (1, 2, 4, 16)]
    assert rates == sorted(rates) and rates[-1] > 2 * rates[0]


def test_the_step_is_micro_batches_plus_one_sync_by_hand():
    t = DDP.model_copy(update={"gradient_accumulation_steps": 4})
    one = speed(DDP)
    four = speed(t)
    sync, gathers, alltoall, _ = data_parallel_seconds(EIGHT_B, t, H200, 8, 4, "nvswitch", "erdma", 200.0)
    assert gathers == 0 and alltoall == 0
    opt = optimizer_bytes(EIGHT_B, DDP) / (4800e9 * K.BANDWIDTH_EFFICIENCY)
    micro = one.compute_seconds - opt
    exposed = max(sync - K.COMM_OVERLAP * min(sync, micro * 2 / 3), 0.0)
    assert four.step_seconds == pytest.approx(4 * micro + opt + exposed, rel=1e-4)
    assert four.communication_seconds == pytest.approx(one.communication_seconds, rel=1e-4)  # once per step
    assert four.tokens_per_step == 4 * 2048 * 32 and four.accumulation_steps == 4


def test_zero3_gathers_stay_per_micro_batch():
    z3 = DDP.model_copy(update={"zero_stage": 3})
    one, four = speed(z3), speed(z3.model_copy(update={"gradient_accumulation_steps": 4}))
    sync, gathers, _, _ = data_parallel_seconds(EIGHT_B, z3, H200, 8, 4, "nvswitch", "erdma", 200.0)
    assert gathers > 0
    # communication per token falls only by the gradient sync's share; the gathers are paid 4 times
    assert four.communication_seconds > 3 * one.communication_seconds * gathers / (gathers + sync)
    assert four.communication_seconds / 4 > 0.9 * (one.communication_seconds - sync)


def test_global_batch_size_derives_the_accumulation_per_gpu_count():
    t = DDP.model_copy(update={"global_batch_size": 256})
    assert speed(t).accumulation_steps == 8  # 256 / (1 x 32 GPUs)
    single = throughput_estimate(EIGHT_B, t, H200)
    assert single.accumulation_steps == 256 and single.tokens_per_step == 256 * 2048
    odd = throughput_estimate(EIGHT_B, DDP.model_copy(update={"global_batch_size": 100}), H200, **NODES)
    assert odd.accumulation_steps == 4 and any("not a whole number" in lab for lab in odd.labels)


def test_on_one_gpu_accumulation_only_amortises_the_optimizer_step():
    one = throughput_estimate(EIGHT_B, DDP, H200)
    many = throughput_estimate(EIGHT_B, DDP.model_copy(update={"gradient_accumulation_steps": 8}), H200)
    opt = optimizer_bytes(EIGHT_B, DDP) / (4800e9 * K.BANDWIDTH_EFFICIENCY)
    micro = one.step_seconds - opt
    assert many.tokens_per_second / one.tokens_per_second == pytest.approx((micro + opt) / (micro + opt / 8), rel=1e-3)
