"""The parallel layout a candidate runs with: a small search per candidate, sized by the engine.

Degrees the profile leaves unset are searched when its framework runs them (sizing.frameworks
.PARALLEL_DEGREES) and its job.command can carry them (launchers.command_degrees); set ones are kept.
Tried: tensor parallel 1, 2, 4, 8 dividing the node's GPUs (only inside one NVLink/NVSwitch node),
pipeline parallel 1, 2, 4, 8, 16 (dividing the layers, except for torchtitan, which splits them
unevenly), context parallel 1, 2, 4, 8 while each rank keeps CP_MIN_TOKENS_PER_RANK tokens of a
sequence; data parallel is the rest of the GPUs. Every layout is sized; among those that fit the
GPU's memory with the profile's margin, the fastest wins (ties: fewer GPUs per model replica, then
less tensor parallelism); when none fits, the one needing the least memory is reported.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

from .. import sizing
from ..catalog import ResolvedInstance
from ..plan import LayoutOption, ParallelLayout
from ..profile import TrainingProfile
from ..reasons import Reason, ReasonCode, reason
from ..sizing.frameworks import searchable_degrees
from ..sizing.parallel import Layout, hybrid_replicas, layout_for, layout_problems

SEARCH_TENSOR = (1, 2, 4, 8)
SEARCH_PIPELINE = (1, 2, 4, 8, 16)
SEARCH_CONTEXT = (1, 2, 4, 8)
#: Context parallelism is tried only while every rank keeps this many tokens of a sequence: NeMo's
#: performance tables split an 8,192-token Llama 3 8B sequence over CP 2 (4,096 per rank) and no shorter.
CP_MIN_TOKENS_PER_RANK = 4096


@functools.lru_cache(maxsize=256)
def _command_degrees(command: str) -> frozenset[str]:
    from ..launchers import command_degrees

    return command_degrees(command)


def searched_degrees(profile: TrainingProfile) -> frozenset[str]:
    """The degrees the resolver chooses for this profile: unset, run by its framework, carried by its command."""
    return searchable_degrees(profile.training) & _command_degrees(profile.job.command)


def layout_options(profile: TrainingProfile, inst: ResolvedInstance, nodes: int,
                   arch=None) -> tuple[tuple[Layout, ...], Optional[Reason]]:
    """The layouts to size for ``nodes`` x ``inst`` (the profile's own degrees, the unset ones searched),
    or why the profile's degrees cannot run there."""
    t = profile.training
    arch = arch or profile.architecture
    return _layout_options(arch, t, searched_degrees(profile), inst.gpu_count, nodes,
                           inst.gpu_count > 1 and inst.multi_gpu_training_ok)


@functools.lru_cache(maxsize=4096)
def _layout_options(arch, t, search: frozenset[str], per_node: int, nodes: int,
                    nvlink: bool) -> tuple[tuple[Layout, ...], Optional[Reason]]:
    gpus = per_node * nodes
    if t.tensor_parallel and t.tensor_parallel > 1:
        if t.tensor_parallel > per_node:
            return (layout_for(t, gpus),), reason(
                ReasonCode.TENSOR_PARALLEL_ACROSS_NODES,
                f"tensor_parallel {t.tensor_parallel} would span nodes: a node of this type has {per_node} GPU(s); "
                "tensor parallelism runs inside one NVLink/NVSwitch node")
        if not nvlink or per_node % t.tensor_parallel:
            return (layout_for(t, gpus),), reason(
                ReasonCode.TENSOR_PARALLEL_WITHOUT_NVLINK,
                f"tensor_parallel {t.tensor_parallel} needs {t.tensor_parallel} NVLink/NVSwitch-connected GPUs "
                f"in one node; this type has {per_node}")
    tps = [t.tensor_parallel] if t.tensor_parallel else (
        [d for d in SEARCH_TENSOR if d <= per_node and per_node % d == 0 and (d == 1 or nvlink)]
        if "tensor" in search else [1])
    pps = [t.pipeline_parallel] if t.pipeline_parallel else (
        [d for d in SEARCH_PIPELINE if d <= arch.num_layers] if "pipeline" in search else [1])
    s = t.sequence_length
    cps = [t.context_parallel] if t.context_parallel else (
        [d for d in SEARCH_CONTEXT if d == 1 or (s % (2 * d) == 0 and s // d >= CP_MIN_TOKENS_PER_RANK)]
        if "context" in search else [1])
    even = t.framework != "torchtitan"
    out: list[Layout] = []
    for tp in tps:
        for pp in pps:
            for cp in cps:
                mp = tp * pp * cp
                if gpus % mp:
                    continue
                lay = Layout(tp=tp, pp=pp, cp=cp, dp=gpus // mp, ep=t.expert_parallel,
                             vp=t.virtual_pipeline_stages if pp > 1 else 1,
                             replicas=hybrid_replicas(t.sharding, tp, cp, gpus // mp, per_node))
                if arch.is_moe and t.expert_parallel > 1 and lay.shard % t.expert_parallel:
                    continue
                if layout_problems(arch, lay, s, gpus, even_stages=even):
                    continue
                out.append(lay)
    if not out:
        own = layout_for(t, gpus)
        return (own,), reason(ReasonCode.LAYOUT_WORLD_SIZE,
                              f"{gpus} GPU(s) cannot hold the layout: tensor x pipeline x context parallel "
                              f"{own.model_parallel} must divide the GPUs"
                              + (f" and expert_parallel {t.expert_parallel} the data x context ranks"
                                 if t.expert_parallel > 1 else ""))
    return tuple(out), None


@dataclass(frozen=True)
class LayoutPick:
    """The layout a candidate runs with, its sizing, and every layout sized for it."""

    layout: Layout
    memory: sizing.MemoryEstimate
    throughput: sizing.ThroughputEstimate
    options: tuple[LayoutOption, ...]
    searched: bool

    @property
    def plan_layout(self) -> ParallelLayout:
        return plan_layout(self.layout)

    @property
    def why(self) -> Optional[Reason]:
        """Why the chosen layout cannot run on these nodes though its degrees are valid: no link carries a
        group of its ranks (sizing.links; typed, so the candidate is rejected rather than sized at 0)."""
        return self.throughput.problem


def plan_layout(lay: Layout) -> ParallelLayout:
    return _plan_layout(lay)


@functools.lru_cache(maxsize=1024)
def _plan_layout(lay: Layout) -> ParallelLayout:
    return ParallelLayout(tensor_parallel=lay.tp, pipeline_parallel=lay.pp, context_parallel=lay.cp,
                          data_parallel=lay.dp, expert_parallel=lay.ep, virtual_pipeline_stages=lay.vp)


@functools.lru_cache(maxsize=16384)
def choose_layout(arch, t, gpu, per_node: int, nodes: int, interconnect: str, network: str,
                  network_gbps: Optional[float], layouts: tuple[Layout, ...], least_margin_gib: float) -> LayoutPick:
    """Size every layout; the fastest that fits (with the least margin; those that fit with their memory
    interval's upper end first) wins, else the one needing the least."""

    def speed(lay: Layout) -> sizing.ThroughputEstimate:
        return sizing.throughput_estimate(arch, t, gpu, gpus_per_node=per_node, nodes=nodes,
                                          interconnect=interconnect, network=network, network_gbps=network_gbps,
                                          layout=lay)

    if len(layouts) == 1:
        lay = layouts[0]
        mem = sizing.memory_estimate(arch, t, lay.world, layout=lay)
        thr = speed(lay)
        option = LayoutOption(layout=plan_layout(lay), required_gib_per_gpu=mem.required_gib_per_gpu,
                              tokens_per_second=thr.tokens_per_second, chosen=True,
                              fits=gpu.usable_gib - mem.required_gib_per_gpu >= least_margin_gib,
                              fit=sizing.memory_fit(mem, gpu.usable_gib, least_margin_gib))
        return LayoutPick(lay, mem, thr, (option,), False)
    sized = []
    for lay in layouts:
        mem = sizing.memory_estimate(arch, t, lay.world, layout=lay)
        fits = round(gpu.usable_gib - mem.required_gib_per_gpu, 2) >= least_margin_gib
        sized.append((lay, mem, speed(lay) if fits else None, fits))
    fitting = [x for x in sized if x[3]]
    if fitting:
        # layouts whose memory fits with its interval's upper end first (issue 32), then the fastest
        best = max(fitting, key=lambda x: (sizing.memory_fit(x[1], gpu.usable_gib, least_margin_gib) == "fits",
                                           x[2].tokens_per_second or 0.0, -x[0].model_parallel, -x[0].tp))
    else:
        best = min(sized, key=lambda x: (x[1].required_gib_per_gpu, x[0].model_parallel))
    lay, mem, thr, _ = best
    thr = thr or speed(lay)
    options = tuple(LayoutOption(layout=plan_layout(x[0]), required_gib_per_gpu=x[1].required_gib_per_gpu,
                                 tokens_per_second=None if x[2] is None else x[2].tokens_per_second, fits=x[3],
                                 chosen=x[0] == lay, fit=sizing.memory_fit(x[1], gpu.usable_gib, least_margin_gib))
                    for x in sized)
    return LayoutPick(lay, mem, thr, options, True)
