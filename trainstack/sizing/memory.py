"""Peak GPU memory of one training step, counted tensor by tensor.

The model follows what PyTorch really keeps alive in the calibrated setting (HF transformers
Llama, SDPA flash attention, peft LoRA, fused AdamW, bf16 autocast, loss over full-vocabulary
logits upcast to fp32; see tests/data/calibration/README.md) and takes the *maximum over the
phases of a step*, not a sum of everything:

* ``forward``: end of the forward pass, while the loss is computed (autocast's bf16 weight
  cache is still alive, the previous step's logits are still held by the caller);
* ``backward_start``: the log-softmax backward over the full vocabulary, with every saved
  activation still alive and no gradient allocated yet (``zero_grad(set_to_none=True)``);
* ``recompute``: with gradient checkpointing, one layer recomputed while gradients accumulate;
* ``backward_end``: every gradient allocated, activations freed, the optimizer about to step.

Byte counts per token and layer are derived in docs/sizing.md; the one fitted term is
``AUTOCAST_KV_EXTRA_BYTES`` (constants.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional
from pydantic import BaseModel, ConfigDict, Field

from ..models import Architecture
from ..profile import LoraSpec, TrainingSpec
from . import constants as K
from .frameworks import DTENSOR_LOSS_PARALLEL_BYTES, KEPT_OUTPUT_BYTES, LOSS_BYTES, framework, loss_mode
from .parallel import Layout, Stage, expert_degree, layout_for, micro_batches, shares, stages, tokens_per_gpu
from .shapes import (
    biggest_linear,
    expert_params,
    factored_state_elements,
    head_params,
    largest_layer_matmul_params,
    layer_matmul_params,
    lora_factored_state_elements,
    lora_layer_shapes,
    lora_params,
    mlp_widths,
    moe_layer_fraction,
    total_matmul_params,
)

MIXED = ("bf16-mixed", "fp16-mixed", "fp8-mixed")

#: Breakdown keys, in display order.
COMPONENTS = ("weights", "quantization_constants", "lora_adapters", "optimizer_states", "gradients",
              "autocast_weight_copies", "activations", "logits_and_loss", "communication_buffers",
              "temporaries")

PHASE_LABELS = {
    "forward": "end of forward (loss over the full vocabulary)",
    "backward_start": "start of backward (log-softmax gradient over the full vocabulary)",
    "recompute": "backward, recomputing a checkpointed layer",
    "backward_end": "end of backward / optimizer step (all gradients alive)",
}


class MemoryEstimate(BaseModel):
    """GPU-independent memory need of one data-parallel rank."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    peak_gib_per_gpu: float = Field(description="Peak of allocated tensors, like torch.cuda.max_memory_allocated")
    reserved_gib_per_gpu: float = Field(description="Peak the caching allocator holds, like "
                                                    "torch.cuda.max_memory_reserved")
    required_gib_per_gpu: float = Field(description="reserved + CUDA context (+ NCCL buffers with more than one GPU): "
                                                    "what must fit")
    allocator: str = Field("default", description="default | expandable (PYTORCH_CUDA_ALLOC_CONF=expandable_segments)")
    breakdown_gib: dict[str, float] = Field(description="What is alive at the peak; sums to the peak")
    peak_phase: str
    phases_gib: dict[str, float] = Field(description="Peak of each phase of the step")
    params: int
    trainable_params: int
    data_parallel: int = Field(description="Data-parallel ranks (the GPUs divided by tensor x pipeline x context)")
    tokens_per_micro_batch: int
    layout: str = Field("DP 1", description="The parallel layout sized (tensor, pipeline, context, expert, data)")
    peak_stage: Optional[str] = Field(None, description="With pipeline parallelism: the stage reported (first, "
                                                        "middle, last)")
    micro_batches_in_flight: float = Field(1.0, description="Micro-batches whose activations that stage holds")


@dataclass(frozen=True)
class _Layout:
    """Bytes per parameter or element for one precision/method/ZeRO combination."""

    weights: float          # total bytes of the held (base) weights
    quant_constants: float  # QLoRA blockwise constants
    grad_per_param: float   # bytes per trainable parameter
    state_bytes: float      # total optimizer-state bytes (incl. ZeRO's fp32 master copy)
    adapter_weights: float  # LoRA adapter weights
    residual: int           # bytes per element of the residual stream (fp32 under autocast)
    linear_input: int       # bytes per element of a saved matmul input (1 with FP8)
    autocast: bool          # per-op casts of activations and a cached 16-bit copy of each weight


def memory_estimate(arch: Architecture, training: TrainingSpec, gpus: int = 1,
                    allocator: str = "default", weights_cast_on_gpu: bool = False,
                    keeps_outputs: Optional[bool] = None, layout: Optional[Layout] = None) -> MemoryEstimate:
    """Peak, reserved and required memory per GPU of a job on ``gpus`` GPUs: the profile's layout
    (its tensor/pipeline/context degrees; data parallel the rest, ZeRO shards over it), or ``layout``.
    With pipeline parallelism the stage that needs the most is reported.

    ``allocator``: ``default`` (PyTorch's caching allocator as it ships, what the calibration
    measured) or ``expandable`` (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``; modelled, not
    measured). ``weights_cast_on_gpu``: the model was built or loaded in fp32 on the GPU and cast to
    16 bits there (the calibration harness does this; ``from_pretrained(torch_dtype=...)`` does not).
    ``keeps_outputs``: the loop holds each step's outputs (``out = model(...)``, as the calibration
    harness does) until the next step replaces them; default: the framework's (none keep them).
    """
    lay = layout or layout_for(training, max(1, int(gpus)))
    return _memory(arch, training, lay, allocator, bool(weights_cast_on_gpu), keeps_outputs)


@functools.lru_cache(maxsize=16384)
def _memory(arch: Architecture, t: TrainingSpec, lay: Layout, allocator: str = "default",
            cast_on_gpu: bool = False, keeps_outputs: Optional[bool] = None) -> MemoryEstimate:
    best = None
    m = micro_batches(t, lay)
    for stage in stages(arch.num_layers, lay, m):
        phases = phase_components(arch, t, lay.shard, keeps_outputs, lay=lay, stage=stage)
        name = max(phases, key=lambda p: sum(phases[p].values()))
        reserved = reserved_bytes(arch, t, lay.shard, phases[name], allocator, cast_on_gpu, lay=lay, stage=stage)
        if best is None or reserved > best[0]:
            best = (reserved, stage, phases, name)
    assert best is not None
    reserved, stage, phases, name = best
    peak = sum(phases[name].values())
    required = reserved + K.CUDA_CONTEXT_GIB * K.GIB
    if lay.world > 1:
        required += K.NCCL_BUFFERS_GIB * K.GIB
    return MemoryEstimate(
        peak_gib_per_gpu=round(peak / K.GIB, 3), reserved_gib_per_gpu=round(reserved / K.GIB, 3),
        required_gib_per_gpu=round(required / K.GIB, 3), allocator=allocator,
        breakdown_gib={k: round(phases[name].get(k, 0.0) / K.GIB, 3) for k in COMPONENTS},
        peak_phase=name, phases_gib={p: round(sum(v.values()) / K.GIB, 3) for p, v in phases.items()},
        params=arch.params, trainable_params=trainable_params(arch, t), data_parallel=lay.dp,
        tokens_per_micro_batch=t.micro_batch_size * t.sequence_length, layout=lay.label,
        peak_stage=None if lay.pp == 1 else ("first" if stage.first else "last" if stage.last else "middle"),
        micro_batches_in_flight=round(stage.act_layers / max(1, stage.layers), 3))


#: Tensors allocated once and held through every step (the rest of the peak comes and goes).
STATIC = ("weights", "quantization_constants", "optimizer_states", "lora_adapters", "communication_buffers")


def reserved_bytes(arch: Architecture, t: TrainingSpec, dp: int, at_peak: dict[str, float],
                   allocator: str = "default", cast_on_gpu: bool = False, lay: Optional[Layout] = None,
                   stage: Optional[Stage] = None) -> float:
    """What the caching allocator holds at the peak: the held tensors, plus the step's coming and
    going tensors with the free-but-cached blocks they leave (a share of them; with full checkpointing
    also a share of one recomputed layer and, under autocast, of the re-made weight copies, which churn
    most), plus blocks freed before training that the step cannot reuse. Fitted on the H200 rows' peak_reserved as an upper envelope
    (constants.py); ``expandable`` segments are assumed to leave almost nothing cached."""
    static = sum(at_peak.get(k, 0.0) for k in STATIC)
    peak = sum(at_peak.values())
    dynamic = peak - static
    if allocator == "expandable":
        return peak + K.EXPANDABLE_SLACK * dynamic
    if t.checkpointing != "full":
        reserved = static + K.FRAG_DYNAMIC * dynamic
    else:
        # recomputing a layer re-creates its activations and, under autocast, its bf16 weight copies
        sh = shares(arch, stage) if stage is not None else None
        copies = 2.0 * total_matmul_params(arch) * (sh.matmul if sh else 1.0) if layout(arch, t, dp).autocast else 0.0
        reserved = (static + K.FRAG_DYNAMIC_CHECKPOINTED * dynamic
                    + K.FRAG_RECOMPUTE_LAYERS * _one_layer(arch, t, dp, stage) + K.FRAG_AUTOCAST_COPIES * copies)
    if cast_on_gpu and t.precision == "bf16":
        # a 4-byte build cast to 2 bytes frees 2 bytes per parameter in parameter-sized blocks; gradients,
        # optimizer states and (unchecked) activations of those sizes reuse them, the rest stays cached
        reusable = at_peak.get("gradients", 0.0) + at_peak.get("optimizer_states", 0.0)
        if t.checkpointing == "none":
            reusable += at_peak.get("activations", 0.0)
        held = arch.params * (shares(arch, stage).params if stage is not None else 1.0)
        reserved += K.BUILD_RESIDUE_KEPT * max(0.0, 2.0 * held - reusable)
    return reserved


def _one_layer(arch: Architecture, t: TrainingSpec, dp: int, stage: Optional[Stage] = None) -> float:
    """One layer's activations for the micro-batch on one GPU (what a checkpointed layer recomputes)."""
    lay = layout(arch, t, dp)
    T = t.micro_batch_size * t.sequence_length
    if stage is not None and (stage.tp > 1 or stage.cp > 1):
        T = tokens_per_gpu(t, stage) / stage.tp
    if t.adapters is not None:
        return lora_layer_bytes(arch, t.adapters, ab=adapter_bytes(t)) * T
    return full_layer_bytes(arch, lay) * T


@functools.lru_cache(maxsize=8192)
def trainable_params(arch: Architecture, t: TrainingSpec) -> int:
    return lora_params(arch, t.adapters) if t.adapters else arch.params


# ---- per-parameter state -------------------------------------------------------------------

def _optimizer_bytes(arch: Architecture, t: TrainingSpec, state_elem_bytes: float) -> float:
    """Optimizer states over the trainable parameters (before any ZeRO sharding)."""
    n = trainable_params(arch, t)
    if t.optimizer == "adamw":
        return 2 * state_elem_bytes * n
    if t.optimizer == "adamw-8bit":
        return 2 * K.ADAM8BIT_BYTES_PER_STATE * n
    if t.optimizer == "sgd":
        return state_elem_bytes * n  # one momentum buffer
    elems = lora_factored_state_elements(arch, t.adapters) if t.adapters else factored_state_elements(arch)
    return 4.0 * elems  # adafactor: fp32 row and column statistics, no first moment


def adapter_bytes(t: TrainingSpec) -> int:
    """peft keeps LoRA adapters in fp32 on a bf16 base; torchtune and litgpt keep them in the model dtype."""
    return K.ADAPTER_BYTES if t.framework == "hf" else 2


@functools.lru_cache(maxsize=8192)
def layout(arch: Architecture, t: TrainingSpec, dp: int) -> _Layout:
    p = arch.params
    mixed = t.precision in MIXED
    lin_in = 1 if t.precision == "fp8-mixed" else 2
    if t.adapters is not None:  # frozen 16-bit (or NF4) base; adapters in fp32 (peft) or bf16
        n = lora_params(arch, t.adapters)
        ab = adapter_bytes(t)
        residual = 2
        if t.method == "qlora":
            packed = total_matmul_params(arch)
            # peft's prepare_model_for_kbit_training casts every non-quantised parameter (embeddings,
            # LM head, norms) to fp32, so the residual stream runs in fp32 too
            upcast = framework(t).qlora_upcast
            weights = packed * K.NF4_BYTES_PER_PARAM + (p - packed) * (4 if upcast else 2)
            quant = packed * K.NF4_CONSTANT_BYTES_PER_PARAM
            residual = 4 if upcast else 2
        else:
            weights, quant = 2.0 * p, 0.0
        return _Layout(weights=weights, quant_constants=quant, grad_per_param=ab,
                       state_bytes=_optimizer_bytes(arch, t, ab),
                       adapter_weights=ab * n, residual=residual, linear_input=lin_in, autocast=False)
    if t.zero_stage >= 3 and mixed and framework(t).fsdp_fp32_params:
        # FSDP2 mixed precision (pytorch 01d5c2cc8ac53ec6f45d10e2b90f7387df1f1ac4
        # torch/distributed/fsdp/_fully_shard/_fsdp_api.py MixedPrecisionPolicy): the sharded parameters stay
        # in fp32 and are the optimizer's ("does not require any extra memory to keep a high-precision copy"),
        # cast to bf16 only when all-gathered; gradients are reduced in reduce_dtype (fp32) into fp32 shards.
        return _Layout(weights=4.0 * p, quant_constants=0.0, grad_per_param=4,
                       state_bytes=_optimizer_bytes(arch, t, 4), adapter_weights=0.0, residual=2,
                       linear_input=lin_in, autocast=False)
    if t.zero_stage >= 1:
        # DeepSpeed / ZeRO paper layout: 16-bit working weights and gradients; the fp32 master copy
        # (mixed precision) lives with the optimizer states and is sharded with them.
        master = 4.0 * p if mixed else 0.0
        return _Layout(weights=2.0 * p, quant_constants=0.0, grad_per_param=2,
                       state_bytes=master + _optimizer_bytes(arch, t, 4 if mixed else 2),
                       adapter_weights=0.0, residual=2, linear_input=lin_in, autocast=False)
    if mixed:  # torch autocast: fp32 weights, gradients and states; bf16 copies made per forward
        return _Layout(weights=4.0 * p, quant_constants=0.0, grad_per_param=4,
                       state_bytes=_optimizer_bytes(arch, t, 4), adapter_weights=0.0,
                       residual=4, linear_input=lin_in, autocast=True)
    return _Layout(weights=2.0 * p, quant_constants=0.0, grad_per_param=2,
                   state_bytes=_optimizer_bytes(arch, t, 2), adapter_weights=0.0,
                   residual=2, linear_input=2, autocast=False)


# ---- activations (bytes per token) ---------------------------------------------------------

def _attention_core(arch: Architecture) -> int:
    """SDPA (flash) saves q, k, v and its output in 16 bits plus an fp32 log-sum-exp per head."""
    return 2 * (2 * arch.q_dim + 2 * arch.kv_dim) + 4 * arch.num_attention_heads


def _mlp_full(arch: Architecture, lin_in: int) -> float:
    """SwiGLU keeps gate (for SiLU), act and up (for the product) and the product (down_proj's input),
    for every MLP a token passes through (MoE: its routed experts and the shared ones)."""
    return sum(m * (3 * 2 * w + lin_in * w) for w, m in mlp_widths(arch)) + _routing_bytes(arch)


def _routing_bytes(arch: Architecture) -> float:
    """MoE layers per token: fp32 router logits and probabilities (8 E), the token's copy sent to each
    routed expert and each expert's output kept for the weighted sum (2 x 2 k h). A hand count."""
    if not arch.is_moe:
        return 0.0
    k, h = arch.num_experts_per_token, arch.hidden_size
    return moe_layer_fraction(arch) * (8 * arch.num_experts + 4 * k * h)


def full_layer_bytes(arch: Architecture, lay: _Layout) -> float:
    """One decoder layer, every weight trainable, no checkpointing."""
    h, a, m = arch.hidden_size, lay.residual, lay.linear_input
    # RMSNorm keeps its fp32 input (for pow/mul) and the normalised tensor (for the weight's
    # gradient), in the residual dtype. Its output feeds the projections: one shared 16-bit tensor,
    # or, under autocast, one cast per consuming linear (3 for q/k/v, 2 for gate/up).
    norm = 4 * h + a * h
    consumers_attn, consumers_mlp = (3, 2) if lay.autocast else (1, 1)
    extra = K.AUTOCAST_KV_EXTRA_BYTES * arch.kv_dim if lay.autocast else 0
    return (2 * norm + (consumers_attn + consumers_mlp) * m * h
            + _attention_core(arch) + _mlp_full(arch, m) + extra)


def lora_layer_bytes(arch: Architecture, lora: LoraSpec, first: bool = False, ab: int = K.ADAPTER_BYTES) -> float:
    """One decoder layer with a frozen base and peft adapters (fp32) on the target linears.

    Frozen norms keep only their fp32 input; frozen linears keep nothing of their input; each
    adapter casts its input to fp32 and keeps that copy (for lora_A's gradient) plus lora_A's
    output. In the first layer without checkpointing nothing before the adapters needs a gradient.
    """
    h = arch.hidden_size
    adapters = sum(ab * (i + lora.rank) * m for i, _, m in lora_layer_shapes(arch, lora.targets))
    norms = (1 if first else 2) * 4 * h
    # gate, act and up kept by SiLU and the product; the frozen down_proj keeps nothing
    mlp = sum(m * 3 * 2 * w for w, m in mlp_widths(arch)) + _routing_bytes(arch)
    return norms + adapters + _attention_core(arch) + mlp


def final_norm_bytes(arch: Architecture, t: TrainingSpec, lay: _Layout) -> int:
    h = arch.hidden_size
    if t.adapters is not None:
        return 4 * h  # frozen norm and frozen LM head: only the fp32 input
    return 4 * h + lay.residual * h + lay.linear_input * h


def selective_layer_bytes(arch: Architecture, t: TrainingSpec, lay: _Layout, full: float) -> float:
    """Selective activation checkpointing. torchtitan's op-level policy saves the attention (SDPA)
    outputs and every second matmul output and recomputes the rest: the layer input, the attention
    core and half the matmul outputs in 16 bits. Megatron/NeMo 'selective' recomputes only the
    attention softmax, which flash attention never keeps: the full set. A hand count."""
    if t.framework != "torchtitan":
        return full
    h, inter = arch.hidden_size, sum(w * m for w, m in mlp_widths(arch))
    outputs = 2 * (arch.q_dim + 2 * arch.kv_dim + 2 * h + 2 * inter)
    if t.precision == "fp8-mixed":
        outputs = 0  # Float8Linear runs torch._scaled_mm, which the save list (aten.mm) does not name
    return lay.residual * h + _attention_core(arch) + outputs / 2


def checkpoint_bytes(arch: Architecture, lay: _Layout) -> int:
    """Gradient checkpointing keeps each layer's input (the residual stream)."""
    return lay.residual * arch.hidden_size


# ---- phases ----------------------------------------------------------------------------------

def phase_components(arch: Architecture, t: TrainingSpec, dp: int, keeps_outputs: Optional[bool] = None,
                     lay: Optional[Layout] = None, stage: Optional[Stage] = None) -> dict[str, dict[str, float]]:
    """Bytes alive per component at each phase's high point on one GPU of ``stage`` (default: the
    whole model on one of ``dp`` data-parallel GPUs)."""
    if lay is None:
        lay = Layout(dp=max(1, dp), ep=t.expert_parallel)
    if stage is None:
        stage = stages(arch.num_layers, lay, micro_batches(t, lay))[0]
    blay = layout(arch, t, lay.shard)
    sh = shares(arch, stage)
    L, V = arch.num_layers, arch.vocab_size
    tp = stage.tp
    T = tokens_per_gpu(t, stage) / tp          # sequence parallelism: every activation is split over tp
    A = stage.act_layers                       # layers' activations of one micro-batch alive at once
    zero = t.zero_stage
    shard = lay.shard
    n_train = trainable_params(arch, t)
    lora = t.adapters
    m = micro_batches(t, lay)
    # torch pipelining + FSDP (torchtitan): the stage stays gathered and its gradients unsharded until the
    # last micro-batch (pytorch v2.10.0 torch/distributed/pipelining/stage.py backward_maybe_with_nosync:
    # set_reshard_after_backward(False), set_requires_gradient_sync(False); torchtitan v0.2.2
    # parallelize.py: reshard_after_forward = not pp_enabled)
    pp_gathered = zero >= 3 and lay.pp > 1

    # static: held across the whole step
    shard_s = shard if zero >= 1 else 1
    ep = expert_degree(arch, t, lay)
    f_base = expert_params(arch) / arch.params if ep > 1 else 0.0   # expert share of the held weights
    f_train = 0.0 if lora else f_base                               # adapters are not split

    def split(total: float, frac: float, sharded: bool) -> float:
        """Non-expert bytes sharded over the dp x cp ranks (when ZeRO covers them); expert bytes over ep,
        then over the ranks that hold the same experts."""
        rest = (1 - frac) * total / (shard if sharded else 1)
        return rest + frac * total / ep / ((shard // ep) if sharded else 1)

    n_share = sh.adapters if lora else sh.params
    grad_bytes = blay.grad_per_param
    if pp_gathered and not lora and t.precision in MIXED:
        grad_bytes = 4.0  # FSDP2 accumulates unsharded gradients in its fp32 reduce dtype between micro-batches
    grads = split(n_train * grad_bytes * n_share, f_train, zero >= 2 and not pp_gathered)
    static = {
        "weights": split(_held_weights(arch, t, blay, sh), f_base, zero >= 3),
        "quantization_constants": split(blay.quant_constants * sh.matmul, f_base, zero >= 3),
        "optimizer_states": 0.0 if lora else split(blay.state_bytes * n_share, f_train, zero >= 1),
        "lora_adapters": (blay.adapter_weights + blay.state_bytes) * sh.adapters / shard_s if lora else 0.0,
        "communication_buffers": _comm_buffers(arch, zero, shard, n_train * blay.grad_per_param * n_share),
    }
    if pp_gathered:
        # the stage's 16-bit weights stay gathered (reshard_after_forward off with PP, torchtitan) and
        # gradients accumulate unsharded until the step's reduce-scatter
        static["weights"] += split(2.0 * (arch.params if lora else n_train) * sh.params, f_base, False)
    head = stage.last
    head_copy = 2.0 * head_params(arch) / tp if (blay.autocast and head) else 0.0
    layer_copy = 2.0 * layer_matmul_params(arch) / tp if blay.autocast else 0.0
    layers = stage.layers

    # activations
    if lora is not None:
        ab = adapter_bytes(t)
        layer = lora_layer_bytes(arch, lora, ab=ab)
        first = layer if t.checkpointing == "full" else lora_layer_bytes(arch, lora, first=True, ab=ab)
    else:
        layer = first = full_layer_bytes(arch, blay)
    if t.checkpointing == "selective":
        layer = selective_layer_bytes(arch, t, blay, layer)
        first = selective_layer_bytes(arch, t, blay, first)
    if not stage.first:
        first = layer
    fin = final_norm_bytes(arch, t, blay) if head else 0
    ck = checkpoint_bytes(arch, blay)
    if t.checkpointing == "full":
        acts = (A * ck + fin) * T
    else:
        acts = ((A - 1) * layer + first + fin) * T
    if stage.first:
        acts += vision_activation_bytes(arch, t)

    temps = _temporaries(arch, t, lay, stage)
    gc = t.checkpointing == "full"
    loss = LOSS_BYTES[loss_mode(t)]
    if tp > 1 and loss_mode(t) == "full" and framework(t).dtensor_loss_parallel:
        loss = DTENSOR_LOSS_PARALLEL_BYTES
    keeps = framework(t).keeps_outputs if keeps_outputs is None else keeps_outputs
    kept = KEPT_OUTPUT_BYTES if keeps else 0.0  # the loop's `out` holds bf16 logits
    VT = V * T if head else 0.0                  # vocabulary-parallel logits: V / tp of them per GPU
    logits_fwd = (loss["forward"] + kept) * VT   # (the previous step's, until `out` is reassigned)
    logits_bwd = (loss["backward"] + kept) * VT
    logits_kept = kept * VT

    def with_static(**parts: float) -> dict[str, float]:
        out = dict(static)
        for k, v in parts.items():
            out[k] = out.get(k, 0.0) + v
        return out

    def grads_part(g: float) -> dict[str, float]:
        return {"lora_adapters": g} if lora else {"gradients": g}

    # with several micro-batches per step (accumulation, pipeline) the gradients of the earlier ones are
    # alive while the later ones run forward and backward
    accumulated = grads if (m > 1 or lay.pp > 1) else 0.0
    phases = {
        "forward": with_static(autocast_weight_copies=layers * layer_copy + head_copy, activations=acts,
                               logits_and_loss=logits_fwd, temporaries=temps["forward"],
                               **grads_part(accumulated)),
        "backward_start": with_static(autocast_weight_copies=(head_copy if gc else layers * layer_copy + head_copy),
                                      activations=acts, logits_and_loss=logits_bwd,
                                      temporaries=temps["forward"], **grads_part(accumulated)),
        "backward_end": with_static(**grads_part(grads), logits_and_loss=logits_kept,
                                    temporaries=temps["backward_end"]),
    }
    if gc:
        # deepest point of the recompute: the top layer (every checkpoint alive, only the LM head's
        # gradient) or the bottom one (one checkpoint, every layer's gradient above it); the memory
        # between them is linear in the layer index. Other micro-batches' checkpoints stay alive.
        shard_g = shard if (zero >= 2 and not pp_gathered) else 1
        per_layer = (n_train / L * sh.adapters * L / max(1, layers) if lora
                     else layer_matmul_params(arch) / tp) * blay.grad_per_param / shard_g
        head_grads = 0.0 if (lora or not head) else head_params(arch) / tp * blay.grad_per_param / shard_g
        others = A - layers                      # checkpoints of the micro-batches in flight behind this one
        top = {"activations": (A * ck + layer) * T, "gradients": head_grads}
        bottom = {"activations": ((others + 1) * ck + layer) * T,
                  "gradients": head_grads + (layers - 1) * per_layer}
        best = max((top, bottom), key=lambda d: d["activations"] + d["gradients"])
        g = max(best["gradients"], accumulated)
        phases["recompute"] = with_static(**grads_part(g), activations=best["activations"],
                                          autocast_weight_copies=layer_copy, logits_and_loss=logits_kept,
                                          temporaries=temps["backward_end"])
    return phases


def _held_weights(arch: Architecture, t: TrainingSpec, blay: "_Layout", sh) -> float:
    """The weights one GPU holds before ZeRO: QLoRA packs the decoder matmuls (its share of them) and
    keeps the rest (embedding, head, norms) in 16 or 32 bits."""
    if sh.params == 1.0 and sh.matmul == 1.0:
        return blay.weights
    if t.method == "qlora":
        packed = total_matmul_params(arch) * K.NF4_BYTES_PER_PARAM
        return packed * sh.matmul + (blay.weights - packed) * sh.other
    return blay.weights * sh.params


def vision_activation_bytes(arch: Architecture, t: TrainingSpec) -> float:
    """The vision tower's saved activations for ``images_per_sample`` images per sequence: per image
    token and layer about a pre-norm ViT layer's tensors (two LayerNorm inputs, q/k/v and the
    attention output, fc1's output and its GELU) in 16 bits. An approximation (labelled); none when
    the tower is frozen (LoRA): nothing before it needs a gradient."""
    v = arch.vision
    if v is None or not t.images_per_sample or t.adapters is not None:
        return 0.0
    per_token = 2 * (2 * v.hidden_size + 4 * v.hidden_size + 2 * v.intermediate_size)
    layers = v.num_layers if t.checkpointing != "full" else 1  # checkpointed: the layer inputs only (~)
    return float(per_token * layers * v.patches * t.images_per_sample * t.micro_batch_size)


def expert_parallel_degree(arch: Architecture, t: TrainingSpec, dp: int) -> int:
    """The expert-parallel degree in force on ``dp`` data-parallel ranks (see parallel.expert_degree)."""
    return expert_degree(arch, t, Layout(dp=max(1, dp), ep=t.expert_parallel))


def _expert_split(arch: Architecture, t: TrainingSpec, lay: Layout) -> float:
    """How much smaller a gathered MoE layer is when each rank holds 1/ep of its experts."""
    ep = expert_degree(arch, t, lay)
    if ep == 1:
        return 1.0
    frac = expert_params(arch) / max(1, arch.matmul_params)
    return 1.0 / ((1 - frac) + frac / ep)


def _comm_buffers(arch: Architecture, zero: int, dp: int, grad_bytes: float) -> float:
    """DDP's gradient buckets (a copy of every gradient) or ZeRO's reduce/all-gather buckets."""
    if dp <= 1:
        return 0.0
    if zero == 0:
        return grad_bytes
    return 2 * arch.hidden_size ** 2 * 4.0  # HF/DeepSpeed "auto": reduce bucket = hidden^2 elements


def _temporaries(arch: Architecture, t: TrainingSpec, lay: Layout, stage: Stage) -> dict[str, float]:
    """Short-lived buffers: cuBLAS workspaces, QLoRA's dequantised weight, ZeRO-3's gathered
    layers (not with pipeline parallelism: the stage stays gathered), the tied embedding's second
    gradient."""
    tp, shard = stage.tp, lay.shard
    biggest = biggest_linear(arch) / tp
    fwd = end = float(K.CUBLAS_WORKSPACE_BYTES)
    if t.method == "qlora":
        fwd += 2.0 * biggest
        end += 2.0 * biggest
    if t.zero_stage >= 3 and shard > 1 and lay.pp == 1:
        # QLoRA shards the packed 4-bit weights (bnb_4bit_quant_storage): they are gathered packed
        per_param = (K.NF4_BYTES_PER_PARAM + K.NF4_CONSTANT_BYTES_PER_PARAM) if t.method == "qlora" else 2.0
        gathered = K.ZERO3_LIVE_LAYERS * largest_layer_matmul_params(arch) / tp * per_param / _expert_split(arch, t, lay)
        fwd += gathered + (2.0 * head_params(arch) / tp if stage.last else 0.0)
        end += gathered
    if t.adapters is None and arch.tie_embeddings and lay.pp == 1:
        # the LM head's gradient waits in autograd's buffer for the embedding's before they are summed
        grad_bytes = layout(arch, t, shard).grad_per_param
        end += head_params(arch) / tp * grad_bytes / (shard if t.zero_stage >= 2 else 1)
    return {"forward": fwd, "backward_end": end}
