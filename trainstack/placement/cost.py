"""The one cost model: every billed resource a plan creates, priced (docs/cost.md).

Pure, over the plan's shape (target, nodes, pricing, the self-healing anchor), its storage layout and
its network: the engine prices each candidate with it (budgets and ranking see what that candidate
would create), the Plan assembler prices the winner with it (``Plan.cost``), and the planner prints
that. Run cost = hours x every line's hourly figure; a storage line's hourly figure is its GiB x the
price per GiB-month / the service's billing hours per month (``data/resource_prices.yaml``).

What it counts follows the components: every node's system disk (``components/cluster.py``,
``spot_pool.py``), a dataset disk per node and a checkpoint disk per node for ESSD checkpoints
(``components/storage.py``), CPFS (ECS only; its general-purpose protocol service is no billable
item [CPFS-BILL-EX]), the stack bucket, and the NAT gateway with its EIP when egress is on
(``components/network.py``). What `pulumi destroy` keeps follows ``trainstack.layout.lifecycle``.
A capacity reservation bills as the nodes it holds while they run, so it adds no line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from ..catalog import Catalog, PriceQuote, ResolvedInstance
from ..layout.storage import bucket_name, checkpoint_gib, plan_storage
from ..plan import CostBreakdown, CostItem, OssPlan, StoragePlan
from ..profile import TrainingProfile

INSTANCE, POOL = "alicloud:ecs/instance:Instance", "alicloud:ess/scalingGroup:ScalingGroup"
DISK, CPFS = "alicloud:ecs/ecsDisk:EcsDisk", "alicloud:nas/fileSystem:FileSystem"
BUCKET, NAT, EIP = "alicloud:oss/bucket:Bucket", "alicloud:vpc/natGateway:NatGateway", "alicloud:ecs/eipAddress:EipAddress"
DLC_JOB = "pulumi-python:dynamic:Resource"
#: A month of a resource billed by the hour (8,760 h / 12).
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class Shape:
    """What the compute lines price: the target, the nodes (or pods) and how they are paid."""

    target: Literal["ecs", "dlc"]
    nodes: int
    gpus_per_node: int
    spot: bool = False
    #: on-demand nodes of a spot plan (a multi-node self-healing plan's node 0)
    anchors: int = 0
    #: the nodes run in a self-healing pool (ESS)
    pool: bool = False
    #: ESS may start on-demand pool nodes while no spot node can be had (``spot: allow``)
    compensate: bool = False


def candidate_storage(profile: TrainingProfile, target: str, inst: ResolvedInstance, nodes: int, spot: bool,
                      trainable_params: Optional[int]) -> StoragePlan:
    """The storage a plan of ``nodes`` x ``inst`` creates (the assembler's, for every candidate).

    ECS: disks, CPFS and the stack bucket (``layout.storage.plan_storage``). DLC: no disks (PAI gives
    the pods their own); a quota job checkpoints to the OSS bucket, a public-resources job as the
    profile says (its bucket only for OSS checkpoints)."""
    s = profile.storage
    if target == "ecs":
        return plan_storage(profile, inst, nodes, spot, trainable_params)
    if profile.dlc.resource_id:
        ckpt = s.checkpoint_gib or checkpoint_gib(profile.architecture, profile.training.method, trainable_params)
        return StoragePlan(checkpoint="oss", checkpoint_path="/mnt/data/checkpoints", checkpoint_gib=round(ckpt, 2),
                           oss=OssPlan(bucket=bucket_name(profile),
                                       internal_endpoint=f"oss-{profile.region}-internal.aliyuncs.com"),
                           dataset_uri=s.dataset_uri, dataset_gib=s.dataset_gib, retain_on_destroy=s.retain_on_destroy)
    storage = plan_storage(profile, inst, nodes, spot, trainable_params, stack_bucket_always=False)
    return storage.model_copy(update={"data_disk": None, "checkpoint_disk": None})


# ---- the lines -----------------------------------------------------------------------------------

def _round(v: Optional[float], digits: int = 4) -> Optional[float]:
    return None if v is None else round(v, digits)


def compute_items(quote: PriceQuote, shape: Shape) -> list[CostItem]:
    """The GPU nodes (or the DLC job): one line per way they are paid (a self-healing plan's on-demand
    node 0 apart from its spot pool)."""
    unit = quote.per
    per_node = shape.gpus_per_node if unit == "GPU" else 1
    spot_words = ("; spot price estimated (`trainstack catalog refresh` brings the market's)" if quote.spot_estimated
                  else "; spot price from the same source")
    rows: list[tuple[str, str, int, bool]] = []  # name, type, nodes, spot
    if shape.target == "dlc":
        rows.append(("PAI-DLC job", DLC_JOB, shape.nodes, shape.spot))
    elif shape.spot and shape.anchors:
        rows += [("node 0 (on-demand anchor)", INSTANCE, shape.anchors, False),
                 ("pool nodes (spot)", POOL, shape.nodes - shape.anchors, True)]
    else:
        rows.append(("nodes", POOL if shape.pool else INSTANCE, shape.nodes, shape.spot))
    out = []
    for name, typ, n, spot in rows:
        price = quote.spot_cny_per_hour if spot else quote.on_demand_cny_per_hour
        count = n * per_node
        priced = price is not None
        why = None
        if not priced:
            why = next((lab for lab in quote.labels if lab.startswith("no price known")), quote.source) or \
                f"no {'spot ' if spot else ''}price known for {quote.instance_type}"
        out.append(CostItem(
            name=name, type=typ, kind="compute", count=count, unit=unit, pricing="spot" if spot else "on-demand",
            hourly_cny=_round(price * count) if priced else None,  # type: ignore[operator]
            price_source=(quote.source + (spot_words if spot else "")) if priced else f"unpriced: {why}",
            unpriced=None if priced else why,
            unpriced_code=None if priced else ("no-dlc-price" if shape.target == "dlc" else "no-public-price")))
    if shape.target == "ecs" and shape.pool and shape.spot and shape.compensate and quote.on_demand_cny_per_hour:
        count = (shape.nodes - shape.anchors) * per_node
        out.append(CostItem(
            name="pool nodes (on-demand fallback)", type=POOL, kind="compute", count=count, unit=unit,
            pricing="on-demand", hourly_cny=_round(quote.on_demand_cny_per_hour * count), price_source=quote.source,
            contingent=True,
            note="contingent, not in the totals: billed in place of the spot pool line only while ESS compensates "
                 "missing spot nodes with on-demand ones (spot: allow); `spot: require` never does"))
    return out


def _storage_line(cat: Catalog, region: str, name: str, typ: str, storage: str, level: Optional[str],
                  count: int, gib: float, retained: bool, note: Optional[str] = None) -> CostItem:
    q = cat.resource_quote(region, storage, level)
    per_gib_hour = q.hourly_per_unit
    line_kind = {"cloud_essd": "block_storage", "cloud_auto": "block_storage", "cpfs": "file_storage",
                 "oss": "object_storage"}[storage]
    monthly = None if q.cny is None else round(q.cny * gib * count, 2)
    return CostItem(
        name=name, type=typ, kind=line_kind, count=count, quantity=round(gib, 2), unit="GiB",  # type: ignore[arg-type]
        hourly_cny=None if per_gib_hour is None else round(per_gib_hour * gib * count, 4), monthly_cny=monthly,
        after_destroy_monthly_cny=(monthly if retained else 0.0) if monthly is not None else (None if retained else 0.0),
        retained=retained, price_source=q.source, unpriced=q.unpriced,
        unpriced_code=None if q.unpriced is None else "no-public-price", note=note)


def storage_items(cat: Catalog, region: str, shape: Shape, st: StoragePlan) -> list[CostItem]:
    """The disks, CPFS and the bucket the plan creates, and what `pulumi destroy` keeps of them."""
    out: list[CostItem] = []
    keep = st.retain_on_destroy
    if shape.target == "ecs":
        out.append(_storage_line(cat, region, "system disks", INSTANCE, st.system_disk_category,
                                 st.system_disk_performance_level, shape.nodes, st.system_disk_gib, False,
                                 None))
        for disk, name, retained in ((st.data_disk, "dataset disks", False),
                                     (st.checkpoint_disk, "checkpoint disks", keep)):
            if disk is not None:
                level = disk.performance_level if disk.category == "cloud_essd" else None
                out.append(_storage_line(cat, region, name, DISK, disk.category, level, shape.nodes,
                                         disk.size_gib, retained))
        if st.cpfs is not None:
            out.append(_storage_line(cat, region, "CPFS", CPFS, "cpfs", st.cpfs.storage_type, 1,
                                     st.cpfs.capacity_gib, keep and st.checkpoint == "cpfs",
                                     "billed on the configured capacity; the general-purpose NFS protocol service "
                                     "is no billable item"))
    if st.oss is not None:
        holds = st.checkpoint == "oss" or shape.target == "dlc"
        gib = (st.checkpoint_gib or 0.0) if holds else 0.0
        note = ("versioned: every overwritten checkpoint stays as a noncurrent version and is billed too (delete "
                "old versions or add a lifecycle rule); requests and traffic out billed on top") if holds else \
            "holds the job settings, heartbeats and node programs only (KiB to MiB)"
        out.append(_storage_line(cat, region, "stack bucket" + (" (checkpoints)" if holds else ""), BUCKET,
                                 "oss", None, 1, gib, holds and keep, note))
    return out


def network_items(cat: Catalog, region: str, internet_egress: bool) -> list[CostItem]:
    """The NAT gateway and its EIP (``network.internet_egress``): per hour, traffic on top."""
    if not internet_egress:
        return []
    out = []
    for name, typ, kind in (("NAT gateway", NAT, "nat_gateway"), ("NAT EIP", EIP, "eip")):
        q = cat.resource_quote(region, kind)
        hourly = q.hourly_per_unit
        out.append(CostItem(
            name=name, type=typ, kind="network", count=1, unit="resource", hourly_cny=_round(hourly),
            monthly_cny=None if hourly is None else round(hourly * HOURS_PER_MONTH, 2),
            after_destroy_monthly_cny=0.0, price_source=q.source, unpriced=q.unpriced,
            unpriced_code=None if q.unpriced is None else "no-public-price",
            note=None if q.extra is None else f"not counted: {q.extra}"))
    return out


# ---- the breakdown -------------------------------------------------------------------------------

def with_hours(item: CostItem, hours: Optional[float]) -> CostItem:
    """The line's run cost and, for compute, its month (a contingent line: neither, it may never bill)."""
    if item.contingent:
        return item.model_copy(update={"run_cny": None, "monthly_cny": None, "after_destroy_monthly_cny": 0.0})
    update: dict = {"run_cny": None if item.hourly_cny is None or hours is None else round(item.hourly_cny * hours, 2)}
    if item.kind == "compute":
        update["monthly_cny"] = None if item.hourly_cny is None else round(item.hourly_cny * HOURS_PER_MONTH, 2)
        update["after_destroy_monthly_cny"] = 0.0
    return item.model_copy(update=update)


def breakdown_of(items: list[CostItem], hours: Optional[float]) -> CostBreakdown:
    """Totals over ``items`` (the one place they are summed): unpriced lines are left out and named,
    contingent lines are listed and never summed."""
    listed = [with_hours(i, hours) for i in items]
    items = [i for i in listed if not i.contingent]
    compute = [i for i in items if i.kind == "compute"]
    compute_hourly = None if any(i.hourly_cny is None for i in compute) else round(sum(i.hourly_cny or 0 for i in compute), 4)
    hourly = None if compute_hourly is None else round(compute_hourly + sum(
        i.hourly_cny or 0.0 for i in items if i.kind != "compute"), 4)
    retained_unpriced = any(i.retained and i.after_destroy_monthly_cny is None for i in items)
    unpriced = tuple(i.name for i in items if i.hourly_cny is None)
    return CostBreakdown(
        items=tuple(listed), hours=None if hours is None else round(hours, 3), hourly_cny=hourly,
        total_cny=None if hourly is None or hours is None else round(hourly * hours, 2),
        compute_hourly_cny=compute_hourly,
        compute_total_cny=None if compute_hourly is None or hours is None else round(compute_hourly * hours, 2),
        monthly_cny=None if hourly is None else round(sum(i.monthly_cny or 0.0 for i in items), 2),
        after_destroy_monthly_cny=None if retained_unpriced else round(
            sum(i.after_destroy_monthly_cny or 0.0 for i in items), 2),
        complete=not unpriced, unpriced=unpriced)


def cost_breakdown(cat: Catalog, region: str, quote: PriceQuote, shape: Shape, storage: StoragePlan,
                   internet_egress: bool, hours: Optional[float]) -> CostBreakdown:
    """Every billed line of a plan of ``shape`` with ``storage`` (and a NAT gateway when egress is on),
    for ``hours`` of run (None: no run cost, hourly and monthly figures only)."""
    return breakdown_of(compute_items(quote, shape) + storage_items(cat, region, shape, storage)
                        + network_items(cat, region, internet_egress), hours)


def cost_labels(b: CostBreakdown, cat: Catalog, region: str, shape: Shape, storage: StoragePlan,
                internet_egress: bool) -> list[str]:
    """What the all-in figures rest on, for the plan's labels: borrowed prices, unpriced lines."""
    out = []
    kinds = [(storage.system_disk_category, storage.system_disk_performance_level)] if shape.target == "ecs" else []
    for d in (storage.data_disk, storage.checkpoint_disk) if shape.target == "ecs" else ():
        if d is not None:
            kinds.append((d.category, d.performance_level if d.category == "cloud_essd" else None))
    if shape.target == "ecs" and storage.cpfs is not None:
        kinds.append(("cpfs", storage.cpfs.storage_type))
    if storage.oss is not None:
        kinds.append(("oss", None))
    if internet_egress:
        kinds += [("nat_gateway", None), ("eip", None)]
    for kind, level in dict.fromkeys(kinds):
        q = cat.resource_quote(region, kind, level)
        if q.label:
            out.append(q.label)
    if b.unpriced:
        out.append(f"all-in cost leaves out what has no price ({', '.join(b.unpriced)}): budgets and the ranking "
                   "count the priced lines only; a price book entry prices them (docs/prices.md)")
    return out
