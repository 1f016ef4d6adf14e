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
"""

from __future__ import annotations

import functools
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from ..catalog.models import GpuModel
from ..models import Architecture
from ..profile import TrainingSpec
from . import constants as K
from .frameworks import LOSS_TRAFFIC, fused_kernels, loss_mode, transformer_engine
from . import parallel as P
from .param_bytes import MIXED, adapter_bytes, param_bytes, trainable_params
from .parallel import (
    Layout, Stage, bubble_fraction, bubble_micro_batches, expert_degree, layout_for, micro_batches, placement,
    ring_seconds, shares, span, stages, tokens_per_gpu,
)
from .shapes import (
    active_matmul_params,
    expert_params,
    head_params,
    lora_layer_shapes,
    lora_params,
    mlp_widths,
    moe_layer_fraction,
    total_matmul_params,
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


# ---- FLOPs ---------------------------------------------------------------------------------

def flops_per_token(arch: Architecture, t: TrainingSpec, recompute: bool = True) -> dict[str, float]:
    """FLOPs per token: ``linear`` (matmuls with weights) and ``attention`` (QK^T and AV).

    Forward is 2 FLOPs per weight a token meets (its routed experts only); backward 4 (input and
    weight gradients), only 2 for a frozen LoRA/QLoRA base (no weight gradient); gradient
    checkpointing recomputes the layers' forward (``recompute=False``: model FLOPs, what MFU counts).
    Causal attention costs 2 * s * q_dim per token and layer forward (half of the full square).
    """
    parts = flop_parts(arch, t, recompute)
    return {"linear": parts["layers"] + parts["head"] + parts["vision"], "attention": parts["attention"]}


def flop_parts(arch: Architecture, t: TrainingSpec, recompute: bool = True) -> dict[str, float]:
    """FLOPs per token by where they run: the decoder ``layers``, the LM ``head`` (last pipeline
    stage), the ``vision`` tower (first stage) and ``attention`` (in the layers)."""
    return dict(_flop_parts(arch, t, recompute))


@functools.lru_cache(maxsize=4096)
def _flop_parts(arch: Architecture, t: TrainingSpec, recompute: bool) -> tuple[tuple[str, float], ...]:
    L, s = arch.num_layers, t.sequence_length
    body = active_matmul_params(arch)
    head = head_params(arch)
    adapters = lora_params(arch, t.adapters, active=True)
    attn_fwd = 2.0 * L * s * arch.q_dim
    frozen = t.adapters is not None
    layers = 2.0 * (body + adapters) + ((2.0 * body + 4.0 * adapters) if frozen else 4.0 * body)
    head_fl = 2.0 * head + (2.0 * head if frozen else 4.0 * head)
    attention = 3.0 * attn_fwd
    if recompute:
        share = recompute_share(t)
        layers += share["linear"] * 2.0 * (body + adapters)
        attention += share["attention"] * attn_fwd
    return (("layers", layers), ("head", head_fl), ("vision", vision_flops_per_token(arch, t)),
            ("attention", attention))


def vision_flops_per_token(arch: Architecture, t: TrainingSpec) -> float:
    """The vision tower's matmuls for ``images_per_sample`` images, spread over the sequence's tokens:
    forward only when it is frozen (LoRA), forward and backward (x3) when trained. An approximation."""
    v = arch.vision
    if v is None or not t.images_per_sample:
        return 0.0
    h, i = v.hidden_size, v.intermediate_size
    matmul = v.num_layers * (4 * h * h + 2 * h * i) + v.projector_params
    passes = 1.0 if t.adapters is not None else 3.0
    return 2.0 * passes * matmul * v.patches * t.images_per_sample / t.sequence_length


def recompute_share(t: TrainingSpec) -> dict[str, float]:
    """How much of the layers' forward is recomputed: all of it with full checkpointing; with
    selective checkpointing, torchtitan's op-level policy recomputes every second matmul (it saves
    the attention outputs), Megatron's recomputes only the attention softmax (flash attention
    recomputes that in its backward anyway)."""
    if t.checkpointing == "full":
        return {"linear": 1.0, "attention": 1.0}
    if t.checkpointing == "selective" and t.framework == "torchtitan":
        # FP8 matmuls (torch._scaled_mm) are not on the save list: all of them are recomputed
        return {"linear": 1.0 if t.precision == "fp8-mixed" else 0.5, "attention": 0.0}
    return {"linear": 0.0, "attention": 0.0}


# ---- element-wise HBM traffic ----------------------------------------------------------------

def elementwise_bytes_per_token(arch: Architecture, t: TrainingSpec, stage: Optional[Stage] = None) -> float:
    """Bytes moved per token by memory-bound kernels (forward x 3 for forward + backward); on a
    pipeline ``stage`` its layers (and the loss on the last), per GPU of its tensor-parallel group."""
    lay = param_bytes(arch, t, 1)
    h, V, L = arch.hidden_size, arch.vocab_size, arch.num_layers
    a = lay.residual
    cast_in = 6 if a == 2 else 0                      # RMSNorm's upcast and downcast of a 16-bit input
    norm = 2 * cast_in + 8 + 4 + 8 + 2 * a            # + pow, mean, scale, weight: per element of h
    per_layer = 2 * norm * h
    per_layer += (38 if lay.autocast else 22) * (arch.q_dim + arch.kv_dim)  # rotary (fp32 under autocast)
    per_layer += 2 * (2 * a + 2) * h                  # two residual adds
    per_layer += sum(10 * w * m for w, m in mlp_widths(arch))  # SiLU and the gate * up product
    if arch.is_moe:                                   # router softmax/top-k, permute and un-permute
        k = arch.num_experts_per_token
        per_layer += moe_layer_fraction(arch) * (12 * arch.num_experts + 4 * 2 * k * h)
    if lay.autocast:
        per_layer += 5 * 6 * h                        # a 16-bit cast of the normed input per projection
    if t.adapters is not None:
        if adapter_bytes(t) == 4:                     # peft: fp32 cast, adapter, scale, add, downcast
            per_layer += sum((10 * i + 28 * o) * m for i, o, m in lora_layer_shapes(arch, t.adapters.targets))
        else:                                         # adapters in the model dtype: scale and add only
            per_layer += sum(10 * o * m for i, o, m in lora_layer_shapes(arch, t.adapters.targets))
    passes = 3 + (1 if t.checkpointing == "full" else 0)
    loss = LOSS_TRAFFIC[loss_mode(t)] * V             # upcast, log-softmax and its gradient over V
    if stage is None:
        return L * per_layer * passes + loss
    return (stage.layers * per_layer * passes + (loss if stage.last else 0.0)) / stage.tp


def per_step_bytes(arch: Architecture, t: TrainingSpec, stage: Optional[Stage] = None) -> float:
    """Traffic paid once per micro-batch: autocast weight casts and NF4 unpacking; and once per
    optimizer step: the optimizer's reads and writes (see :func:`optimizer_bytes`)."""
    lay = param_bytes(arch, t, 1)
    sh = shares(arch, stage) if stage is not None else None
    body = total_matmul_params(arch) * (sh.matmul if sh else 1.0)
    head = head_params(arch) / (stage.tp if stage else 1) if (stage is None or stage.last) else 0.0
    total = 0.0
    if lay.autocast:
        casts = 1 + (1 if t.checkpointing == "full" else 0)
        total += 6.0 * (body * casts + head) + 6.0 * (body + head)
    if t.method == "qlora":
        total += 2.5 * body * (3 if t.checkpointing == "full" else 2)
    return total + optimizer_bytes(arch, t, stage)


def optimizer_bytes(arch: Architecture, t: TrainingSpec, stage: Optional[Stage] = None) -> float:
    """The optimizer step's traffic: weights, gradients and states read and written once (the
    stage's share of them on one GPU)."""
    lay = param_bytes(arch, t, 1)
    n = trainable_params(arch, t)
    if stage is not None:
        sh = shares(arch, stage)
        n = n * (sh.adapters if t.adapters is not None else sh.params)
    w = 4 if (t.adapters is not None or t.precision in MIXED) else 2  # bytes per trainable weight
    state = {"adamw": 2 * 2 * w, "adamw-8bit": 2 * 2, "sgd": 2 * w, "adafactor": 0}[t.optimizer]
    return n * (2 * w + lay.grad_per_param + state)


# ---- the estimate ----------------------------------------------------------------------------

def dense_tflops(gpu: GpuModel, t: TrainingSpec) -> tuple[Optional[float], Optional[float], list[str]]:
    """(matmul peak, attention peak, labels) in TFLOPS for the training precision."""
    labels: list[str] = []
    base = gpu.bf16_tflops
    if base is None and gpu.fp16_tflops is not None:
        base = gpu.fp16_tflops
        labels.append(f"{gpu.name} has no BF16 figure: its dense FP16 {base:g} TFLOPS is used")
    if base is None:
        return None, None, [f"no dense TFLOPS known for {gpu.name}: speed unknown"]
    linear = base
    if t.precision == "fp8-mixed":
        if gpu.fp8_tflops:
            linear = gpu.fp8_tflops
            labels.append("FP8 matmuls assumed to reach the same share of the FP8 peak as BF16 does "
                          "of the BF16 peak (not calibrated)")
        else:
            labels.append(f"{gpu.name} has no FP8: matmuls counted at its 16-bit peak")
    return linear, base, labels


def matmul_efficiency(gpu: GpuModel) -> float:
    """The fitted share of the dense tensor peak the matmuls reach on this GPU generation."""
    return K.MATMUL_EFFICIENCY_BY_ARCH.get(gpu.architecture, K.MATMUL_EFFICIENCY_BY_ARCH["hopper"])


@functools.lru_cache(maxsize=16384)
def stage_work(arch: Architecture, t: TrainingSpec, stage: Optional[Stage] = None
               ) -> tuple[float, float, float, float, int, bool, bool]:
    """One micro-batch's work on one GPU of ``stage``, whatever the GPU: (matmul FLOPs, attention FLOPs,
    element-wise bytes, optimizer-step bytes, layers, fused kernels, Transformer Engine)."""
    fl = flop_parts(arch, t)
    tokens = float(t.micro_batch_size * t.sequence_length)
    if stage is None:
        linear = fl["layers"] + fl["head"] + fl["vision"]
        attention, layers = fl["attention"], arch.num_layers
    else:
        frac = stage.layers / arch.num_layers
        linear = (fl["layers"] * frac + (fl["head"] if stage.last else 0.0)
                  + (fl["vision"] if stage.first else 0.0)) / stage.tp
        attention, layers = fl["attention"] * frac / stage.tp, stage.layers
        tokens /= stage.cp
    optimizer = optimizer_bytes(arch, t, stage)
    micro_bytes = tokens * elementwise_bytes_per_token(arch, t, stage) + per_step_bytes(arch, t, stage) - optimizer
    return (tokens * linear, tokens * attention, micro_bytes, optimizer, layers, fused_kernels(t),
            transformer_engine(t))


def step_terms(arch: Architecture, t: TrainingSpec, linear_tflops: float, attention_tflops: float,
               bandwidth_gbs: float, stage: Optional[Stage] = None) -> dict[str, float]:
    """One micro-batch's work at 100 % of the hardware (seconds), before the fitted efficiencies:
    ``linear`` matmuls, ``attention`` (flash attention's QK^T and AV), ``traffic`` element-wise bytes,
    ``fused_traffic`` the same for stacks with fused/compiled kernels, ``layers`` (the fixed per-layer
    launch cost counts layers), ``optimizer`` the optimizer step's traffic (once per step).
    On a pipeline ``stage`` (and its tensor/context split) the work of one GPU of it. The optimizer
    step's traffic is counted whole on every rank (ZeRO's sharded step is not modelled; the constants
    were fitted so).
    benchmarks/fit_calibration.py fits the efficiencies on these same terms."""
    flops, attention_flops, micro_bytes, optimizer, layers, fused, te = stage_work(arch, t, stage)
    bw = bandwidth_gbs * 1e9
    terms = {"linear": flops / (linear_tflops * 1e12),
             "attention": attention_flops / (attention_tflops * 1e12),
             "traffic": 0.0 if fused else micro_bytes / bw, "fused_traffic": micro_bytes / bw if fused else 0.0,
             "layers": float(layers), "optimizer": optimizer / bw,
             "te_attention": 0.0, "te_traffic": 0.0, "te_layers": 0.0}
    if te:
        # Transformer Engine fuses the element-wise work (norms, rotary, casts, SwiGLU) into its GEMM and
        # attention kernels: what is left of it is in a fixed per-layer cost of its own, and its fused
        # attention has its own efficiency (both fitted on NeMo's performance tables)
        terms.update(te_attention=terms["attention"], te_traffic=micro_bytes / bw, te_layers=float(layers),
                     attention=0.0, traffic=0.0, fused_traffic=0.0, layers=0.0)
    return terms


def attention_efficiency(gpu: GpuModel) -> float:
    """The fitted share of the dense peak flash attention reaches on this GPU generation."""
    return K.ATTENTION_EFFICIENCY_BY_ARCH.get(gpu.architecture, K.ATTENTION_EFFICIENCY_BY_ARCH["hopper"])


def micro_seconds(terms: dict[str, float], matmul_eff: float, attention_eff: float,
                  te_attention_eff: Optional[float] = None) -> float:
    """A micro-batch's time from its terms and the fitted constants (the model the fit script fits)."""
    seconds = (terms["linear"] / matmul_eff + terms["attention"] / attention_eff
               + (terms["traffic"] + K.FUSED_TRAFFIC * terms["fused_traffic"]) / K.BANDWIDTH_EFFICIENCY
               + K.LAYER_OVERHEAD_SECONDS * terms["layers"])
    if terms.get("te_layers"):
        seconds += (terms["te_attention"] / (te_attention_eff or attention_eff)
                    + K.TE_LAYER_OVERHEAD_SECONDS * terms["te_layers"])
    return seconds


def te_attention_efficiency(gpu: GpuModel) -> float:
    """Transformer Engine's fused attention: its fitted share of the dense peak (Hopper); other
    generations run flash attention's."""
    return K.TE_ATTENTION_EFFICIENCY_BY_ARCH.get(gpu.architecture, attention_efficiency(gpu))


def throughput_estimate(arch: Architecture, training: TrainingSpec, gpu: GpuModel, gpus_per_node: int = 1,
                        nodes: int = 1, interconnect: str = "nvlink", network: str = "erdma",
                        network_gbps: Optional[float] = None, layout: Optional[Layout] = None) -> ThroughputEstimate:
    """Tokens per second of ``nodes`` x ``gpus_per_node`` GPUs of model ``gpu``: the profile's layout
    (its tensor/pipeline/context degrees; data parallel the rest), or ``layout``."""
    per_node, n = max(1, int(gpus_per_node)), max(1, int(nodes))
    lay = layout or layout_for(training, per_node * n)
    return _throughput(arch, training, gpu, per_node, n, interconnect, network, network_gbps, lay)


@functools.lru_cache(maxsize=16384)
def _throughput(arch: Architecture, t: TrainingSpec, gpu: GpuModel, per_node: int, nodes: int,
                interconnect: str, network: str, network_gbps: Optional[float],
                lay: Optional[Layout] = None) -> ThroughputEstimate:
    gpus = per_node * nodes
    lay = lay or layout_for(t, gpus)
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
        labels.append("MoE expert matmuls assumed to run at the dense matmul efficiency (grouped GEMMs "
                      "of small experts may run slower; not calibrated)")
    where = f"{gpus} GPU(s)" if lay.trivial else f"{dp} data-parallel rank(s)"
    if t.global_batch_size is not None and t.gradient_accumulation_steps is None \
            and t.global_batch(dp) != t.global_batch_size:
        labels.append(f"global_batch_size {t.global_batch_size} is not a whole number of micro-batches on "
                      f"{where}: {gas} accumulation steps ({t.global_batch(dp)} sequences per step)")
    empty = dict(gpu=gpu.name, gpus=gpus, flops_per_token=total_flops, model_flops_per_token=model_flops,
                 accumulation_steps=gas, tokens_per_step=tokens * gas * dp, layout=lay.label)
    if linear_peak is None or attn_peak is None:
        return ThroughputEstimate(**empty, labels=tuple(labels))
    bandwidth = gpu.memory_bandwidth_gbs
    if bandwidth is None:
        bandwidth = 4800.0 * linear_peak / 989.0
        labels.append(f"memory bandwidth of {gpu.name} unknown: assumed in proportion to its TFLOPS")
    if gpu.architecture not in K.MATMUL_EFFICIENCY_BY_ARCH:
        labels.append(f"{gpu.name} ({gpu.architecture}): no calibration for its generation; the Hopper matmul "
                      "efficiency is used (assumption)")
    bus, node_bw, _ = _links(gpu, interconnect, network, network_gbps, nodes)
    micro, mp, opt_seconds, stage, _ = pipeline_pace(arch, t, gpu, lay, gas, linear_peak, attn_peak, bandwidth,
                                                     per_node, bus, node_bw)
    bubble = bubble_micro_batches(lay)
    step_one = gas * micro + opt_seconds
    per_micro, last = mp, mp
    if gpus > 1:
        sync, gathers, alltoall, comm_labels = _comm_seconds(arch, t, gpu, per_node, nodes, interconnect,
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
        labels += model_parallel_labels(lay, per_node)
    bubble_seconds = bubble * (micro + per_micro)
    step = step_one + (gas - 1) * per_micro + last + bubble_seconds
    comm = step - step_one - bubble_seconds
    per_gpu = gas * tokens * dp / step / gpus
    if lay.pp > 1:
        labels.append(f"pipeline: {gas} micro-batch(es) per step over {lay.pp} stages, "
                      f"{bubble_fraction(lay, gas):.0%} of the step idle (the bubble)")
    return ThroughputEstimate(
        **{**empty, "flops_per_token": total_flops}, tokens_per_second_per_gpu=round(per_gpu, 1),
        tokens_per_second=round(per_gpu * gpus, 1), step_seconds=round(step, 6),
        compute_seconds=round(step_one, 6), communication_seconds=round(comm, 6),
        bubble_seconds=round(bubble_seconds, 6), bubble_fraction=round(bubble_fraction(lay, gas), 4),
        scaling_efficiency=round(step_one / step, 4),
        mfu=round(per_gpu * model_flops / (attn_peak * 1e12), 4),
        hfu=round(per_gpu * total_flops / (attn_peak * 1e12), 4), peak_tflops=attn_peak, labels=tuple(labels))


def pipeline_pace(arch: Architecture, t: TrainingSpec, gpu: GpuModel, lay: Layout, gas: int, linear_peak: float,
                  attn_peak: float, bandwidth: float, per_node: int, bus: float, node_bw: float
                  ) -> tuple[float, float, float, Stage, dict[str, float]]:
    """The slowest stage, which sets the pipeline's pace: (its micro-batch, the model-parallel
    communication on it, the optimizer step, the stage, its terms)."""
    eff, att_eff, te_eff = matmul_efficiency(gpu), attention_efficiency(gpu), te_attention_efficiency(gpu)
    pace = None
    for stage in stages(arch.num_layers, lay, gas):
        terms = step_terms(arch, t, linear_peak, attn_peak, bandwidth, None if lay.trivial else stage)
        micro = micro_seconds(terms, eff, att_eff, te_eff)
        attention_seconds = terms["attention"] / att_eff + terms["te_attention"] / te_eff
        mp = model_parallel_seconds(arch, t, lay, stage, per_node, bus, node_bw, attention_seconds)
        opt = terms["optimizer"] / K.BANDWIDTH_EFFICIENCY  # the optimizer step, once per step
        if pace is None or micro + mp > pace[0] + pace[1]:
            pace = (micro, mp, opt, stage, terms)
    assert pace is not None
    return pace


def model_parallel_seconds(arch: Architecture, t: TrainingSpec, lay: Layout, stage: Stage, per_node: int,
                           bus: float, node_bw: float, attention_seconds: float) -> float:
    """Tensor-, context- and pipeline-parallel communication of one micro-batch on ``stage``, exposed:
    tensor parallelism and the pipeline's sends are on the critical path; context parallelism's K/V
    exchange hides under the attention compute as far as COMM_OVERLAP allows."""
    if lay.trivial:
        return 0.0
    where = placement(lay, per_node)
    seconds = P.tp_seconds(arch, t, stage, bus) * K.TP_COMM_EXPOSED
    if lay.cp > 1:
        link = P.link_bytes_per_second(where["cp"][1] == 1, bus, node_bw, per_node)
        cp = P.cp_seconds(arch, t, stage, link)
        seconds += max(cp - K.COMM_OVERLAP * min(cp, attention_seconds), 0.0)
    if lay.pp > 1:
        link = P.link_bytes_per_second(where["pp"][1] == 1, bus, node_bw, per_node)
        seconds += P.pp_seconds(arch, t, stage, link, lay.vp)
    return seconds


def model_parallel_labels(lay: Layout, per_node: int) -> list[str]:
    out = []
    where = placement(lay, per_node)
    if lay.tp > 1:
        out.append(f"tensor parallelism over {lay.tp} GPUs inside a node: sequence-parallel all-gathers and "
                   "reduce-scatters per layer on the critical path (hand model, not calibrated)")
    if lay.cp > 1:
        out.append(f"context parallelism over {lay.cp} GPUs ({'inside a node' if where['cp'][1] == 1 else 'across nodes'}): "
                   "K/V all-gathers per layer hidden under attention as far as they go (hand model)")
    if lay.pp > 1:
        out.append(f"pipeline parallelism over {lay.pp} stages "
                   f"({'inside a node' if where['pp'][1] == 1 else 'across nodes'}): activations sent between "
                   "stages per micro-batch (hand model)")
    return out


def _links(gpu: GpuModel, interconnect: str, network: str, network_gbps: Optional[float],
           nodes: int) -> tuple[float, float, list[str]]:
    """(bus GB/s per GPU inside a node, node network bytes/s, labels)."""
    labels: list[str] = []
    if interconnect in ("nvlink", "nvswitch"):
        bus = K.INTRA_NODE_GBPS.get(gpu.architecture, K.NVLINK_DEFAULT_GBPS)
    else:
        bus = K.PCIE_GBPS
        labels.append(f"GPUs inside a node talk over PCIe ({interconnect}): about {bus:g} GB/s")
    node_bw = 0.0
    if nodes > 1:
        kind = network if network in K.NETWORK_EFFICIENCY else "tcp"
        if kind != network:
            labels.append(f"node network {network!r}: assumed TCP")
        gbits = network_gbps or K.DEFAULT_NETWORK_GBITS[kind]
        if network_gbps is None:
            labels.append(f"node network bandwidth unknown: assumed {gbits:g} Gbit/s {kind}")
        node_bw = gbits / 8 * 1e9 * K.NETWORK_EFFICIENCY[kind]
    return bus, node_bw, labels


def _comm_seconds(arch: Architecture, t: TrainingSpec, gpu: GpuModel, per_node: int, nodes: int,
                  interconnect: str, network: str, network_gbps: Optional[float],
                  lay: Optional[Layout] = None, stage: Optional[Stage] = None
                  ) -> tuple[float, float, float, list[str]]:
    """(gradient sync per step, ZeRO-3 gathers per micro-batch, expert all-to-all per micro-batch, labels).

    Gradient sync is a ring all-reduce of this GPU's gradients (ZeRO-1/2/3: reduce-scatter +
    all-gather, the same volume) over the dp x cp ranks holding the same weights; expert gradients
    are reduced only among the ranks that hold the same experts. ZeRO-3 gathers the 16-bit weights
    for the forward and again for the backward; a frozen LoRA base is gathered too. The all-to-all
    sends each token to its k experts and back, forward and backward (and again when checkpointing
    recomputes), (ep - 1) / ep of it off the GPU.
    """
    gpus = per_node * nodes
    lay = lay or layout_for(t, gpus)
    if stage is None:
        stage = stages(arch.num_layers, lay, micro_batches(t, lay))[-1]
    blay = param_bytes(arch, t, gpus)
    bus, node_bw, labels = _links(gpu, interconnect, network, network_gbps, nodes)
    labels.insert(0, "multi-GPU speed uses a ring all-reduce model of gradient sync (not calibrated)")
    sh = shares(arch, stage)
    ep = expert_degree(arch, t, lay)
    inside, across = span(lay.shard, lay.tp, per_node)
    grad_bytes = trainable_params(arch, t) * blay.grad_per_param * (sh.adapters if t.adapters else sh.params)
    if ep > 1 and t.adapters is None:
        frac = expert_params(arch) / arch.params
        grad_bytes = grad_bytes * (1 - frac) + grad_bytes * frac / ep
    sync = ring_seconds(grad_bytes, inside, across, bus, node_bw, per_node) if lay.shard > 1 else 0.0
    if t.zero_stage >= 3:
        sync /= 2  # a reduce-scatter only: the weights are all-gathered before use (below), not after the step
    gathers = 0.0
    if t.zero_stage >= 3 and lay.shard > 1:
        weights = 2.0 * (arch.params if t.adapters is not None else trainable_params(arch, t)) * sh.params
        if ep > 1:
            frac = expert_params(arch) / arch.params
            weights = weights * (1 - frac) + weights * frac / ep
        # two all-gathers (forward, backward), each (n-1)/n of the buffer: a ring's worth
        gathers = ring_seconds(weights, inside, across, bus, node_bw, per_node)
    alltoall = 0.0
    if ep > 1:
        passes = 4 + (2 if t.checkpointing == "full" else 0)
        k, h = arch.num_experts_per_token, arch.hidden_size
        moe_layers = arch.moe_layers * stage.layers / arch.num_layers
        per_gpu = (tokens_per_gpu(t, stage) / stage.tp * moe_layers * k * h * 2.0 * passes * (ep - 1) / ep)
        room = max(1, per_node // lay.tp)
        inside_ep = min(ep, room)
        cross = (ep - inside_ep) / ep if ep > room else 0.0
        alltoall = per_gpu * (1 - cross) / (bus * 1e9)
        if cross:
            alltoall += per_gpu * cross / (node_bw / per_node)
        labels.append(f"expert parallelism over {ep} GPUs: all-to-all of routed tokens, not overlapped "
                      "(hand model, not calibrated)")
    return sync, gathers, alltoall, labels


def _sync_seconds(arch: Architecture, t: TrainingSpec, gpu: GpuModel, per_node: int, nodes: int,
                  interconnect: str, network: str, network_gbps: Optional[float]) -> tuple[float, list[str]]:
    """All communication of one step with one micro-batch (gradient sync + ZeRO-3 gathers + all-to-all)."""
    sync, gathers, alltoall, labels = _comm_seconds(arch, t, gpu, per_node, nodes, interconnect, network,
                                                    network_gbps)
    return sync + gathers + alltoall, labels
