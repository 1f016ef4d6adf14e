"""Communication of a training step: the model-parallel traffic of one micro-batch on a stage
(tensor, context, pipeline) and the data-parallel traffic (gradient sync, ZeRO-3 gathers, the
expert all-to-all), from the links between the ranks."""

from __future__ import annotations

from typing import Optional

from ..catalog.models import GpuModel
from ..models import Architecture
from ..profile import TrainingSpec
from . import constants as K
from . import parallel as P
from .param_bytes import param_bytes, trainable_params
from .parallel import (
    Layout, Stage, expert_degree, layout_for, micro_batches, placement, ring_seconds, shares, span, stages, tokens_per_gpu,
)
from .shapes import expert_params


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


def node_links(gpu: GpuModel, interconnect: str, network: str, network_gbps: Optional[float],
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


def data_parallel_seconds(arch: Architecture, t: TrainingSpec, gpu: GpuModel, per_node: int, nodes: int,
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
    bus, node_bw, labels = node_links(gpu, interconnect, network, network_gbps, nodes)
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


def sync_seconds(arch: Architecture, t: TrainingSpec, gpu: GpuModel, per_node: int, nodes: int,
                  interconnect: str, network: str, network_gbps: Optional[float]) -> tuple[float, list[str]]:
    """All communication of one step with one micro-batch (gradient sync + ZeRO-3 gathers + all-to-all)."""
    sync, gathers, alltoall, labels = data_parallel_seconds(arch, t, gpu, per_node, nodes, interconnect, network,
                                                    network_gbps)
    return sync + gathers + alltoall, labels
