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
``AUTOCAST_KV_EXTRA_BYTES`` (constants.py). The parts, one module each: ``param_bytes`` (bytes per
parameter), ``activations`` (bytes per token and layer), ``phases`` (what is alive at each phase),
``allocator`` (what the caching allocator holds beyond it); this module assembles the estimate.
"""

from __future__ import annotations

import functools
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from ..models import Architecture
from ..profile import TrainingSpec
from . import constants as K
from .allocator import reserved_bytes
from .intervals import estimate_class, interval
from .param_bytes import trainable_params
from .parallel import DEFAULT_GPUS_PER_NODE, Layout, layout_for, micro_batches, stages
from .phases import phase_components

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
    peak_gib_interval: Optional[tuple[float, float]] = Field(
        None, description="Central 80 % interval of the peak: the leave-one-source-out errors of the estimate's class "
                          "(sizing/intervals.py)")
    required_gib_interval: Optional[tuple[float, float]] = Field(
        None, description="The same interval of required_gib_per_gpu; the fit verdict uses its upper end")
    interval_class: Optional[str] = Field(None, description="The class the interval is for: */framework/method/dense-moe")
    interval_labels: tuple[str, ...] = ()


def memory_estimate(arch: Architecture, training: TrainingSpec, gpus: int = 1,
                    allocator: str = "default", weights_cast_on_gpu: bool = False,
                    keeps_outputs: Optional[bool] = None, layout: Optional[Layout] = None,
                    gpus_per_node: int = DEFAULT_GPUS_PER_NODE) -> MemoryEstimate:
    """Peak, reserved and required memory per GPU of a job on ``gpus`` GPUs: the profile's layout
    (its tensor/pipeline/context degrees; data parallel the rest, ZeRO shards over it), or ``layout``.
    With pipeline parallelism the stage that needs the most is reported.

    ``allocator``: ``default`` (PyTorch's caching allocator as it ships, what the calibration
    measured) or ``expandable`` (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``; modelled, not
    measured). ``weights_cast_on_gpu``: the model was built or loaded in fp32 on the GPU and cast to
    16 bits there (the calibration harness does this; ``from_pretrained(torch_dtype=...)`` does not).
    ``keeps_outputs``: the loop holds each step's outputs (``out = model(...)``, as the calibration
    harness does) until the next step replaces them; default: the framework's (none keep them).
    ``gpus_per_node``: the node size hybrid sharding (``training.sharding: hybrid``) shards within.
    """
    lay = layout or layout_for(training, max(1, int(gpus)), gpus_per_node)
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
    cls = estimate_class(arch, t, None)
    band = interval("memory", 1.0, cls, digits=6)
    lo, hi = (band.low, band.high) if band else (1.0, 1.0)
    return MemoryEstimate(
        peak_gib_interval=(round(lo * peak / K.GIB, 2), round(hi * peak / K.GIB, 2)) if band else None,
        required_gib_interval=(round(lo * required / K.GIB, 2), round(hi * required / K.GIB, 2)) if band else None,
        interval_class=cls.key("memory"), interval_labels=(band.labels if band else ("no residuals: no interval",)),
        peak_gib_per_gpu=round(peak / K.GIB, 3), reserved_gib_per_gpu=round(reserved / K.GIB, 3),
        required_gib_per_gpu=round(required / K.GIB, 3), allocator=allocator,
        breakdown_gib={k: round(phases[name].get(k, 0.0) / K.GIB, 3) for k in COMPONENTS},
        peak_phase=name, phases_gib={p: round(sum(v.values()) / K.GIB, 3) for p, v in phases.items()},
        params=arch.params, trainable_params=trainable_params(arch, t), data_parallel=lay.dp,
        tokens_per_micro_batch=t.micro_batch_size * t.sequence_length, layout=lay.label,
        peak_stage=None if lay.pp == 1 else ("first" if stage.first else "last" if stage.last else "middle"),
        micro_batches_in_flight=round(stage.act_layers / max(1, stage.layers), 3))
