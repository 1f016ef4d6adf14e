"""trainstack's CrossGuard policies: one small factory per policy.

``ALL_POLICIES`` is what the pack (``__main__.py``) and the offline planner (``runner.py``) run;
``DEFAULT_ENFORCEMENT`` is each policy's level unless the policy config overrides it. Facts about
instance types (GPUs, interconnect, RDMA, prices) come from ``trainstack.catalog``, the same
catalog the resolver uses; nothing about a type is written here.

Importable both as ``policies.rules`` (from the repository root: tests, the planner) and as
``rules`` (Pulumi runs the pack with ``policies/`` as the program directory).
"""

from __future__ import annotations

import ipaddress
import math
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

try:
    import trainstack  # noqa: F401  (installed into the pack's virtualenv by requirements.txt)
except ModuleNotFoundError:  # a checkout without `pip install -e ..`: use the checkout's copy
    _ROOT = Path(__file__).resolve().parents[1]
    if (_ROOT / "trainstack" / "__init__.py").is_file():
        sys.path.insert(0, str(_ROOT))

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from trainstack.catalog import TRAINING_RDMA, Catalog, load_catalog
from trainstack.cidrs import ssh_source_problem
from trainstack.errors import TrainstackError
from trainstack.plan import ESSD_MIN_GIB

if __package__:
    from . import _nodes as N
    from . import _props as P
else:  # run by Pulumi from inside policies/
    import _nodes as N  # type: ignore[no-redef]
    import _props as P  # type: ignore[no-redef]

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY

NO_PCIE_MULTI_GPU_TRAINING = "no-pcie-multi-gpu-training"
MULTI_NODE_REQUIRES_RDMA = "multi-node-requires-rdma"
SPOT_REQUIRES_CHECKPOINT_STORAGE = "spot-requires-checkpoint-storage"
ESSD_MINIMUM_SIZE = "essd-minimum-size"
NO_PUBLIC_SSH = "no-public-ssh"
GPU_HOURLY_BUDGET = "gpu-hourly-budget"
KNOWN_INSTANCE_TYPE = "known-instance-type"
NO_SPOT_IN_DEPLOYMENT_SET = "no-spot-in-deployment-set"
CHECKPOINT_STORAGE_PROTECTED = "checkpoint-storage-protected"
REQUIRED_TAGS = "required-tags"
NO_WILDCARD_OSS_ACCESS = "no-wildcard-oss-access"
METADATA_TOKENS_REQUIRED = "metadata-tokens-required"

#: Each policy's level when the policy config does not set one.
DEFAULT_ENFORCEMENT: dict[str, EnforcementLevel] = {
    NO_PCIE_MULTI_GPU_TRAINING: MANDATORY,
    MULTI_NODE_REQUIRES_RDMA: MANDATORY,
    SPOT_REQUIRES_CHECKPOINT_STORAGE: MANDATORY,
    ESSD_MINIMUM_SIZE: MANDATORY,
    NO_PUBLIC_SSH: MANDATORY,
    GPU_HOURLY_BUDGET: MANDATORY,  # not applicable until max_hourly_cost_cny is configured
    KNOWN_INSTANCE_TYPE: MANDATORY,
    NO_SPOT_IN_DEPLOYMENT_SET: MANDATORY,
    CHECKPOINT_STORAGE_PROTECTED: ADVISORY,
    REQUIRED_TAGS: ADVISORY,
    NO_WILDCARD_OSS_ACCESS: MANDATORY,
    # advisory: the ESS scaling configuration of self-healing spot pools cannot require tokens
    # (docs/policies.md "Metadata tokens"); set it mandatory to refuse such pools
    METADATA_TOKENS_REQUIRED: ADVISORY,
}

DEFAULT_REQUIRED_TAGS = [P.NAME_TAG]
RDMA_KINDS = TRAINING_RDMA


def catalog() -> Catalog:
    """The trainstack catalog (loaded once per process)."""
    return load_catalog()


def _level(name: str, level: Optional[EnforcementLevel]) -> EnforcementLevel:
    return level if level is not None else DEFAULT_ENFORCEMENT[name]


def _config(args: Any, key: str, default: Any = None) -> Any:
    value = (args.get_config() or {}).get(key)
    return default if value is None else value


class BudgetUnverified(UnknownValueError):
    """A price the catalog does not know: the budget can't be checked (reported as advisory)."""

    def __init__(self, message: str):  # noqa: D107 (UnknownValueError wants a sentinel)
        Exception.__init__(self, message)
        self.unknown_type_sentinel = None
        self.props: list[str] = []
        self.message = message


# ---- 1. no-pcie-multi-gpu-training ------------------------------------------------------------
def no_pcie_multi_gpu_training(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        node = N.node_of(args.resource_type, P.plain(args.props), args.name, args.urn)
        if node is None or not node.training:
            return
        allowed = set(_config(args, "allowed_types", []))
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
        enforcement_level=_level(NO_PCIE_MULTI_GPU_TRAINING, level),
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
                elif r.rdma == "erdma" and n.kind != "dlc" and not n.high_performance:
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
        enforcement_level=_level(MULTI_NODE_REQUIRES_RDMA, level),
    )


# ---- 3. spot-requires-checkpoint-storage ------------------------------------------------------
def spot_requires_checkpoint_storage(level: Optional[EnforcementLevel] = None) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        cat = catalog()
        spot = [n for n in N.stack_nodes(args.resources)
                if n.spot and n.count != 0 and (n.training or any(cat.knows(t) for t in n.instance_types))]
        if not spot or any(r.resource_type in N.SHARED_STORAGE_TYPES for r in args.resources):
            return
        report(f"{P.names(n.label() for n in spot)}: spot GPU nodes can be reclaimed with 5 minutes' notice "
               "and the stack has no shared checkpoint storage (CPFS, NAS or OSS): add one "
               "(profile storage.checkpoint: cpfs or oss) or use on-demand nodes")

    return StackValidationPolicy(
        name=SPOT_REQUIRES_CHECKPOINT_STORAGE,
        description="Checks whether a stack with spot GPU nodes also declares shared persistent "
                    "checkpoint storage (CPFS or NAS file system, or OSS bucket).",
        validate=validate,
        enforcement_level=_level(SPOT_REQUIRES_CHECKPOINT_STORAGE, level),
    )


# ---- 4. essd-minimum-size ---------------------------------------------------------------------
_LEVELS = sorted(ESSD_MIN_GIB, key=ESSD_MIN_GIB.get)


def _disks(resource_type: str, p: dict) -> Iterable[tuple[str, Any, Any, Any]]:
    """(label, category, performance level, size) of every disk a resource declares."""
    if resource_type in (N.ECS_DISK, N.DISK):
        yield "disk", p.get("category"), p.get("performanceLevel"), p.get("size")
        return
    if resource_type not in N.NODE_TYPES:
        return
    for i, d in enumerate(P.as_list(p.get("dataDisks"))):
        if isinstance(d, dict):
            yield (f"data disk {i}", P.first(d, "category", "diskCategory"), d.get("performanceLevel"),
                   P.first(d, "size", "diskSize"))
    system = p.get("systemDisk")
    if isinstance(system, dict):  # EcsLaunchTemplate
        yield "system disk", system.get("category"), system.get("performanceLevel"), system.get("size")
    elif "systemDiskCategory" in p:
        yield "system disk", p["systemDiskCategory"], p.get("systemDiskPerformanceLevel"), p.get("systemDiskSize")


def essd_minimum_size(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        for label, category, pl, size in _disks(args.resource_type, P.plain(args.props)):
            if P.as_str(category) != "cloud_essd":
                continue
            pl = P.as_str(pl) or "PL1"
            size_gib = P.as_int(size)
            minimum = ESSD_MIN_GIB.get(pl)
            if size_gib is None or minimum is None or size_gib >= minimum:
                continue
            fits = [lv for lv in _LEVELS if ESSD_MIN_GIB[lv] <= size_gib]
            lower = f" or use {fits[-1]} at this size" if fits else ""
            report(f"{args.name}: {label} is cloud_essd {pl} at {size_gib} GiB; {pl} needs at least "
                   f"{minimum} GiB: set size to {minimum} or more{lower}")

    return ResourceValidationPolicy(
        name=ESSD_MINIMUM_SIZE,
        description="Checks whether ESSD disks (data, system and standalone disks) are at least the "
                    "minimum size of their performance level (PL2 461 GiB, PL3 1261 GiB).",
        validate=validate,
        enforcement_level=_level(ESSD_MINIMUM_SIZE, level),
    )


# ---- 5. no-public-ssh -------------------------------------------------------------------------
def _opens_port(port_range: Any, port: int) -> Optional[str]:
    """How a ``"from/to"`` range exposes ``port`` ("port 22", "all ports", ...), else ``None``."""
    text = P.as_str(port_range) or "-1/-1"
    try:
        low, high = (int(x) for x in text.split("/", 1))
    except ValueError:
        return None
    if (low, high) == (-1, -1) or (low <= 1 and high >= 65535):
        return f"all ports ({text})"
    if low <= port <= high:
        return f"port {port}" if low == high else f"ports {text} (including {port})"
    return None


def _ssh_source_problem(cidr: Any) -> Optional[str]:
    """Why this rule's source must not reach SSH (trainstack.cidrs: the profile's rule), or None."""
    text = P.as_str(cidr)
    if text is None or not text.strip():
        return None
    try:
        ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return None  # not a CIDR the provider would accept; nothing to judge
    return ssh_source_problem(text)


def no_public_ssh(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type != N.SECURITY_GROUP_RULE:
            return
        p = P.plain(args.props)
        if (P.as_str(p.get("type")) or "").lower() != "ingress":
            return
        if (P.as_str(p.get("policy")) or "accept").lower() != "accept":
            return
        protocol = (P.as_str(p.get("ipProtocol")) or "").lower()
        if protocol not in ("tcp", "all"):
            return
        exposed = "all ports" if protocol == "all" else _opens_port(p.get("portRange"), 22)
        if exposed is None:
            return
        for key in ("cidrIp", "ipv6CidrIp"):
            problem = _ssh_source_problem(p[key]) if key in p else None
            if problem:
                report(f"{args.name}: ingress rule opens {exposed} to {P.as_str(p[key])}: {problem}; SSH must "
                       "not be reachable from the internet at large: restrict it to your networks (profile "
                       "access.ssh_cidrs) or use a bastion")

    return ResourceValidationPolicy(
        name=NO_PUBLIC_SSH,
        description="Checks whether security group rules open SSH (port 22, or all ports) to the whole "
                    "internet (0.0.0.0/0, ::/0, ::ffff:0.0.0.0/96 and other IPv4-embedding ranges) or to a "
                    "public range wider than /24 (IPv6: /48).",
        validate=validate,
        enforcement_level=_level(NO_PUBLIC_SSH, level),
    )


# ---- 6. gpu-hourly-budget ---------------------------------------------------------------------
def _node_price(cat: Catalog, node: N.Node, region: str) -> tuple[Optional[float], str, str]:
    """(CNY/h per machine, type, basis) at the worst case over the node's types; None = unknown."""
    worst: tuple[Optional[float], str, str] = (None, "", "")
    for t in node.instance_types:
        limit = node.spot_price_limits.get(t, node.spot_price_limits.get("*"))
        if limit is not None:
            price, basis = limit, "spot price limit"
        else:
            price = cat.quote(region, t).on_demand_cny_per_hour if cat.knows(t) else None
            basis = "on-demand" + (" cap of spot" if node.spot else "")
        if price is None:
            return None, t, basis
        if worst[0] is None or price > worst[0]:
            worst = (price, t, basis)
    return worst


def gpu_hourly_budget(level: Optional[EnforcementLevel] = None) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        budget = P.as_number(_config(args, "max_hourly_cost_cny"))
        if budget is None:
            args.not_applicable("max_hourly_cost_cny is not configured")
        if not math.isfinite(budget) or budget < 0:  # fail closed: NaN would turn the budget off
            report(f"max_hourly_cost_cny is {budget}, not a finite number >= 0: the budget cannot be checked; "
                   "fix the policy config")
            return
        cat = catalog()
        default_region = (N.stack_region(args.resources) or _config(args, "region")
                          or cat.settings.get("default_region", "cn-shenzhen"))
        providers = {r.urn: N.provider_region(getattr(r, "provider", None)) for r in args.resources}
        total, lines, unpriced = 0.0, [], []
        for n in N.stack_nodes(args.resources):
            count = 1 if n.count is None else n.count
            if count == 0 or not n.instance_types:
                continue  # a DLC quota job (no ECS spec) is paid by its subscription
            if not (n.training or any(cat.knows(t) for t in n.instance_types)):
                continue  # not a GPU node
            region = n.region or providers.get(n.urn) or default_region
            price, t, basis = _node_price(cat, n, region)
            if price is None:
                unpriced.append(f"{n.name} ({t} in {region})")
                continue
            total += price * count
            lines.append(f"{n.label()} {t} {P.fmt_money(price)} ({basis})")
        if total > budget:
            also = f"; not counted, no price: {P.names(unpriced)}" if unpriced else ""
            report(f"GPU nodes cost {P.fmt_money(total)} CNY/h, above max_hourly_cost_cny "
                   f"{P.fmt_money(budget)}: {P.names(lines)}{also}; use fewer or cheaper nodes, spot "
                   "with a lower spot price limit, or raise max_hourly_cost_cny")
        elif unpriced:
            raise BudgetUnverified(
                f"the catalog has no price for {P.names(unpriced)}, so the budget of "
                f"{P.fmt_money(budget)} CNY/h is not verified (priced nodes: {P.fmt_money(total)} CNY/h); "
                "set a spot price limit or run `trainstack catalog refresh`")

    return StackValidationPolicy(
        name=GPU_HOURLY_BUDGET,
        description="Checks whether the stack's GPU nodes cost more per hour than max_hourly_cost_cny "
                    "(catalog on-demand prices; the price limit for spot nodes that set one).",
        validate=validate,
        enforcement_level=_level(GPU_HOURLY_BUDGET, level),
        config_schema=PolicyConfigSchema(properties={
            "max_hourly_cost_cny": {"type": "number", "minimum": 0,
                                    "description": "Budget for all GPU nodes, CNY per hour; unset = off"},
            "region": {"type": "string",
                       "description": "Region to price in when no alicloud provider region is visible "
                                      "(default: the catalog's default region, cn-shenzhen)"},
        }),
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
        enforcement_level=_level(KNOWN_INSTANCE_TYPE, level),
    )


# ---- 8. no-spot-in-deployment-set -------------------------------------------------------------
def no_spot_in_deployment_set(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type not in (N.INSTANCE, N.INSTANCE_SET, N.LAUNCH_TEMPLATE):
            return
        p = P.plain(args.props)
        if "deploymentSetId" not in p:  # presence only: the id is usually unknown at preview
            return
        ds = p["deploymentSetId"]
        if ds is None or (isinstance(ds, str) and not ds):  # "" removes the instance from its set
            return
        strategy = N.spot_strategy(p)
        if strategy not in N.SPOT_STRATEGIES:
            return
        where = f"deployment set {ds}" if isinstance(ds, str) else "a deployment set"
        report(f"{args.name}: spot instance ({strategy}) in {where}; Alibaba Cloud rejects spot instances "
               "in deployment sets at apply time: drop deploymentSetId for spot nodes or use NoSpot")

    return ResourceValidationPolicy(
        name=NO_SPOT_IN_DEPLOYMENT_SET,
        description="Checks whether spot instances are placed in a deployment set, which Alibaba Cloud "
                    "rejects at apply time.",
        validate=validate,
        enforcement_level=_level(NO_SPOT_IN_DEPLOYMENT_SET, level),
    )


# ---- 9. checkpoint-storage-protected, required-tags (advisory) --------------------------------
def checkpoint_storage_protected(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        p = P.plain(args.props)
        if "tags" not in p or P.role(p) != N.CHECKPOINT:
            return
        if args.opts is not None and args.opts.protect:
            return
        report(f"{args.name}: checkpoint storage is not protected: set protect=True "
               "(profile storage.retain_on_destroy: true) so `pulumi destroy` cannot delete checkpoints")

    return ResourceValidationPolicy(
        name=CHECKPOINT_STORAGE_PROTECTED,
        description="Checks whether checkpoint storage (tagged trainstack:role=checkpoint) has the "
                    "protect resource option set.",
        validate=validate,
        enforcement_level=_level(CHECKPOINT_STORAGE_PROTECTED, level),
    )


def required_tags(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        p = P.plain(args.props)
        if N.is_dlc_job(p) or (args.resource_type not in N.TAGGABLE_TYPES and "tags" not in p):
            return
        have = P.tags(p)
        missing = [k for k in _config(args, "required_tags", DEFAULT_REQUIRED_TAGS)
                   if k not in have or (isinstance(have[k], str) and not have[k].strip())]
        if missing:
            many = len(missing) > 1
            report(f"{args.name}: missing tag{'s' if many else ''} {', '.join(missing)}: add "
                   f"{'them' if many else 'it'} to the resource's tags (profile tags apply to every resource)")

    return ResourceValidationPolicy(
        name=REQUIRED_TAGS,
        description="Checks whether taggable resources carry the required tags.",
        validate=validate,
        enforcement_level=_level(REQUIRED_TAGS, level),
        config_schema=PolicyConfigSchema(properties={
            "required_tags": {"type": "array", "items": {"type": "string"},
                              "default": list(DEFAULT_REQUIRED_TAGS),
                              "description": "Tag keys every taggable resource must have"},
        }),
    )


# ---- 11. no-wildcard-oss-access ---------------------------------------------------------------
RAM_POLICY = "alicloud:ram/policy:Policy"
RAM_ATTACHMENTS = ("alicloud:ram/rolePolicyAttachment:RolePolicyAttachment",
                   "alicloud:ram/userPolicyAttachment:UserPolicyAttachment",
                   "alicloud:ram/groupPolicyAttachment:GroupPolicyAttachment")
#: system policies that grant every bucket of the account
ALL_BUCKET_SYSTEM_POLICIES = ("AliyunOSSFullAccess", "AliyunOSSReadOnlyAccess")


def _statements(document: Any) -> list[dict]:
    import json

    doc = document
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError:
            return []
    if not isinstance(doc, dict):
        return []
    st = doc.get("Statement")
    st = [st] if isinstance(st, dict) else st if isinstance(st, list) else []
    return [x for x in st if isinstance(x, dict)]


def _may_touch_oss(statement: dict) -> bool:
    """Whether a statement's actions can reach OSS (``oss:*``, ``*``, or no readable action list). A
    ``Resource: "*"`` of other services' actions (e.g. ``ecs:ListTagResources``, which has no
    resource-level authorization) grants no bucket."""
    actions = statement.get("Action")
    actions = [actions] if isinstance(actions, str) else actions if isinstance(actions, list) else None
    if not actions:
        return True
    return any(not isinstance(a, str) or a.strip() == "*" or a.strip().lower().startswith("oss:") for a in actions)


def wildcard_oss_resources(document: Any) -> list[str]:
    """The OSS resources of Allow statements whose bucket part holds a wildcard (``*`` or ``?``)."""
    out = []
    for st in _statements(document):
        if str(st.get("Effect", "Allow")).lower() != "allow" or not _may_touch_oss(st):
            continue
        res = st.get("Resource")
        for r in [res] if isinstance(res, str) else res if isinstance(res, list) else []:
            if not isinstance(r, str):
                continue
            if r.strip() == "*":
                out.append(r)
                continue
            parts = r.split(":", 4)
            if len(parts) == 5 and parts[0] == "acs" and parts[1] in ("oss", "*"):
                bucket = parts[4].split("/", 1)[0]
                if "*" in bucket or "?" in bucket or not bucket:
                    out.append(r)
    return out


def no_wildcard_oss_access(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        p = P.plain(args.props)
        if args.resource_type == RAM_POLICY:
            wild = wildcard_oss_resources(p.get("policyDocument", p.get("document")))
            if wild:
                report(f"{args.name}: RAM policy grants OSS access on {P.names(wild)}: a '*' bucket is every "
                       "bucket in the account; name the concrete buckets and prefixes (profile oss:// URIs "
                       "name real buckets)")
        elif args.resource_type in RAM_ATTACHMENTS:
            name = P.as_str(p.get("policyName"))
            if (P.as_str(p.get("policyType")) or "").lower() == "system" and name in ALL_BUCKET_SYSTEM_POLICIES:
                report(f"{args.name}: attaches the system policy {name}, which covers every bucket in the "
                       "account; attach a custom policy naming the buckets instead")

    return ResourceValidationPolicy(
        name=NO_WILDCARD_OSS_ACCESS,
        description="Checks whether RAM policies grant OSS access on a wildcard bucket (acs:oss:*:*:*, "
                    "team-*, Resource \"*\") or attach the all-bucket OSS system policies.",
        validate=validate,
        enforcement_level=_level(NO_WILDCARD_OSS_ACCESS, level),
    )


# ---- 12. metadata-tokens-required -------------------------------------------------------------
def metadata_tokens_required(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type not in (N.INSTANCE, N.LAUNCH_TEMPLATE, N.SCALING_CONFIGURATION, N.INSTANCE_SET):
            return
        p = P.plain(args.props)
        if (P.as_str(p.get("httpEndpoint")) or "enabled").lower() == "disabled":
            return  # no metadata service at all: nothing to steal a role's credentials from
        if args.resource_type == N.SCALING_CONFIGURATION:
            report(f"{args.name}: an ESS scaling configuration cannot require metadata tokens (pulumi-alicloud "
                   "4.0 / terraform-provider-alicloud expose only http_endpoint), so its nodes also answer "
                   "token-less metadata requests, and a process on the node (or an SSRF) can read the RAM role's "
                   "credentials without a token; trainstack's bootstrap uses tokens anyway. Accept it for "
                   "self-healing spot pools, or set this policy mandatory to refuse them")
            return
        if args.resource_type == N.INSTANCE_SET:
            report(f"{args.name}: EcsInstanceSet cannot require metadata tokens; declare ecs.Instance nodes with "
                   "http_tokens=\"required\"")
            return
        if (P.as_str(p.get("httpTokens")) or "optional").lower() != "required":
            report(f"{args.name}: metadata tokens are not required (httpTokens is not \"required\"): set "
                   "http_tokens=\"required\" so only token-holding (IMDSv2) requests reach the RAM role's "
                   "credentials")

    return ResourceValidationPolicy(
        name=METADATA_TOKENS_REQUIRED,
        description="Checks whether ECS instances and launch templates require metadata tokens (IMDSv2), "
                    "and reports ESS scaling configurations, which cannot.",
        validate=validate,
        enforcement_level=_level(METADATA_TOKENS_REQUIRED, level),
    )


#: Factories in pack order (the order policies are listed and run in).
FACTORIES: list[Callable[..., Any]] = [
    no_pcie_multi_gpu_training,
    multi_node_requires_rdma,
    spot_requires_checkpoint_storage,
    essd_minimum_size,
    no_public_ssh,
    gpu_hourly_budget,
    known_instance_type,
    no_spot_in_deployment_set,
    checkpoint_storage_protected,
    required_tags,
    no_wildcard_oss_access,
    metadata_tokens_required,
]

ALL_POLICIES: list[Any] = [factory() for factory in FACTORIES]
POLICIES_BY_NAME: dict[str, Any] = {p.name: p for p in ALL_POLICIES}
assert list(POLICIES_BY_NAME) == list(DEFAULT_ENFORCEMENT), "DEFAULT_ENFORCEMENT must list every policy"
