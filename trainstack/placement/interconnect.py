"""Why several GPUs of one node may not train together on this type, in sourced words.

Multi-GPU training inside one node needs NVLink or NVSwitch (the product's promise). The reason
says what the family's doc states about the link (the PCIe generation and per-GPU bandwidth where
Alibaba gives them, else the card it names), with the source tag and the citation it rests on
(``Reason.source`` / ``Reason.fact``), and what data parallelism would push over that link per
optimizer step. Alibaba's warning that Transformer training over PCIe may corrupt data is said of
gn7e, ebmgn7e and ebmgn7ex (NVLink families) only, so it is never the reason here.
"""

from __future__ import annotations

from typing import Optional

from ..catalog import ResolvedInstance
from ..catalog.citations import gpu_stem
from ..profile import TrainingProfile
from ..reasons import Reason, ReasonCode, reason
from ..sizing.param_bytes import param_bytes, trainable_params


def gradient_gb(profile: TrainingProfile, gpus: int) -> float:
    """GB of gradients one data-parallel all-reduce moves per optimizer step (trainable x bytes each)."""
    arch, t = profile.architecture, profile.training
    return trainable_params(arch, t) * param_bytes(arch, t, gpus).grad_per_param / 1e9


def _gb(x: float) -> str:
    return f"{x:,.2f} GB" if x >= 0.1 else f"{x * 1000:,.1f} MB"


def _seconds(x: float) -> str:
    return f"{x:,.2f} s" if x >= 1 else (f"{x * 1000:,.0f} ms" if x >= 0.0005 else "under 1 ms")


def traffic_text(profile: TrainingProfile, gpus: int, link_gbs: Optional[float]) -> str:
    """Ring all-reduce volume per GPU (each way) and, with a stated link, its time floor."""
    grads = gradient_gb(profile, gpus)
    each_way = 2 * (gpus - 1) / gpus * grads
    text = (f"data parallelism all-reduces {_gb(grads)} of gradients per optimizer step, "
            f"{_gb(each_way)} sent and received by each GPU")
    if link_gbs:
        text += f", at least {_seconds(each_way / (link_gbs / 2))} at {link_gbs / 2:g} GB/s each way"
    return text


def pcie_rejection(profile: TrainingProfile, inst: ResolvedInstance) -> Reason:
    """The MULTI_GPU_WITHOUT_NVLINK reason for ``inst`` (several GPUs, no NVLink/NVSwitch)."""
    f, gpu, n = inst.family, inst.gpu, inst.gpu_count
    assert gpu is not None
    needs = "multi-GPU training inside one node needs NVLink/NVSwitch"
    if f.interconnect != "pcie":
        return reason(ReasonCode.MULTI_GPU_WITHOUT_NVLINK,
                      f"{n} {gpu.name} GPUs on an unverified interconnect: no source states NVLink or NVSwitch "
                      f"for {f.name}; {needs}")
    link = f.cite("pcie", "gpu-link-pcie")
    if link is not None:
        what = (f"only PCIe Gen{f.pcie_gen} links of {f.pcie_gbs:g} GB/s per GPU [{link.source}: "
                f"\"{link.quote}\"], no NVLink/NVSwitch")
        cited, fact = link, "pcie"
    else:
        part = f.cite("interconnect", "gpu-part")
        stem = gpu_stem(gpu.name)
        what = f"PCIe only: the {f.name} doc names the {stem} card and no NVLink/NVSwitch" + (
            f" [{part.source}: \"{part.quote}\"]" if part else "")
        cited, fact = part, "interconnect"
    return reason(ReasonCode.MULTI_GPU_WITHOUT_NVLINK,
                  f"{n} {gpu.name} GPUs share {what}: {traffic_text(profile, n, f.pcie_gbs)}; {needs}",
                  source=cited.source if cited else None,
                  fact=f"families.{f.name}.{fact}" if cited else None)
