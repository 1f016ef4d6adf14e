"""The whole estimate for a job: memory, fit per GPU, speed, hours, and what the numbers rest on.

``estimate`` wraps :func:`memory_estimate` and :func:`throughput_estimate`; ``fit_suggestions``
re-runs the memory model with one change at a time to name what would make a job fit;
``assumptions`` labels every input the H200 calibration did not confirm.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field

from ..architecture import Architecture
from ..catalog.models import TRAINING_INTERCONNECTS, GpuModel
from ..profile import TrainingSpec
from . import constants as K
from .frameworks import attention_kind, attention_source, framework, loss_mode
from .intervals import Fit, fit_verdict
from .memory import MemoryEstimate, memory_estimate
from .param_bytes import MIXED
from .throughput import ThroughputEstimate, throughput_estimate

if TYPE_CHECKING:  # pragma: no cover
    from ..catalog import Catalog

#: ZeRO-3 suggestions try data-parallel degrees up to this many GPUs.
MAX_SUGGESTED_GPUS = 1024


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GpuFit(_Frozen):
    """Whether the job's required memory fits one GPU model (the ``memory.fits`` contract)."""

    gpu: str
    usable_gib: float
    fits: bool = Field(description="margin_gib >= min_margin_gib (the estimate; fit says fits or at_risk then)")
    margin_gib: float = Field(description="usable_gib - required_gib_per_gpu; negative when it does not fit")
    min_margin_gib: float = Field(0.0, description="The least margin a plan must keep (a share of usable memory)")
    fit: Fit = Field("does_not_fit", description="fits: the required-memory interval's upper end plus the margin is "
                                                 "within usable memory; at_risk: only the estimate plus the margin is; "
                                                 "else does_not_fit")
    peak_gib_interval: Optional[tuple[float, float]] = Field(None, description="The peak's central 80 % interval")


class NodeLayout(_Frozen):
    """How a GPU model's GPUs sit in nodes: GPUs per node and the links between them."""

    gpus_per_node: int = 1
    interconnect: str = "nvlink"
    network: str = "erdma"
    network_gbps: Optional[float] = None
    label: Optional[str] = None


class Estimate(_Frozen):
    """Memory, fits and speed for one job on ``gpu_count`` GPUs."""

    memory: MemoryEstimate
    fits: tuple[GpuFit, ...]
    throughput: tuple[ThroughputEstimate, ...] = Field(description="One per GPU model, in the order given")
    gpu_count: int
    tokens: Optional[float] = None
    assumptions: tuple[str, ...] = ()

    def speed(self, gpu: str) -> Optional[ThroughputEstimate]:
        return next((t for t in self.throughput if t.gpu == gpu), None)

    def hours(self, gpu: str) -> Optional[float]:
        """Wall-clock hours to process ``training.tokens`` on ``gpu_count`` GPUs of model ``gpu``."""
        t = self.speed(gpu)
        if self.tokens is None or t is None or not t.tokens_per_second:
            return None
        return self.tokens / t.tokens_per_second / 3600

    @property
    def fits_anywhere(self) -> bool:
        return any(f.fits for f in self.fits)

    def reference_gpu(self) -> Optional[str]:
        """The GPU whose speed headlines the estimate: the fastest that fits, else the roomiest."""
        fitting = [f.gpu for f in self.fits if f.fits]
        ranked = [t for t in self.throughput if t.gpu in fitting and t.tokens_per_second_per_gpu]
        if ranked:
            return max(ranked, key=lambda t: t.tokens_per_second_per_gpu or 0.0).gpu
        if self.fits:
            return max(self.fits, key=lambda f: f.usable_gib).gpu
        return None


def min_margin_gib(usable_gib: float, min_margin_fraction: float = K.MIN_MARGIN_FRACTION) -> float:
    """The least memory a plan must leave free on a GPU of ``usable_gib``."""
    return round(usable_gib * min_margin_fraction, 2)


def memory_fit(memory: MemoryEstimate, usable_gib: float, least_margin_gib: float) -> Fit:
    """fits | at_risk | does_not_fit for ``memory`` on a GPU with ``usable_gib`` (intervals.fit_verdict)."""
    high = memory.required_gib_interval[1] if memory.required_gib_interval else memory.required_gib_per_gpu
    factor = high / memory.required_gib_per_gpu if memory.required_gib_per_gpu else 1.0
    return fit_verdict(memory.required_gib_per_gpu, usable_gib, least_margin_gib, factor)


def gpu_fit(memory: MemoryEstimate, gpu: GpuModel, min_margin_fraction: float = K.MIN_MARGIN_FRACTION) -> GpuFit:
    margin = round(gpu.usable_gib - memory.required_gib_per_gpu, 2)
    least = min_margin_gib(gpu.usable_gib, min_margin_fraction)
    return GpuFit(gpu=gpu.name, usable_gib=gpu.usable_gib, fits=margin >= least, margin_gib=margin,
                  min_margin_gib=least, fit=memory_fit(memory, gpu.usable_gib, least),
                  peak_gib_interval=memory.peak_gib_interval)


def summary_intervals(memory: MemoryEstimate, speed: Optional[ThroughputEstimate], tokens_per_second_per_gpu:
                      Optional[float], fit: Optional[Fit]) -> dict:
    """The interval fields of a plan's ``estimate`` block: the speed interval about the speed the plan uses
    (a calibration may have moved it: the band moves with it), the memory intervals and the fit verdict."""
    iv = speed.tokens_per_second_per_gpu_interval if speed else None
    base = speed.tokens_per_second_per_gpu if speed else None
    if iv and base and tokens_per_second_per_gpu:
        f = tokens_per_second_per_gpu / base
        iv = (round(iv[0] * f, 1), round(iv[1] * f, 1))
    return {"tokens_per_second_per_gpu_interval": iv, "peak_gib_interval": memory.peak_gib_interval,
            "required_gib_interval": memory.required_gib_interval, "fit": fit,
            "interval_class": speed.interval_class if speed else memory.interval_class}


def at_risk_label(memory: MemoryEstimate, usable_gib: float, least_margin_gib: float, gpu: str) -> str:
    """Why a plan runs with memory at risk, with the figures (issue 32: only when nothing fits)."""
    hi = memory.required_gib_interval[1] if memory.required_gib_interval else memory.required_gib_per_gpu
    return (f"memory at risk on {gpu}: needs {memory.required_gib_per_gpu:.1f} GiB per GPU, up to {hi:.1f} GiB at the "
            f"80 % interval's upper end ({memory.interval_class}); {usable_gib:.1f} GiB usable less the "
            f"{least_margin_gib:.1f} GiB margin. No candidate fits with the interval's upper end, so the best "
            "at-risk one was chosen")


def estimate(arch: Architecture, training: TrainingSpec, gpus: Iterable[GpuModel], gpu_count: int = 1,
             gpus_per_node: Optional[int] = None, interconnect: str = "nvlink", network: str = "erdma",
             network_gbps: Optional[float] = None,
             layouts: Optional[Mapping[str, NodeLayout]] = None, allocator: str = "default",
             min_margin_fraction: float = K.MIN_MARGIN_FRACTION) -> Estimate:
    """Memory (sharded over ``gpu_count`` data-parallel GPUs), fit and speed on each GPU model.

    Speed uses ``layouts[gpu.name]`` when given, else ``gpus_per_node`` (default: up to 8) GPUs per
    node joined by ``interconnect`` and nodes joined by ``network``.
    """
    count = max(1, int(gpu_count))
    default = NodeLayout(gpus_per_node=gpus_per_node or min(count, 8), interconnect=interconnect,
                         network=network, network_gbps=network_gbps)
    memory = memory_estimate(arch, training, count, allocator=allocator, gpus_per_node=default.gpus_per_node)
    models = list(gpus)
    speeds = tuple(_speed(arch, training, g, count, (layouts or {}).get(g.name, default)) for g in models)
    return Estimate(memory=memory, fits=tuple(gpu_fit(memory, g, min_margin_fraction) for g in models),
                    throughput=speeds, gpu_count=count, tokens=training.tokens,
                    assumptions=assumptions(arch, training, count, allocator))


def _speed(arch: Architecture, training: TrainingSpec, gpu: GpuModel, count: int,
           lay: NodeLayout) -> ThroughputEstimate:
    per_node = max(1, min(count, lay.gpus_per_node))
    nodes = math.ceil(count / per_node)
    return throughput_estimate(arch, training, gpu, gpus_per_node=per_node, nodes=nodes,
                               interconnect=lay.interconnect, network=lay.network if nodes > 1 else "none",
                               network_gbps=lay.network_gbps)


# ---- what the calibration did not confirm ----------------------------------------------------

def assumptions(arch: Architecture, training: TrainingSpec, data_parallel: int = 1,
                allocator: str = "default") -> tuple[str, ...]:
    """Labels for every part of the estimate that rests on a hand calculation, not a measurement."""
    t, out = training, []
    kind = attention_kind(t)
    if not (t.framework == "hf" and kind == "sdpa"):  # the H200 calibration's own setting needs no label
        out.append(f"attention {kind}: " + ("as the profile states (training.attention)" if t.attention else
                                            f"the {t.framework} default ({attention_source(t)})")
                   + ("; eager keeps the s x s score matrix per layer (memory quadratic in the sequence)"
                      if kind == "eager" else ""))
    if allocator == "expandable":
        out.append("allocator: expandable_segments assumed to leave almost nothing cached (reserved = peak + 2 % of "
                   "the transient tensors); NOT measured: measure it on a GPU before relying on it")
    if t.framework != "hf":
        out.append(f"framework {t.framework}: memory from its documented defaults (loss "
                   f"{loss_mode(t)}), speed from the per-GPU-generation calibration; not measured on an H200")
    if t.checkpointing == "selective":
        out.append("selective activation checkpointing: saved and recomputed tensors are a hand count")
    if arch.is_moe:
        out.append("MoE: every expert held in memory, compute for the routed ones; router and dispatch "
                   "buffers are a hand count (MoE was not calibrated)")
    if arch.vision is not None:
        out.append("vision tower: weights counted from vision_config; " + (
            f"its activations and FLOPs for {t.images_per_sample} image(s) per sequence are an approximation"
            if t.images_per_sample else "text-only sizing (set training.images_per_sample for image inputs)"))
    if t.method == "qlora":
        out.append("QLoRA memory (NF4 base, 64-weight blocks with double-quantised constants, one bf16 "
                   "dequantised weight at a time) is a hand calculation; the calibration measured LoRA only")
    if t.method == "pretrain":
        out.append("pretraining is sized like full fine-tuning (same tensors per step)")
    if t.adapters is not None and t.precision != "bf16":
        out.append(f"LoRA with {t.precision}: base sized in 16 bits and activations as with bf16 "
                   "(LoRA was calibrated with bf16 only)")
    if t.precision == "fp16-mixed":
        out.append("fp16-mixed is sized like bf16-mixed (same bytes; loss scaling adds no tensors); not calibrated")
    if t.precision == "fp8-mixed":
        out.append("FP8 training memory (fp8 weight copies and matmul inputs, Transformer-Engine style) is a hand "
                   f"calculation; its speed: the FP8 peak, the {t.fp8_recipe or 'tensorwise'} casts' traffic "
                   "(torchao's roofline counts)")
    if t.optimizer != "adamw":
        out.append(f"optimizer {t.optimizer}: state sizes are a hand calculation (calibrated with fused AdamW)")
    if t.zero_stage >= 3 and t.adapters is None and t.precision in MIXED and framework(t).fsdp_fp32_params:
        out.append(f"ZeRO-{t.zero_stage} sharding (FSDP2 mixed precision: fp32 parameter and gradient shards are "
                   "the master copy, bf16 only while gathered) is a hand calculation, not calibrated")
    elif t.zero_stage >= 1:
        out.append(f"ZeRO-{t.zero_stage} sharding (DeepSpeed layout: 16-bit weights and gradients, fp32 master "
                   "copy with the optimizer states) is a hand calculation, not calibrated")
    if t.zero_stage >= 1:
        if data_parallel <= 1:
            out.append(f"zero_stage {t.zero_stage} on one GPU shards nothing: give the GPU count (--gpus)")
    elif data_parallel > 1 and t.adapters is None:
        out.append("DDP keeps a bucket copy of every gradient (gradient_as_bucket_view=False, the default)")
    if data_parallel > 1:
        out.append("multi-GPU speed uses a ring all-reduce model of gradient sync (not calibrated)")
    return tuple(out)


# ---- what would make it fit ------------------------------------------------------------------

def fit_suggestions(arch: Architecture, training: TrainingSpec, usable_gib: float,
                    data_parallel: int = 1) -> list[str]:
    """Concrete changes, each re-sized by the model, that bring the job within ``usable_gib`` per GPU."""
    t, dp = training, max(1, int(data_parallel))
    if memory_estimate(arch, t, dp).required_gib_per_gpu <= usable_gib:
        return []
    out: list[str] = []

    def first_fit(options: list[tuple[str, TrainingSpec]]) -> Optional[str]:
        for text, spec in options:
            req = memory_estimate(arch, spec, dp).required_gib_per_gpu
            if req <= usable_gib:
                return f"{text} (needs {req:.1f} GiB per GPU)"
        return None

    gc = t.model_copy(update={"gradient_checkpointing": True})
    if not t.gradient_checkpointing:
        out.append(first_fit([("enable gradient checkpointing (training.gradient_checkpointing: true)", gc)]) or "")
    if t.method in ("full", "pretrain"):
        lora = t.model_copy(update={"method": "lora", "lora": None})
        out.append(first_fit([("use LoRA (training.method: lora, rank 16 on attention)", lora),
                              ("use LoRA with gradient checkpointing",
                               lora.model_copy(update={"gradient_checkpointing": True}))]) or "")
    if t.method != "qlora":
        qlora = t.model_copy(update={"method": "qlora", "lora": t.lora})
        out.append(first_fit([("use QLoRA (training.method: qlora, 4-bit NF4 base)", qlora),
                              ("use QLoRA with gradient checkpointing",
                               qlora.model_copy(update={"gradient_checkpointing": True}))]) or "")
    out.append(_zero3_suggestion(arch, t, usable_gib, dp))
    out.append(_shrink_suggestion(arch, t, usable_gib, dp, "sequence_length", 128))
    out.append(_shrink_suggestion(arch, t, usable_gib, dp, "micro_batch_size", 1))
    return [s for s in out if s]


def _zero3_suggestion(arch: Architecture, t: TrainingSpec, usable_gib: float, dp: int) -> str:
    for spec, extra in ((t.model_copy(update={"zero_stage": 3}), ""),
                        (t.model_copy(update={"zero_stage": 3, "gradient_checkpointing": True}),
                         " with gradient checkpointing")):
        if extra and t.gradient_checkpointing:
            continue
        n = max(2, dp)
        while n <= MAX_SUGGESTED_GPUS:
            req = memory_estimate(arch, spec, n).required_gib_per_gpu
            if req <= usable_gib:
                return f"ZeRO-3 over {n} GPUs{extra} (training.zero_stage: 3, resources.gpus: {n}; " \
                       f"needs {req:.1f} GiB per GPU)"
            n *= 2
    return ""


def _shrink_suggestion(arch: Architecture, t: TrainingSpec, usable_gib: float, dp: int, field: str,
                       floor: int) -> str:
    """The largest power-of-two value of ``field`` (below the current one) that fits."""
    current = getattr(t, field)
    value = 1 << (max(current - 1, 1).bit_length() - 1)  # largest power of two below current
    while value >= floor and value < current:
        spec = t.model_copy(update={field: value})
        req = memory_estimate(arch, spec, dp).required_gib_per_gpu
        if req <= usable_gib:
            return f"{field} {value} instead of {current} (training.{field}; needs {req:.1f} GiB per GPU)"
        value //= 2
    return ""


# ---- prices -----------------------------------------------------------------------------------

class GpuHourPrice(_Frozen):
    """What one GPU of a model costs per hour in a region, from the cheapest listed instance type."""

    gpu: str
    region: str
    instance_type: Optional[str] = None
    gpus_per_instance: Optional[int] = None
    on_demand_cny: Optional[float] = None
    spot_cny: Optional[float] = None
    labels: tuple[str, ...] = ()


def gpu_hour_price(catalog: "Catalog", region: str, gpu: str) -> GpuHourPrice:
    """Per-GPU-hour on-demand and (estimated) spot price from the cheapest type with that GPU."""
    best = None
    for inst in catalog.resolved_instances():
        if inst.gpu is None or inst.gpu.name != gpu or not inst.trainable:
            continue
        if inst.gpu_count > 1 and inst.interconnect not in TRAINING_INTERCONNECTS:
            continue
        q = catalog.quote(region, inst.name)
        if q.on_demand_cny_per_hour is None:
            continue
        per_gpu = q.on_demand_cny_per_hour / inst.gpu_count
        if best is None or per_gpu < best[0]:
            best = (per_gpu, inst, q)
    if best is None:
        return GpuHourPrice(gpu=gpu, region=region, labels=(f"no price known for any {gpu} type in {region}",))
    per_gpu, inst, q = best
    spot = None if q.spot_cny_per_hour is None else q.spot_cny_per_hour / inst.gpu_count
    labels = (f"{gpu} priced per GPU-hour from {inst.name} ({inst.gpu_count} GPU, "
              f"{q.on_demand_cny_per_hour:g} CNY/h on demand)",) + q.labels + q.spot_labels
    return GpuHourPrice(gpu=gpu, region=region, instance_type=inst.name, gpus_per_instance=inst.gpu_count,
                        on_demand_cny=round(per_gpu, 4), spot_cny=None if spot is None else round(spot, 4),
                        labels=labels)
