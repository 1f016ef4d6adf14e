"""Training speed: matmul FLOPs at the tensor-core peak plus element-wise traffic at HBM speed.

One step on one GPU takes ``flops / (peak * MATMUL_EFFICIENCY) + bytes / (bandwidth *
BANDWIDTH_EFFICIENCY)``: the matrix multiplies (6N-style, from the exact shape, plus causal
attention and the LM head) are compute-bound, while norms, casts, rotary embeddings, SwiGLU's
products, the fp32 softmax over the vocabulary and LoRA's fp32 adapter casts are memory-bound.
That second term is why small models with large vocabularies and LoRA run at a lower model-FLOPs
utilisation than big full fine-tunes. The two efficiencies are the only fitted constants
(constants.py). Data parallelism adds the exposed part of a ring all-reduce of the gradients.

Mixture-of-Experts: FLOPs and per-token traffic follow the experts a token is routed to; expert
parallelism adds the all-to-all that sends tokens to their experts and back (not overlapped).
Gradient accumulation: a step is ``gradient_accumulation_steps`` micro-batches; the gradient
all-reduce (ZeRO-1/2: reduce-scatter + all-gather) and the optimizer run once per step, ZeRO-3's
parameter gathers and the all-to-all once per micro-batch.

The parts, one module each: ``flops`` (FLOPs per token), ``traffic`` (HBM bytes), ``compute_time``
(a micro-batch's seconds at the fitted efficiencies), ``communication`` (model- and data-parallel
traffic over the links between ranks); this module assembles a step: the slowest pipeline stage,
the bubble, the exposed communication.
"""

from __future__ import annotations

import functools
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from ..catalog.models import GpuModel
from ..models import Architecture
from ..profile import TrainingSpec
from ..reasons import Reason
from . import constants as K
from .communication import data_parallel_seconds, model_parallel_labels, model_parallel_seconds
from .compute_time import (
    attention_efficiency, dense_tflops, fp8_matmul_efficiency, matmul_efficiency, micro_seconds, step_terms,
    te_attention_efficiency,
)
from .flops import flops_per_token
from .intervals import estimate_class, fp8_unmeasured, interval
from .links import Links, links
from .parallel import (
    Layout, Stage, bubble_fraction, bubble_micro_batches, expert_degree, layout_for, micro_batches, stages,
)


class ThroughputEstimate(BaseModel):
    """Speed of one training layout on one GPU model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str
    gpus: int
    tokens_per_second_per_gpu: Optional[float] = Field(None, description="None when the GPU's TFLOPS are unknown")
    tokens_per_second: Optional[float] = Field(None, description="Whole cluster")
    step_seconds: Optional[float] = None
    compute_seconds: Optional[float] = Field(None, description="Matmuls + element-wise work of one step")
    communication_seconds: Optional[float] = Field(None, description="Exposed (not overlapped) communication per step")
    accumulation_steps: int = Field(1, description="Micro-batches per optimizer step")
    tokens_per_step: int = Field(0, description="Tokens per optimizer step over all GPUs")
    scaling_efficiency: Optional[float] = Field(None, description="Per-GPU speed vs one GPU alone")
    layout: str = Field("DP 1", description="The parallel layout sized")
    bubble_seconds: Optional[float] = Field(None, description="Pipeline bubble per step (stages idle)")
    bubble_fraction: Optional[float] = Field(None, description="Share of the step the pipeline stages sit idle")
    flops_per_token: float = Field(description="Hardware FLOPs per token (forward, backward, recompute)")
    model_flops_per_token: float = Field(0.0, description="Model FLOPs per token (no recompute): what MFU counts")
    mfu: Optional[float] = Field(None, description="Model FLOPs utilisation: model FLOPs over the dense peak")
    hfu: Optional[float] = Field(None, description="Hardware FLOPs utilisation (recomputation included)")
    peak_tflops: Optional[float] = None
    labels: tuple[str, ...] = ()
    problem: Optional[Reason] = Field(None, description="Why this layout has no speed on these nodes: its ranks "
                                                        "outnumber the GPUs, or no link carries a group of them")
    tokens_per_second_per_gpu_interval: Optional[tuple[float, float]] = Field(
        None, description="Central 80 % interval: the leave-one-source-out errors of the estimate's class "
                          "(sizing/intervals.py)")
    interval_class: Optional[str] = Field(None, description="generation/framework/method/dense-moe")


def throughput_estimate(arch: Architecture, training: TrainingSpec, gpu: GpuModel, gpus_per_node: int = 1,
                        nodes: int = 1, interconnect: str = "nvlink", network: str = "erdma",
                        network_gbps: Optional[float] = None, layout: Optional[Layout] = None) -> ThroughputEstimate:
    """Tokens per second of ``nodes`` x ``gpus_per_node`` GPUs of model ``gpu``: the profile's layout
    (its tensor/pipeline/context degrees; data parallel the rest), or ``layout``."""
    per_node, n = max(1, int(gpus_per_node)), max(1, int(nodes))
    lay = layout or layout_for(training, per_node * n, per_node)
    return _throughput(arch, training, gpu, per_node, n, interconnect, network, network_gbps, lay)


@functools.lru_cache(maxsize=16384)
def _throughput(arch: Architecture, t: TrainingSpec, gpu: GpuModel, per_node: int, nodes: int,
                interconnect: str, network: str, network_gbps: Optional[float],
                lay: Optional[Layout] = None) -> ThroughputEstimate:
    gpus = per_node * nodes
    lay = lay or layout_for(t, gpus, per_node)
    fl = flops_per_token(arch, t)
    model_fl = flops_per_token(arch, t, recompute=False)
    total_flops = fl["linear"] + fl["attention"]
    model_flops = model_fl["linear"] + model_fl["attention"]
    gas = micro_batches(t, lay)
    dp = lay.dp
    tokens = t.micro_batch_size * t.sequence_length
    linear_peak, attn_peak, labels = dense_tflops(gpu, t)
    if gpu.name != K.REFERENCE_GPU:
        labels.append(f"speed on {gpu.name} from its dense TFLOPS and memory bandwidth at the fitted efficiencies "
                      f"of its generation ({gpu.architecture})")
    if arch.is_moe:
        labels.append("MoE: balanced routing assumed; each expert's GEMMs timed at the size a balanced router "
                      "gives it (roofline: FLOPs or operand bytes, whichever is slower)"
                      + ("; transformers' per-expert Python loop priced per kernel launch" if t.framework == "hf"
                         else ""))
    where = f"{gpus} GPU(s)" if lay.trivial else f"{dp} data-parallel rank(s)"
    if t.global_batch_size is not None and t.gradient_accumulation_steps is None \
            and t.global_batch(dp) != t.global_batch_size:
        labels.append(f"global_batch_size {t.global_batch_size} is not a whole number of micro-batches on "
                      f"{where}: {gas} accumulation steps ({t.global_batch(dp)} sequences per step)")
    empty = dict(gpu=gpu.name, gpus=gpus, flops_per_token=total_flops, model_flops_per_token=model_flops,
                 accumulation_steps=gas, tokens_per_step=tokens * gas * dp, layout=lay.label)
    lk = links(lay, gpu, per_node, nodes, interconnect, network, network_gbps)
    if lk.problem is not None:
        return ThroughputEstimate(**empty, labels=(*labels, lk.problem.message), problem=lk.problem)
    if linear_peak is None or attn_peak is None:
        return ThroughputEstimate(**empty, labels=tuple(labels))
    bandwidth = gpu.memory_bandwidth_gbs
    if bandwidth is None:
        bandwidth = 4800.0 * linear_peak / 989.0
        labels.append(f"memory bandwidth of {gpu.name} unknown: assumed in proportion to its TFLOPS")
    if gpu.architecture not in K.MATMUL_EFFICIENCY_BY_ARCH:
        labels.append(f"{gpu.name} ({gpu.architecture}): no calibration for its generation; the Hopper matmul "
                      "efficiency is used (assumption)")
    micro, mp, opt_seconds, stage, _ = pipeline_pace(arch, t, gpu, lay, gas, linear_peak, attn_peak, bandwidth, lk)
    bubble = bubble_micro_batches(lay)
    step_one = gas * micro + opt_seconds
    per_micro, last = mp, mp
    if gpus > 1:
        sync, gathers, alltoall, comm_labels = data_parallel_seconds(arch, t, gpu, per_node, nodes, interconnect,
                                                                     network, network_gbps, lay, stage)
        labels += comm_labels
        backward = micro * 2 / 3
        if lay.pp == 1:
            # every micro-batch: ZeRO-3 gathers (hidden under its backward as far as they go) and the
            # expert all-to-all (on the critical path); the last one also carries the gradient sync
            per_micro += max(gathers - K.COMM_OVERLAP * min(gathers, backward), 0.0) + alltoall
            last += max(gathers + sync - K.COMM_OVERLAP * min(gathers + sync, backward), 0.0) + alltoall
        else:
            # a pipeline stage stays gathered for the step: gathers and the gradient sync once per step
            per_micro += alltoall
            last += max(gathers + sync - K.COMM_OVERLAP * min(gathers + sync, backward), 0.0) + alltoall
        labels += model_parallel_labels(lay, lk)
    bubble_seconds = bubble * (micro + per_micro)
    step = step_one + (gas - 1) * per_micro + last + bubble_seconds
    comm = step - step_one - bubble_seconds
    per_gpu = gas * tokens * dp / step / gpus
    if lay.pp > 1:
        labels.append(f"pipeline: {gas} micro-batch(es) per step over {lay.pp} stages, "
                      f"{bubble_fraction(lay, gas):.0%} of the step idle (the bubble)")
    cls = estimate_class(arch, t, gpu.architecture)
    band = interval("speed", per_gpu, cls, fp8_unmeasured_gpu=fp8_unmeasured(t, gpu.name))
    if band is not None:
        labels.append(f"tokens/s per GPU 80 % interval {band.low:,.0f}-{band.high:,.0f}: leave-one-source-out errors "
                      f"of {band.basis} ({band.rows} rows, {band.sources} sources)")
        labels += band.labels
    return ThroughputEstimate(
        tokens_per_second_per_gpu_interval=(band.low, band.high) if band else None, interval_class=cls.key("speed"),
        **{**empty, "flops_per_token": total_flops}, tokens_per_second_per_gpu=round(per_gpu, 1),
        tokens_per_second=round(per_gpu * gpus, 1), step_seconds=round(step, 6),
        compute_seconds=round(step_one, 6), communication_seconds=round(comm, 6),
        bubble_seconds=round(bubble_seconds, 6), bubble_fraction=round(bubble_fraction(lay, gas), 4),
        scaling_efficiency=round(step_one / step, 4),
        mfu=round(per_gpu * model_flops / (attn_peak * 1e12), 4),
        hfu=round(per_gpu * total_flops / (attn_peak * 1e12), 4), peak_tflops=attn_peak, labels=tuple(labels))


def pipeline_pace(arch: Architecture, t: TrainingSpec, gpu: GpuModel, lay: Layout, gas: int, linear_peak: float,
                  attn_peak: float, bandwidth: float, lk: Links) -> tuple[float, float, float, Stage, dict[str, float]]:
    """The slowest stage, which sets the pipeline's pace: (its micro-batch, the model-parallel
    communication on it over the links ``lk``, the optimizer step, the stage, its terms)."""
    eff, att_eff, te_eff = matmul_efficiency(gpu), attention_efficiency(gpu), te_attention_efficiency(gpu)
    pace = None
    for stage in stages(arch.num_layers, lay, gas):
        terms = step_terms(arch, t, linear_peak, attn_peak, bandwidth, None if lay.trivial else stage,
                           ep=expert_degree(arch, t, lay), matmul_eff=eff, shard=lay.shard)
        micro = micro_seconds(terms, eff, att_eff, te_eff, fp8_matmul_efficiency(gpu))
        attention_seconds = terms["attention"] / att_eff + terms["te_attention"] / te_eff
        mp = model_parallel_seconds(arch, t, lay, stage, lk, attention_seconds)
        opt = terms["optimizer"] / K.BANDWIDTH_EFFICIENCY  # the optimizer step, once per step
        if pace is None or micro + mp > pace[0] + pace[1]:
            pace = (micro, mp, opt, stage, terms)
    assert pace is not None
    return pace
