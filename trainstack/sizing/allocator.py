"""What PyTorch's caching allocator holds at the peak beyond the allocated tensors: the fitted
envelope over the step's coming-and-going tensors (constants.py, fitted by
benchmarks/fit_calibration.py)."""

from __future__ import annotations

from typing import Optional

from ..models import Architecture
from ..profile import TrainingSpec
from . import constants as K
from .activations import eager_keys, full_layer_bytes, lora_layer_bytes
from .param_bytes import adapter_bytes, param_bytes
from .parallel import Layout, Stage, shares, tokens_per_gpu
from .shapes import total_matmul_params

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
        copies = 2.0 * total_matmul_params(arch) * (sh.matmul if sh else 1.0) if param_bytes(arch, t, dp).autocast else 0.0
        reserved = (static + K.FRAG_DYNAMIC_CHECKPOINTED * dynamic
                    + K.FRAG_RECOMPUTE_LAYERS * recomputed_layer_bytes(arch, t, dp, stage) + K.FRAG_AUTOCAST_COPIES * copies)
    if cast_on_gpu and t.precision == "bf16":
        # a 4-byte build cast to 2 bytes frees 2 bytes per parameter in parameter-sized blocks; gradients,
        # optimizer states and (unchecked) activations of those sizes reuse them, the rest stays cached
        reusable = at_peak.get("gradients", 0.0) + at_peak.get("optimizer_states", 0.0)
        if t.checkpointing == "none":
            reusable += at_peak.get("activations", 0.0)
        held = arch.params * (shares(arch, stage).params if stage is not None else 1.0)
        reserved += K.BUILD_RESIDUE_KEPT * max(0.0, 2.0 * held - reusable)
    return reserved


def recomputed_layer_bytes(arch: Architecture, t: TrainingSpec, dp: int, stage: Optional[Stage] = None) -> float:
    """One layer's activations for the micro-batch on one GPU (what a checkpointed layer recomputes)."""
    lay = param_bytes(arch, t, dp)
    T = t.micro_batch_size * t.sequence_length
    if stage is not None and (stage.tp > 1 or stage.cp > 1):
        T = tokens_per_gpu(t, stage) / stage.tp
    if t.adapters is not None:
        return lora_layer_bytes(arch, t.adapters, ab=adapter_bytes(t), keys=eager_keys(t)) * T
    return full_layer_bytes(arch, lay, eager_keys(t)) * T
