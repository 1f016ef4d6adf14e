"""Which link each parallel dimension's traffic crosses, and at what bandwidth: the one place every
communication term (tensor, context, pipeline, data, expert) reads its bandwidth from.

Ranks are numbered as Megatron-LM numbers them: order ``tp-cp-ep-dp-pp`` (Megatron-LM core_v0.14.0,
23e00ed0963c35382dfe8a5a94fb3cda4d21e133, megatron/core/parallel_state.py:481 ``initialize_model_parallel``
``order``; the groups are cut by ``generate_masked_orthogonal_rank_groups``, :196): tensor parallel
innermost (stride 1), then context (stride tp), then the data-parallel ranks; the ranks that reduce
gradients together are the dp x cp ranks at stride tp (Megatron's dp-cp group), and expert
parallelism takes ``ep`` consecutive ones of them (its expert rank generator ``tp-ep-dp-pp`` with the
expert tensor-parallel size = tp); pipeline outermost (stride tp x cp x dp). torchtitan's device mesh
numbers them the same way (torchtitan 73bb964d8f66f585d977b40fe3de88301cdd03cd
torchtitan/distributed/parallel_dims.py:53 ``build_mesh``: ``pp, dp_replicate, dp_shard, cp, tp``,
outermost first). Ranks fill the nodes in order, rank r on node r // gpus_per_node (Megatron's
docstring there: "adjacent ranks are on the same DGX box").

A group inside one node runs at the node's bus (NVLink/NVSwitch, or PCIe: constants.INTRA_NODE_GBPS,
PCIE_GBPS); a group spanning nodes at the node network (eRDMA/RoCE or VPC TCP, the instance type's
rdma_bandwidth_gbps / network_bandwidth_gbps at constants.NETWORK_EFFICIENCY), shared by the GPUs
of a node that send at once. A layout whose ranks outnumber the GPUs, or whose group spans nodes
with no network between them, gets a typed reason instead of a bandwidth.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

from ..catalog.models import GpuModel
from ..parallel_degrees import Layout
from ..reasons import Reason, ReasonCode, reason
from . import constants as K

#: The dimensions, innermost first, and what their traffic is.
DIMENSIONS = {"tp": "tensor-parallel all-gathers and reduce-scatters", "cp": "context-parallel K/V exchange",
              "dp": "gradient reduction over the dp x cp ranks", "ep": "expert all-to-all",
              "pp": "pipeline sends between stages"}


@dataclass(frozen=True)
class Fabric:
    """A node's two links: the bus between its GPUs and the network between nodes."""

    bus_gbs: float        # per GPU inside a node, GB/s
    node_bytes_s: float   # the node network as achieved, bytes/s (0.0: one node, or none known to carry)
    labels: tuple[str, ...]


@functools.lru_cache(maxsize=1024)
def fabric(gpu: GpuModel, interconnect: str, network: str, network_gbps: Optional[float], nodes: int) -> Fabric:
    """The bus from the interconnect and GPU generation; with several nodes, the network (an unknown
    bandwidth is assumed and labelled; a known 0 or less carries nothing)."""
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
        gbits = K.DEFAULT_NETWORK_GBITS[kind] if network_gbps is None else network_gbps
        if network_gbps is None:
            labels.append(f"node network bandwidth unknown: assumed {gbits:g} Gbit/s {kind}")
        node_bw = max(0.0, gbits) / 8 * 1e9 * K.NETWORK_EFFICIENCY[kind]
    return Fabric(bus, node_bw, tuple(labels))


@dataclass(frozen=True)
class Link:
    """Where one dimension's groups sit: ``inside`` ranks of the group share a node (the group spanning
    the most nodes), ``fewest`` the fewest of any group that share one, over ``nodes`` nodes."""

    dim: str
    size: int
    inside: int
    fewest: int
    nodes: int
    per_node: int
    bus_gbs: float
    node_bytes_s: float

    @property
    def crosses_nodes(self) -> bool:
        return self.nodes > 1

    @property
    def where(self) -> str:
        return "inside a node" if not self.crosses_nodes else "across nodes"

    @property
    def stream_bytes_s(self) -> float:
        """One GPU's point-to-point or all-gather stream: the bus, or its share of the node network."""
        return self.bus_gbs * 1e9 if not self.crosses_nodes else self.node_bytes_s / max(1, self.per_node)

    def ring_seconds(self, volume: float) -> float:
        """A hierarchical ring all-reduce of ``volume`` bytes per GPU: 2 (n-1)/n of it over the bus inside
        the node, then across nodes, where every GPU of a node sends its part at once."""
        seconds = 0.0
        if self.inside > 1:
            seconds += 2 * (self.inside - 1) / self.inside * volume / (self.bus_gbs * 1e9)
        if self.nodes > 1:
            concurrent = max(1, self.per_node // self.inside) if self.inside < self.per_node else 1
            seconds += 2 * (self.nodes - 1) / self.nodes * volume * concurrent / self.node_bytes_s
        return seconds


@dataclass(frozen=True)
class Links:
    """The link of every dimension of a layout on ``nodes`` x ``per_node`` GPUs; ``problem`` when no
    link can carry it (then no bandwidth may be read)."""

    tp: Link
    cp: Link
    dp: Link
    ep: Link
    pp: Link
    labels: tuple[str, ...]
    problem: Optional[Reason] = None
    rep: Optional[Link] = None   # hybrid sharding: the replicas of one shard, reducing its gradients

    def __iter__(self):
        return iter(x for x in (self.tp, self.cp, self.dp, self.ep, self.pp, self.rep) if x is not None)


def links(lay: Layout, gpu: GpuModel, per_node: int, nodes: int, interconnect: str, network: str,
          network_gbps: Optional[float]) -> Links:
    """For each parallel dimension of ``lay``, the link its traffic crosses and its bandwidth."""
    return _links(lay, max(1, int(per_node)), max(1, int(nodes)),
                  fabric(gpu, interconnect, network, network_gbps, max(1, int(nodes))))


@functools.lru_cache(maxsize=16384)
def _links(lay: Layout, per_node: int, nodes: int, fab: Fabric) -> Links:
    def link(dim: str, size: int, stride: int, outer: int) -> Link:
        inside, fewest, spanned = group_span(size, stride, outer, per_node)
        return Link(dim, size, inside, fewest, spanned, per_node, fab.bus_gbs, fab.node_bytes_s)

    same = lay.same_weights
    ep = max(1, min(lay.ep, same))  # expert parallelism within the ranks holding the same weights
    rep = None
    if lay.replicas > 1:  # hybrid sharding: a shard group is consecutive dp ranks, its replicas at its stride
        rep = link("rep", lay.replicas, lay.tp * lay.shard, lay.world // (lay.tp * same))
    out = Links(tp=link("tp", lay.tp, 1, lay.world // lay.tp),
                cp=link("cp", lay.cp, lay.tp, lay.dp * lay.pp),
                dp=link("dp", lay.shard, lay.tp, lay.world // (lay.tp * lay.shard)),
                ep=link("ep", ep, lay.tp, lay.world // (lay.tp * ep)),
                pp=link("pp", lay.pp, lay.tp * lay.cp * lay.dp, 1), labels=fab.labels, rep=rep)
    gpus = per_node * nodes
    if lay.world > gpus:
        return _with(out, reason(ReasonCode.LAYOUT_WORLD_SIZE,
                                 f"layout {lay.label} has {lay.world} ranks; {nodes} node(s) x {per_node} GPU(s) = "
                                 f"{gpus} hold only ranks 0-{gpus - 1}"))
    for lk in out:
        if lk.crosses_nodes and not lk.node_bytes_s > 0:
            return _with(out, reason(ReasonCode.LAYOUT_NO_LINK,
                                     f"layout {lay.label}: the {DIMENSIONS[lk.dim]} ({lk.dim} {lk.size}) span "
                                     f"{lk.nodes} nodes, and no node network carries them (bandwidth 0)"))
    return out


def _with(out: Links, why: Reason) -> Links:
    return Links(out.tp, out.cp, out.dp, out.ep, out.pp, out.labels + (why.message,), why, out.rep)


def group_span(size: int, stride: int, outer: int, per_node: int) -> tuple[int, int, int]:
    """(ranks sharing a node, fewest sharing one, nodes spanned) of the groups of ``size`` ranks
    ``stride`` apart, cut ``outer`` times from consecutive blocks of ``size x stride`` ranks (group
    starts ``a + b size stride``, a < stride, b < outer). Reported for the group spanning the most
    nodes (of those, the one with the fewest ranks on its fullest node); ``fewest`` over all groups."""
    if size <= 1:
        return 1, 1, 1
    if stride >= per_node:  # consecutive members are a node or more apart
        return 1, 1, size
    block = size * stride
    if per_node % stride == 0 and (outer <= 1 or block % per_node == 0 or per_node % block == 0):
        # every group starts on a node's first slot for it: nodes filled per_node / stride at a time
        slots = per_node // stride
        nodes = -(-size // slots)
        return min(size, slots), size - (nodes - 1) * slots, nodes
    return _uneven_span(size, stride, min(outer, per_node), per_node)


@functools.lru_cache(maxsize=8192)
def _uneven_span(size: int, stride: int, outer: int, per_node: int) -> tuple[int, int, int]:
    """group_span where groups start at different places in a node: a group's shape only depends on its
    start modulo ``per_node``, so at most ``per_node`` starts are looked at."""
    P = per_node
    inner = {a % P for a in range(min(stride, P))}
    blocks = {(b * size * stride) % P for b in range(max(1, outer))}
    worst: Optional[tuple[int, int]] = None
    fewest = size
    for start in sorted({(x + y) % P for x in inner for y in blocks}):
        counts = []
        for node in range((start + (size - 1) * stride) // P + 1):
            lo = max(0, -((start - node * P) // stride))             # first member on this node
            hi = min(size - 1, ((node + 1) * P - 1 - start) // stride)  # last member on it
            if hi >= lo:
                counts.append(hi - lo + 1)
        fewest = min(fewest, min(counts))
        shape = (len(counts), max(counts))
        if worst is None or shape[0] > worst[0] or (shape[0] == worst[0] and shape[1] < worst[1]):
            worst = shape
    assert worst is not None
    return worst[1], fewest, worst[0]
