"""The one cost model (trainstack.placement.cost): every billed line a plan creates, its totals summed
in one place, budgets and the ranking on the all-in figures, and the engine, the assembler and the
planner agreeing on them (issue 31 item 4).

The property test draws every combination of what the model prices (ECS or DLC; nodes, GPUs per node;
on-demand, spot, a self-healing anchor and pool; dataset and checkpoint disks at each ESSD level or
AutoPL; checkpoints on CPFS at either tier, OSS or ESSD; retained or not; NAT egress; every catalog
region; hours or none) and checks what must hold for all of them.
"""

from __future__ import annotations

import pathlib
import textwrap

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from trainstack.catalog import load_catalog
from trainstack.errors import InfeasibleError
from trainstack.placement import resolve_all
from trainstack.placement.cost import HOURS_PER_MONTH, Shape, cost_breakdown
from trainstack.plan import CpfsPlan, DataDiskPlan, OssPlan, StoragePlan
from trainstack.profile import parse_profile
from trainstack.reasons import ReasonCode

ROOT = pathlib.Path(__file__).resolve().parents[2]
CAT = load_catalog()
REGIONS = CAT.regions()
TYPES = ("ecs.gn7i-c8g1.2xlarge", "ecs.ebmgn7ex.32xlarge")
ESSD_MIN = {"PL0": 1, "PL1": 20, "PL2": 461, "PL3": 1261}


@st.composite
def disks(draw) -> DataDiskPlan:
    if draw(st.booleans()):
        return DataDiskPlan(category="cloud_auto", size_gib=draw(st.integers(40, 32768)))
    level = draw(st.sampled_from(sorted(ESSD_MIN)))
    return DataDiskPlan(performance_level=level, size_gib=draw(st.integers(ESSD_MIN[level], 32768)))


@st.composite
def cases(draw):
    target = draw(st.sampled_from(("ecs", "dlc")))
    nodes = draw(st.integers(1, 8))
    spot = draw(st.booleans())
    anchors = 1 if target == "ecs" and spot and nodes > 1 and draw(st.booleans()) else 0
    shape = Shape(target=target, nodes=nodes, gpus_per_node=draw(st.sampled_from((1, 8))), spot=spot,
                  anchors=anchors, pool=bool(anchors) or (target == "ecs" and spot and draw(st.booleans())),
                  compensate=draw(st.booleans()))
    checkpoint = draw(st.sampled_from(("cpfs", "oss", "essd") if target == "ecs" else ("oss",)))
    ckpt_gib = draw(st.floats(1, 5000))
    storage = StoragePlan(
        checkpoint=checkpoint, checkpoint_path="/mnt/ckpt", checkpoint_gib=round(ckpt_gib, 2),
        system_disk_performance_level=draw(st.sampled_from(("PL0", "PL1"))),
        data_disk=draw(disks()) if target == "ecs" and draw(st.booleans()) else None,
        checkpoint_disk=draw(disks()) if checkpoint == "essd" else None,
        cpfs=CpfsPlan(capacity_gib=draw(st.integers(3600, 200_000)),
                      storage_type=draw(st.sampled_from(("advance_100", "advance_200"))))
        if checkpoint == "cpfs" else None,
        oss=OssPlan(bucket="b", internal_endpoint="oss-x-internal.aliyuncs.com"),
        retain_on_destroy=draw(st.booleans()))
    hours = draw(st.one_of(st.none(), st.floats(0.1, 2000)))
    return (draw(st.sampled_from(REGIONS)), draw(st.sampled_from(TYPES)), shape, storage,
            draw(st.booleans()), hours)


def _close(a: float, b: float, lines: int) -> bool:
    return abs(a - b) <= 0.0001 * lines + 1e-9


@settings(max_examples=300, deadline=None)
@given(cases())
def test_every_line_and_total_follows_the_one_rule(case):
    region, itype, shape, storage, egress, hours = case
    quote = CAT.quote(region, itype)
    b = cost_breakdown(CAT, region, quote, shape, storage, egress, hours)
    listed, n = b.items, len(b.items)
    # issue 33: the pool's on-demand fallback is listed (priced per hour) when ESS may compensate with
    # on-demand nodes, and never summed: no run, no month, nothing after destroy
    fallback = [i for i in listed if i.contingent]
    may_fall_back = shape.target == "ecs" and shape.pool and shape.spot and shape.compensate
    assert len(fallback) == (1 if may_fall_back and quote.on_demand_cny_per_hour else 0)
    for i in fallback:
        assert i.pricing == "on-demand" and i.kind == "compute" and i.run_cny is None and i.monthly_cny is None
        assert i.count == (shape.nodes - shape.anchors) * (shape.gpus_per_node if quote.per == "GPU" else 1)
        assert i.hourly_cny == round(quote.on_demand_cny_per_hour * i.count, 4) and i.after_destroy_monthly_cny == 0
    items = [i for i in listed if not i.contingent]
    compute = [i for i in items if i.kind == "compute"]
    # compute: one DLC line, the anchor apart from the spot pool, every GPU (or node) counted once
    per = shape.gpus_per_node if quote.per == "GPU" else 1
    assert sum(i.count for i in compute) == shape.nodes * per
    assert len(compute) == (2 if shape.anchors else 1)
    if shape.anchors:
        assert [i.pricing for i in compute] == ["on-demand", "spot"] and compute[0].count == per
    # what the plan creates, and only that
    names = [i.name for i in items]
    assert ("NAT gateway" in names and "NAT EIP" in names) == egress and ("NAT gateway" in names) == egress
    assert ("CPFS" in names) == (shape.target == "ecs" and storage.cpfs is not None)
    assert ("checkpoint disks" in names) == (shape.target == "ecs" and storage.checkpoint_disk is not None)
    assert ("dataset disks" in names) == (shape.target == "ecs" and storage.data_disk is not None)
    assert ("system disks" in names) == (shape.target == "ecs")
    for i in items:
        # unpriced is never 0: no figure, a reason, and the totals name it
        assert (i.hourly_cny is None) == (i.unpriced is not None) == (i.name in b.unpriced)
        assert i.price_source
        if i.unpriced is None and (i.quantity or 0) > 0 and i.kind != "compute":
            assert i.hourly_cny > 0 and i.monthly_cny > 0
        # run and month from the hourly figure; what destroy keeps is exactly the retained lines
        if i.hourly_cny is not None and hours is not None:
            assert i.run_cny == round(i.hourly_cny * hours, 2)
        if i.kind in ("compute", "network") and i.hourly_cny is not None:
            assert i.monthly_cny == round(i.hourly_cny * HOURS_PER_MONTH, 2)
        assert i.after_destroy_monthly_cny == (i.monthly_cny if i.retained else 0.0)
    kept = {i.name for i in items if i.retained}
    expect = set()
    if storage.retain_on_destroy and shape.target == "ecs":
        expect |= {"checkpoint disks"} if storage.checkpoint == "essd" else set()
        expect |= {"CPFS"} if storage.checkpoint == "cpfs" else set()
    if storage.retain_on_destroy and (storage.checkpoint == "oss" or shape.target == "dlc"):
        expect |= {"stack bucket (checkpoints)"}
    assert kept == expect
    # totals: all-in = compute + every priced other line; GPU-only apart; complete iff nothing unpriced
    assert b.complete == (not b.unpriced)
    if any(i.hourly_cny is None for i in compute):
        assert b.hourly_cny is None and b.total_cny is None and b.compute_hourly_cny is None
        return
    assert _close(b.compute_hourly_cny, sum(i.hourly_cny for i in compute), n)
    assert _close(b.hourly_cny, b.compute_hourly_cny + b.other_hourly_cny, n)
    assert b.hourly_cny >= b.compute_hourly_cny
    if hours is not None:
        assert b.total_cny == round(b.hourly_cny * hours, 2)
        assert abs(b.total_cny - sum(i.run_cny or 0 for i in items)) <= 0.01 * n + 0.01
    assert _close(b.monthly_cny, sum(i.monthly_cny or 0 for i in items), n * 100)
    if not any(i.retained and i.after_destroy_monthly_cny is None for i in items):
        assert _close(b.after_destroy_monthly_cny, sum(i.after_destroy_monthly_cny or 0 for i in items), n * 100)


@settings(max_examples=100, deadline=None)
@given(cases(), st.integers(2, 4))
def test_more_storage_never_costs_less_and_a_priced_disk_costs_more(case, factor):
    """A storage edit moves the total: bigger disks or CPFS raise it when priced, never lower it."""
    region, itype, shape, storage, egress, hours = case
    quote = CAT.quote(region, itype)
    grown = storage.model_copy(update={
        "data_disk": storage.data_disk and storage.data_disk.model_copy(
            update={"size_gib": storage.data_disk.size_gib * factor}),
        "cpfs": storage.cpfs and storage.cpfs.model_copy(update={"capacity_gib": storage.cpfs.capacity_gib * factor})})
    before = cost_breakdown(CAT, region, quote, shape, storage, egress, hours)
    after = cost_breakdown(CAT, region, quote, shape, grown, egress, hours)
    if before.hourly_cny is None:
        return
    assert after.hourly_cny >= before.hourly_cny and after.compute_hourly_cny == before.compute_hourly_cny
    changed = [a for a, b in zip(after.items, before.items) if a.quantity != b.quantity and a.hourly_cny is not None]
    if changed:
        assert after.hourly_cny > before.hourly_cny


# ---- the engine, the assembler and the planner agree ---------------------------------------------

def _sample(name: str) -> dict:
    return yaml.safe_load((ROOT / "stacks" / "profiles" / f"{name}.yaml").read_text(encoding="utf-8"))


def _resolve(profile: dict):
    return resolve_all(parse_profile(profile))


def test_the_plan_is_priced_as_the_engine_ranked_it():
    """The winner's all-in figures are the engine's for that candidate (one cost model, called twice)."""
    profile = _sample("llama3-70b-full")
    res = _resolve(profile)
    plan = res.plan
    (best,) = [c for c in res.candidates if c.feasible and (c.instance_type, c.nodes, c.spot, c.zone)
               == (plan.instance_type, plan.nodes, plan.spot, plan.zone)]
    assert best.total_cost_cny == min(c.total_cost_cny for c in res.candidates if c.feasible)  # ranked all-in
    assert plan.hourly_cost_cny == plan.cost.hourly_cny == best.hourly_cost_cny
    assert plan.total_cost_cny == plan.cost.total_cny == best.total_cost_cny
    assert plan.cost.compute_hourly_cny == best.compute_hourly_cny < plan.hourly_cost_cny
    assert all(c.hourly_cost_cny >= c.compute_hourly_cny for c in res.candidates if c.hourly_cost_cny is not None)


def test_a_budget_between_the_gpu_price_and_the_all_in_price_refuses_the_plan():
    """max_hourly_cost counts every billed resource: 10 CNY/h buys the A10 node (9.53) but not its disks."""
    profile = _sample("llama3-8b-lora")
    base = _resolve(profile).plan
    assert base.cost.compute_hourly_cny < 10 < base.hourly_cost_cny
    profile["resources"]["max_hourly_cost"] = 10
    try:
        res = _resolve(profile)
    except InfeasibleError as exc:
        assert "budget" in str(exc)
        return
    assert res.plan.hourly_cost_cny <= 10 and res.plan.instance_type != base.instance_type
    (gone,) = [r for r in res.rejected if r.instance_type == base.instance_type and not r.spot][:1] or [None]
    assert gone is None or gone.reason_code == ReasonCode.HOURLY_BUDGET


def test_max_total_cost_counts_the_disks_too():
    profile = _sample("llama3-8b-lora")
    base = _resolve(profile).plan
    profile["resources"]["max_total_cost"] = round((base.cost.compute_total_cny + base.total_cost_cny) / 2, 2)
    with pytest.raises(InfeasibleError):
        _resolve(profile)


def test_a_price_book_storage_price_moves_the_plan_and_says_whose_it_is(tmp_path):
    profile = _sample("llama3-70b-full")
    base = _resolve(profile).plan
    (disks,) = [i for i in base.cost.items if i.name == "dataset disks"]
    level = base.storage.data_disk.performance_level
    (tmp_path / "prices.yaml").write_text(textwrap.dedent(f"""\
        prices:
          - region: {profile['region']}
            storage: cloud_essd
            performance_level: {level}
            cny_per_gib_month: 0.5
            as_of: 2026-01-01
            source: "storage annex"
        """), encoding="utf-8")
    profile["price_book"] = str(tmp_path / "prices.yaml")
    plan = _resolve(profile).plan
    (mine,) = [i for i in plan.cost.items if i.name == "dataset disks"]
    assert mine.monthly_cny == round(0.5 * disks.quantity * disks.count, 2) < disks.monthly_cny
    assert "price book" in mine.price_source and "storage annex" in mine.price_source
    assert plan.hourly_cost_cny < base.hourly_cost_cny and plan.cost.compute_hourly_cny == base.cost.compute_hourly_cny
