"""GPU training nodes against the catalog: multi-GPU nodes need NVLink, multi-node training needs
RDMA in one zone, and every GPU type must be one the catalog knows.
"""

from __future__ import annotations

from typing import Optional

# _base before trainstack: from a bare checkout it puts the checkout's trainstack on sys.path
if __package__:
    from ._base import (
        KNOWN_INSTANCE_TYPE,
        MULTI_NODE_REQUIRES_RDMA,
        NO_PCIE_MULTI_GPU_TRAINING,
        SELF_HEALING_OVER_TCP,
        catalog,
        config_value,
        level_or_default,
    )
    from . import _nodes as N
    from . import _props as P
else:  # run by Pulumi from inside policies/
    from _base import (
        KNOWN_INSTANCE_TYPE,
        MULTI_NODE_REQUIRES_RDMA,
        NO_PCIE_MULTI_GPU_TRAINING,
        SELF_HEALING_OVER_TCP,
        catalog,
        config_value,
        level_or_default,
    )  # type: ignore[no-redef]
    import _nodes as N  # type: ignore[no-redef]
    import _props as P  # type: ignore[no-redef]

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from trainstack.catalog import TRAINING_RDMA, Catalog
from trainstack.errors import TrainstackError


RDMA_KINDS = TRAINING_RDMA


# ---- 1. no-pcie-multi-gpu-training ------------------------------------------------------------
def no_pcie_multi_gpu_training(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        node = N.node_of(args.resource_type, P.plain(args.props), args.name, args.urn)
        if node is None or not node.training:
            return
        allowed = set(config_value(args, "allowed_types", []))
        cat = catalog()
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
                report(f"{args.name}: {t} has {r.gpu_count}{gpu} GPUs on PCIe only; multi-GPU training "
                       f"needs NVLink: {use} (or list {t} in allowed_types)")

    return ResourceValidationPolicy(
        name=NO_PCIE_MULTI_GPU_TRAINING,
        description="Checks whether training nodes (ECS instances, scaling configurations, DLC jobs) "
                    "with more than one GPU have NVLink/NVSwitch between them rather than PCIe only.",
        validate=validate,
        enforcement_level=level_or_default(NO_PCIE_MULTI_GPU_TRAINING, level),
        config_schema=PolicyConfigSchema(properties={
            "allowed_types": {"type": "array", "items": {"type": "string"}, "default": [],
                              "description": "PCIe multi-GPU types accepted anyway "
                                             "(e.g. data-parallel jobs without GPU-to-GPU traffic)"},
        }),
    )


# ---- 2. multi-node-requires-rdma --------------------------------------------------------------
def _rdma_alternatives(cat: Catalog, gpu_count: int, limit: int = 4) -> list[str]:
    rows = [r for r in cat.resolved_instances()
            if r.trainable and r.rdma in RDMA_KINDS and r.gpu_count == gpu_count
            and (gpu_count == 1 or r.multi_gpu_training_ok)]
    return [r.name for r in rows[:limit]]


def multi_node_requires_rdma(level: Optional[EnforcementLevel] = None) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        cat = catalog()
        nodes = [n for n in N.stack_nodes(args.resources) if n.training and n.count != 0]
        total = sum(1 if n.count is None else n.count for n in nodes)
        if total <= 1:
            return
        pooled = _self_healing(nodes)
        for n in nodes:
            if n.kind == "dlc" and n.rdma_enabled is not True:
                report(f"{n.name}: DLC job with {n.count} pods (of {total} training nodes) runs without RDMA: "
                       "set enable_rdma: true on an eRDMA/RoCE ecs_spec", n.urn or None)
            for t in n.instance_types:
                if not cat.knows(t):  # known-instance-type reports it
                    continue
                r = cat.instance(t)
                if r.rdma not in RDMA_KINDS:
                    alts = _rdma_alternatives(cat, r.gpu_count)
                    what = ("has RDMA support unverified in the catalog" if r.rdma == "unverified"
                            else "has no RDMA (no eRDMA or RoCE)")
                    use = f"use {', '.join(alts)}" if alts else "use an eRDMA/RoCE type"
                    report(f"{n.name}: {t} {what}; {total} training nodes need RDMA between nodes: "
                           f"{use}, or train on one node", n.urn or None)
                elif r.rdma == "erdma" and n.kind != "dlc" and not n.high_performance and not pooled:
                    how = ("EcsInstanceSet cannot configure eRDMA: declare ecs.Instance nodes with "
                           if n.kind == "instance-set" else "set ")
                    report(f"{n.name}: {t} supports eRDMA but no HighPerformance interface is configured; "
                           f"{how}networkInterfaceTrafficMode \"HighPerformance\" on the primary ENI "
                           "(or attach an EcsNetworkInterface in HighPerformance mode)", n.urn or None)
        zones: dict[str, list[str]] = {}
        for n in nodes:
            if n.kind == "dlc":  # PAI places DLC pods itself
                continue
            zone = P.as_str(n.zone)
            if zone is None:
                report(f"{n.name}: training node has no {P.ZONE_TAG} tag; multi-node training needs every "
                       f"node in one zone: tag it {P.ZONE_TAG}=<zone>", n.urn or None)
                continue
            zones.setdefault(zone, []).append(n.label())
        if len(zones) > 1:
            spread = "; ".join(f"{z}: {P.names(ns)}" for z, ns in sorted(zones.items()))
            report(f"training nodes span {len(zones)} zones ({spread}); RDMA only reaches within one zone: "
                   "place every training node in one zone")

    return StackValidationPolicy(
        name=MULTI_NODE_REQUIRES_RDMA,
        description="Checks whether more than one GPU training node uses RDMA-capable types (eRDMA with "
                    "a HighPerformance interface, or RoCE), all in the same trainstack:zone.",
        validate=validate,
        enforcement_level=level_or_default(MULTI_NODE_REQUIRES_RDMA, level),
    )



# ---- 13. self-healing-over-tcp ----------------------------------------------------------------
def _self_healing(nodes) -> bool:
    """A multi-node self-healing cluster: an ESS pool among several training nodes (trainstack's node 0
    plus its pool). Its eRDMA types run without HighPerformance interfaces by necessity, which
    self-healing-over-tcp reports instead (an RDMA-class type and one zone are still required here)."""
    return any(n.kind == "ess" for n in nodes)


def self_healing_over_tcp(level: Optional[EnforcementLevel] = None) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        nodes = [n for n in N.stack_nodes(args.resources) if n.training and n.count != 0]
        if sum(1 if n.count is None else n.count for n in nodes) <= 1 or not _self_healing(nodes):
            return
        cat = catalog()
        for n in nodes:
            slow = [t for t in n.instance_types if cat.knows(t) and cat.instance(t).rdma == "erdma"]
            if slow and n.kind != "dlc" and not n.high_performance:
                report(f"{n.name}: a self-healing cluster's nodes talk TCP, not eRDMA ({', '.join(slow)}): an ESS "
                       "pool node cannot get a HighPerformance interface through pulumi-alicloud 4.0, and NCCL needs "
                       "one transport on every rank; the plan is sized for TCP. Accept it for self-healing, or set "
                       "this policy mandatory to refuse such clusters", n.urn or None)

    return StackValidationPolicy(
        name=SELF_HEALING_OVER_TCP,
        description="Checks whether a multi-node self-healing cluster (an ESS pool of training nodes) runs its "
                    "eRDMA types over TCP.",
        validate=validate,
        enforcement_level=level_or_default(SELF_HEALING_OVER_TCP, level),
    )

# ---- 7. known-instance-type -------------------------------------------------------------------
def _family(name: str) -> str:
    return name.removeprefix("ecs.").split("-")[0].split(".")[0]


def known_instance_type(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        node = N.node_of(args.resource_type, P.plain(args.props), args.name, args.urn)
        if node is None:
            return
        cat = catalog()
        for t in node.instance_types:
            if cat.knows(t):
                continue
            if not node.training and (_family(t) in cat.excluded_families or not N.looks_like_gpu_type(t)):
                continue  # CPU types, and vGPU slices not used for training, are out of scope
            try:
                cat.instance(t)
            except TrainstackError as exc:
                problem = exc.problems[0] if exc.problems else None
                why = problem.message if problem else "unknown instance type"
                hints = list(problem.suggestions) if problem else []
                guess = f"; did you mean {' or '.join(hints)}?" if hints else ""
                report(f"{args.name}: {why}: {t}{guess} (`trainstack catalog` lists every known type)")

    return ResourceValidationPolicy(
        name=KNOWN_INSTANCE_TYPE,
        description="Checks whether the GPU instance types of nodes, scaling configurations and DLC "
                    "jobs are known to the trainstack catalog.",
        validate=validate,
        enforcement_level=level_or_default(KNOWN_INSTANCE_TYPE, level),
    )
