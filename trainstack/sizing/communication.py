"""Communication of a training step: the model-parallel traffic of one micro-batch on a stage
(tensor, context, pipeline) and the data-parallel traffic (gradient sync, ZeRO-3 gathers, the
expert all-to-all). Volumes are counted here; every bandwidth comes from ``links.links``."""

from __future__ import annotations

from typing import Optional

from ..catalog.models import GpuModel
from ..models import Architecture
from ..profile import TrainingSpec
from . import constants as K
from .links import Link, Links, links
from .param_bytes import param_bytes, trainable_params
from .parallel import Layout, Stage, expert_degree, layout_for, micro_batches, shares, stages, tokens_per_gpu
from .shapes import expert_params


# ---- model parallelism: one micro-batch on one stage ------------------------------------------

def tp_collectives(t: TrainingSpec) -> int:
    """All-gathers and reduce-scatters per layer and micro-batch with sequence parallelism: two of each
    in the forward (attention and MLP), their conjugates in the backward, the forward's again when
    full checkpointing recomputes it."""
    return 8 + (4 if t.checkpointing == "full" else 0)


def tp_seconds(arch: Architecture, t: TrainingSpec, stage: Stage, link: Link) -> float:
    """Tensor-parallel communication of one micro-batch on one stage."""
    if stage.tp == 1:
        return 0.0
    volume = tokens_per_gpu(t, stage) * arch.hidden_size * 2.0 * (stage.tp - 1) / stage.tp
    return stage.layers * tp_collectives(t) * volume / link.stream_bytes_s


def cp_seconds(arch: Architecture, t: TrainingSpec, stage: Stage, link: Link) -> float:
    """Context-parallel communication of one micro-batch: per layer the K and V shards are all-gathered
    (torchtitan's default ``allgather`` rotation; Megatron's p2p ring moves the same bytes) forward,
    again and reduce-scattered as gradients backward, again when recomputed; (cp - 1) / cp of the whole
    sequence's K and V (this GPU's heads) each time."""
    if stage.cp == 1:
        return 0.0
    kv = t.micro_batch_size * t.sequence_length * 2 * arch.kv_dim / stage.tp * 2.0
    passes = 3 + (1 if t.checkpointing == "full" else 0)
    return stage.layers * passes * kv * (stage.cp - 1) / stage.cp / link.stream_bytes_s


def pp_seconds(arch: Architecture, t: TrainingSpec, stage: Stage, link: Link, vp: int = 1) -> float:
    """Pipeline point-to-point of one micro-batch: the activation forward and its gradient back
    (sequence-parallel: 1 / tp of it per GPU), once per model chunk the rank holds (interleaving)."""
    if stage.pp == 1:
        return 0.0
    return vp * 2 * tokens_per_gpu(t, stage) * arch.hidden_size * 2.0 / stage.tp / link.stream_bytes_s


def model_parallel_seconds(arch: Architecture, t: TrainingSpec, lay: Layout, stage: Stage, lk: Links,
                           attention_seconds: float) -> float:
    """Tensor-, context- and pipeline-parallel communication of one micro-batch on ``stage``, exposed:
    tensor parallelism and the pipeline's sends are on the critical path; context parallelism's K/V
    exchange hides under the attention compute as far as COMM_OVERLAP allows."""
    if lay.trivial:
        return 0.0
    seconds = tp_seconds(arch, t, stage, lk.tp) * K.TP_COMM_EXPOSED
    if lay.cp > 1:
        cp = cp_seconds(arch, t, stage, lk.cp)
        seconds += max(cp - K.COMM_OVERLAP * min(cp, attention_seconds), 0.0)
    if lay.pp > 1:
        seconds += pp_seconds(arch, t, stage, lk.pp, lay.vp)
    return seconds


def model_parallel_labels(lay: Layout, lk: Links) -> list[str]:
    out = []
    if lay.tp > 1:
        where = "inside a node" if not lk.tp.crosses_nodes else f"across {lk.tp.nodes} nodes (the node network)"
        out.append(f"tensor parallelism over {lay.tp} GPUs {where}: sequence-parallel all-gathers and "
                   "reduce-scatters per layer on the critical path (hand model, not calibrated)")
    if lay.cp > 1:
        out.append(f"context parallelism over {lay.cp} GPUs ({lk.cp.where}): "
                   "K/V all-gathers per layer hidden under attention as far as they go (hand model)")
    if lay.pp > 1:
        out.append(f"pipeline parallelism over {lay.pp} stages ({lk.pp.where}): activations sent between "
                   "stages per micro-batch (hand model)")
    return out


# ---- data parallelism: the gradient sync, ZeRO-3 gathers, the expert all-to-all ----------------

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
    recomputes), (ep - 1) / ep of it off the GPU; the share of its peers off the node (the GPU with
    the fewest on its node) crosses the node network.
    """
    gpus = per_node * nodes
    lay = lay or layout_for(t, gpus, per_node)
    if stage is None:
        stage = stages(arch.num_layers, lay, micro_batches(t, lay))[-1]
    lk = links(lay, gpu, per_node, nodes, interconnect, network, network_gbps)
    blay = param_bytes(arch, t, gpus)
    labels = ["multi-GPU speed uses a ring all-reduce model of gradient sync (not calibrated)", *lk.labels]
    sh = shares(arch, stage)
    ep = expert_degree(arch, t, lay)
    grad_bytes = trainable_params(arch, t) * blay.grad_per_param * (sh.adapters if t.adapters else sh.params)
    if ep > 1 and t.adapters is None:
        frac = expert_params(arch) / arch.params
        grad_bytes = grad_bytes * (1 - frac) + grad_bytes * frac / ep
    sync = lk.dp.ring_seconds(grad_bytes) if lay.shard > 1 else 0.0
    if t.zero_stage >= 3:
        sync /= 2  # a reduce-scatter only: the weights are all-gathered before use (below), not after the step
    if lk.rep is not None:
        # hybrid sharding: each shard's reduced gradients are then all-reduced over its replicas
        sync += lk.rep.ring_seconds(grad_bytes / lay.shard)
        labels.append(f"hybrid sharding: weights sharded over {lay.shard} GPUs ({lk.dp.where}), gradients "
                      f"all-reduced over {lay.replicas} replicas ({lk.rep.where})")
    gathers = 0.0
    if t.zero_stage >= 3 and lay.shard > 1:
        weights = 2.0 * (arch.params if t.adapters is not None else trainable_params(arch, t)) * sh.params
        if ep > 1:
            frac = expert_params(arch) / arch.params
            weights = weights * (1 - frac) + weights * frac / ep
        # two all-gathers (forward, backward), each (n-1)/n of the buffer: a ring's worth
        gathers = lk.dp.ring_seconds(weights)
    alltoall = 0.0
    if ep > 1:
        passes = 4 + (2 if t.checkpointing == "full" else 0)
        k, h = arch.num_experts_per_token, arch.hidden_size
        moe_layers = arch.moe_layers * stage.layers / arch.num_layers
        per_gpu = (tokens_per_gpu(t, stage) / stage.tp * moe_layers * k * h * 2.0 * passes * (ep - 1) / ep)
        cross = (ep - lk.ep.fewest) / ep if lk.ep.crosses_nodes else 0.0
        alltoall = per_gpu * (1 - cross) / (lk.ep.bus_gbs * 1e9)
        if cross:
            alltoall += per_gpu * cross / (lk.ep.node_bytes_s / per_node)
        labels.append(f"expert parallelism over {ep} GPUs: all-to-all of routed tokens, not overlapped "
                      "(hand model, not calibrated)")
    return sync, gathers, alltoall, labels


def sync_seconds(arch: Architecture, t: TrainingSpec, gpu: GpuModel, per_node: int, nodes: int,
                 interconnect: str, network: str, network_gbps: Optional[float]) -> tuple[float, list[str]]:
    """All communication of one step with one micro-batch (gradient sync + ZeRO-3 gathers + all-to-all)."""
    sync, gathers, alltoall, labels = data_parallel_seconds(arch, t, gpu, per_node, nodes, interconnect, network,
                                                            network_gbps)
    return sync + gathers + alltoall, labels
