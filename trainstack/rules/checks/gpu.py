"""GPU training nodes against the catalog: multi-GPU nodes need NVLink, multi-node training needs
RDMA in one zone, every GPU type must be one the catalog knows, and a self-healing cluster's TCP."""

from __future__ import annotations

import re
from typing import Iterator, Sequence

from ...catalog import TRAINING_RDMA, Catalog
from ...errors import TrainstackError
from ..stack_view import GpuNode, StackView, known
from . import Finding

ZONE_TAG = "trainstack:zone"
_GPU_FAMILY = re.compile(r"^ecs\.(?:ebm|scc|v|s)?gn\d")


def looks_like_gpu_type(name: str) -> bool:
    """ECS GPU family names: gn*, ebmgn*, sccgn*, vgn*, sgn* (CPU types are out of scope)."""
    return bool(_GPU_FAMILY.match(name))


def names(items, limit: int = 6) -> str:
    """``a, b, c`` (and ``... (N more)`` past ``limit``) for one-line messages."""
    items = list(items)
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def training_nodes(view: StackView) -> list[GpuNode]:
    return [n for n in view.nodes if n.training and n.count != 0 and not n.is_template]


def machines(nodes: Sequence[GpuNode]) -> int:
    return sum(1 if n.count is None else n.count for n in nodes)


# ---- no-pcie-multi-gpu-training ----------------------------------------------------------------
def no_pcie_multi_gpu_training(nodes: Sequence[GpuNode], settings: dict, cat: Catalog) -> Iterator[Finding]:
    allowed = set(settings.get("allowed_types") or [])
    for node in nodes:
        if not node.training:
            continue
        for t in node.instance_types:
            if t in allowed or not cat.knows(t):  # unknown types: known-instance-type
                continue
            r = cat.instance(t)
            gpus = r.gpu_count if node.gpus_per_pod is None else min(r.gpu_count, node.gpus_per_pod)
            if gpus > 1 and r.interconnect == "pcie":
                gpu = f" {r.gpu.name}" if r.gpu else ""
                alts = cat.nvlink_alternatives(r.gpu_count)
                use = (f"use {', '.join(alts)}, or 1-GPU nodes" if alts
                       else "use 1-GPU nodes (the catalog has no NVLink type this size)")
                yield Finding(f"{node.name}: {t} has {r.gpu_count}{gpu} GPUs on PCIe only; multi-GPU training "
                              f"needs NVLink: {use} (or list {t} in allowed_types)", node.name)


# ---- multi-node-requires-rdma ------------------------------------------------------------------
def _rdma_alternatives(cat: Catalog, gpu_count: int, limit: int = 4) -> list[str]:
    rows = [r for r in cat.resolved_instances()
            if r.trainable and r.rdma in TRAINING_RDMA and r.gpu_count == gpu_count
            and (gpu_count == 1 or r.multi_gpu_training_ok)]
    return [r.name for r in rows[:limit]]


def self_healing(nodes: Sequence[GpuNode]) -> bool:
    """A multi-node self-healing cluster: an ESS pool among several training nodes (trainstack's node 0
    plus its pool). Where its eRDMA types run without HighPerformance interfaces (a provider
    ScalingConfiguration cannot set them), self-healing-over-tcp reports it instead (an RDMA-class type
    and one zone are still required here)."""
    return any(n.kind == "ess" for n in nodes)


def _found(n: GpuNode, message: str) -> Finding:
    return Finding(message, n.name if n.urn else None, n.urn or None)


def multi_node_requires_rdma(view: StackView, settings: dict, cat: Catalog) -> Iterator[Finding]:
    nodes = training_nodes(view)
    total = machines(nodes)
    if total <= 1:
        return
    pooled = self_healing(nodes)
    for n in nodes:
        if n.kind == "dlc" and n.rdma_enabled is not True:
            yield _found(n, f"{n.name}: DLC job with {n.count} pods (of {total} training nodes) runs without RDMA: "
                            "set enable_rdma: true on an eRDMA/RoCE ecs_spec")
        for t in n.instance_types:
            if not cat.knows(t):  # known-instance-type reports it
                continue
            r = cat.instance(t)
            if r.rdma not in TRAINING_RDMA:
                alts = _rdma_alternatives(cat, r.gpu_count)
                what = ("has RDMA support unverified in the catalog" if r.rdma == "unverified"
                        else "has no RDMA (no eRDMA or RoCE)")
                use = f"use {', '.join(alts)}" if alts else "use an eRDMA/RoCE type"
                yield _found(n, f"{n.name}: {t} {what}; {total} training nodes need RDMA between nodes: "
                                f"{use}, or train on one node")
            elif r.rdma == "erdma" and n.kind != "dlc" and not n.high_performance and not pooled:
                how = ("EcsInstanceSet cannot configure eRDMA: declare ecs.Instance nodes with "
                       if n.kind == "instance-set" else "set ")
                yield _found(n, f"{n.name}: {t} supports eRDMA but no HighPerformance interface is configured; "
                                f"{how}networkInterfaceTrafficMode \"HighPerformance\" on the primary ENI "
                                "(or attach an EcsNetworkInterface in HighPerformance mode)")
    zones: dict[str, list[str]] = {}
    for n in nodes:
        if n.kind == "dlc":  # PAI places DLC pods itself
            continue
        zone = known(n.zone)
        zone = zone if isinstance(zone, str) and zone else None
        if zone is None:
            yield _found(n, f"{n.name}: training node has no {ZONE_TAG} tag; multi-node training needs every "
                            f"node in one zone: tag it {ZONE_TAG}=<zone>")
            continue
        zones.setdefault(zone, []).append(n.label())
    if len(zones) > 1:
        spread = "; ".join(f"{z}: {names(ns)}" for z, ns in sorted(zones.items()))
        yield Finding(f"training nodes span {len(zones)} zones ({spread}); RDMA only reaches within one zone: "
                      "place every training node in one zone")


# ---- self-healing-over-tcp ---------------------------------------------------------------------
def self_healing_over_tcp(view: StackView, settings: dict, cat: Catalog) -> Iterator[Finding]:
    nodes = training_nodes(view)
    if machines(nodes) <= 1 or not self_healing(nodes):
        return
    for n in nodes:
        slow = [t for t in n.instance_types if cat.knows(t) and cat.instance(t).rdma == "erdma"]
        if slow and n.kind != "dlc" and not n.high_performance:
            yield _found(n, f"{n.name}: a self-healing cluster's node has no HighPerformance interface on an eRDMA "
                            f"type ({', '.join(slow)}), so NCCL talks TCP on every rank (it needs one transport): "
                            "declare the pool's scaling configuration with networkInterfaces (a Standard primary "
                            "and a HighPerformance secondary: trainstack's kind: ess-scaling-configuration), or "
                            "accept TCP for self-healing")


# ---- known-instance-type -----------------------------------------------------------------------
def _family(name: str) -> str:
    return name.removeprefix("ecs.").split("-")[0].split(".")[0]


def known_instance_type(nodes: Sequence[GpuNode], settings: dict, cat: Catalog) -> Iterator[Finding]:
    for node in nodes:
        for t in node.instance_types:
            if cat.knows(t):
                continue
            if not node.training and (_family(t) in cat.excluded_families or not looks_like_gpu_type(t)):
                continue  # CPU types, and vGPU slices not used for training, are out of scope
            try:
                cat.instance(t)
            except TrainstackError as exc:
                problem = exc.problems[0] if exc.problems else None
                why = problem.message if problem else "unknown instance type"
                hints = list(problem.suggestions) if problem else []
                guess = f"; did you mean {' or '.join(hints)}?" if hints else ""
                yield Finding(f"{node.name}: {why}: {t}{guess} (`trainstack catalog` lists every known type)",
                              node.name)
