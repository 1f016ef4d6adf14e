"""The fallback order and the deploy-time zone (trainstack/layout/capacity.py), by property over generated
inputs, and over the sample stacks: every row re-plans to itself when `trainstack up` pins it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from plan_factory import merged
from trainstack.errors import InfeasibleError, InputError
from trainstack.layout.capacity import MAX_CANDIDATES, deploy_zone, fallback_order, planned_zones
from trainstack.plan import CapacityPlan, Candidate
from trainstack.profile import parse_profile, read_yaml_document
from trainstack.rules import planned
from trainstack.stack_config import load_profile_with_overrides

ROOT = Path(__file__).resolve().parents[2]
REGION = "cn-shenzhen"
ZONES = [f"{REGION}-{c}" for c in "abcdef"]
TYPES = [f"ecs.gn{i}.xlarge" for i in range(6)]


class FakeCatalog:
    """``seen_in`` from a table: type -> (zones seen offered, spot zones, spot priced?)."""

    def __init__(self, seen: dict):
        self.seen = seen

    def seen_in(self, region, name):
        row = self.seen.get(name)
        if row is None:
            return None
        zones, spot_zones, spot_priced = row
        return SimpleNamespace(zones=set(zones), spot_zones=set(spot_zones),
                               spot_cny_per_hour=1.0 if spot_priced else None)


seen_rows = st.tuples(st.sets(st.sampled_from(ZONES)), st.sets(st.sampled_from(ZONES)), st.booleans())
candidates = st.builds(
    lambda t, z, spot, feasible, nodes: Candidate(instance_type=t, zone=z, spot=spot, feasible=feasible, nodes=nodes,
                                                  gpus_per_node=8, hourly_cost_cny=10.0 * nodes),
    st.sampled_from(TYPES), st.one_of(st.none(), st.sampled_from(ZONES)), st.booleans(), st.booleans(),
    st.integers(1, 4))


@settings(max_examples=300, deadline=None)
@given(seen=st.dictionaries(st.sampled_from(TYPES), seen_rows), best=candidates,
       alternatives=st.lists(candidates, max_size=10), pinned=st.one_of(st.none(), st.sampled_from(ZONES)))
def test_the_fallback_order_is_the_plan_first_then_each_feasible_type_once_per_zone(seen, best, alternatives, pinned):
    best = best.model_copy(update={"feasible": True, "zone": pinned or best.zone})
    if pinned:
        alternatives = [a.model_copy(update={"zone": pinned}) for a in alternatives]
    profile = SimpleNamespace(region=REGION, zone=pinned)
    rows = fallback_order(profile, FakeCatalog(seen), best, alternatives)
    assert 1 <= len(rows) <= MAX_CANDIDATES
    assert (rows[0].instance_type, rows[0].planned) == (best.instance_type, True)
    if best.zone is not None:
        assert rows[0].zone == best.zone
    assert sum(r.planned for r in rows) == 1
    assert len({(r.instance_type, r.zone) for r in rows}) == len(rows)
    ranked = list(dict.fromkeys(c.instance_type for c in [best, *alternatives] if c.feasible))
    order = list(dict.fromkeys(r.instance_type for r in rows))
    assert order == ranked[:len(order)]  # rank order, never an infeasible type
    for r in rows:
        first = next(c for c in [best, *alternatives] if c.feasible and c.instance_type == r.instance_type)
        assert (r.nodes, r.spot, r.hourly_cost_cny) == (first.nodes, first.spot, first.hourly_cost_cny)
        if pinned:
            assert r.zone == pinned
    for t in order:  # a type's own zone first, then the zones the catalog saw (spot: spot stock)
        zones = [r.zone for r in rows if r.instance_type == t]
        first = next(c for c in [best, *alternatives] if c.feasible and c.instance_type == t)
        if first.zone is not None:
            assert zones[0] == first.zone
        assert zones == sorted(set(zones), key=zones.index)


@settings(max_examples=300, deadline=None)
@given(candidates=st.lists(st.sampled_from(ZONES), unique=True, max_size=6),
       deployed=st.sets(st.sampled_from(ZONES), max_size=2), stock=st.sets(st.sampled_from(ZONES)),
       cpfs=st.one_of(st.none(), st.sets(st.sampled_from(ZONES))))
def test_the_deploy_zone_is_the_deployed_one_else_the_first_candidate_with_stock(candidates, deployed, stock, cpfs):
    call = lambda: deploy_zone("job", REGION, candidates, deployed, stock, cpfs)  # noqa: E731
    usable = [z for z in candidates if z in stock and (cpfs is None or z in cpfs)]
    if len(deployed) > 1:
        with pytest.raises(InputError):
            call()
    elif deployed:
        assert call() == next(iter(deployed))  # whatever the stock says now
    elif usable:
        assert call() == usable[0]
    else:
        with pytest.raises(InfeasibleError) as err:
            call()
        assert all(z in err.value.message for z in candidates)


def test_planned_zones_lists_the_types_zones_in_order():
    cap = CapacityPlan(candidates=fallback_order(SimpleNamespace(region=REGION, zone=None), FakeCatalog(
        {TYPES[0]: ({ZONES[2], ZONES[0]}, set(), False)}), Candidate(instance_type=TYPES[0], zone=ZONES[2], nodes=1,
                                                                      gpus_per_node=1), []))
    assert planned_zones(cap, TYPES[0]) == [ZONES[2], ZONES[0]]
    assert planned_zones(cap, TYPES[1]) == [] and planned_zones(None, TYPES[0]) == []


# ---- the sample stacks: what `trainstack up` may pin re-plans to exactly that row ------------------------

SAMPLES = {
    "llama3-8b-lora": [{}, {"resources": {"capacity": "reserve"}}, {"resources": {"spot": "allow"}}],
    "llama3-70b-full": [{"resources": {"gpus": 32, "deadline_hours": None}}],
    "qwen-7b-spot": [{}, {"resources": {"spot": "allow"}}],
}


def _profile(stack: str, changes: dict, tmp_path: Path, zone=None, instance_type=None):
    path = tmp_path / f"{stack}.yaml"
    doc = merged(read_yaml_document(ROOT / "stacks" / "profiles" / f"{stack}.yaml"), changes)
    path.write_text(json.dumps(doc))
    return load_profile_with_overrides(path, zone=zone, instance_type=instance_type, root=ROOT), path


@pytest.mark.parametrize("stack,changes", [(s, c) for s, cs in SAMPLES.items() for c in cs],
                         ids=lambda v: v if isinstance(v, str) else json.dumps(v, sort_keys=True))
def test_every_row_re_plans_to_itself_within_the_budget(stack, changes, tmp_path):
    profile, path = _profile(stack, changes, tmp_path)
    plan = planned(profile, file=str(path))
    rows = plan.capacity.candidates
    assert rows[0].planned and (rows[0].instance_type, rows[0].zone, rows[0].nodes) == (
        plan.instance_type, plan.zone, plan.nodes)
    r = profile.resources
    for row in rows:
        if r.max_hourly_cost is not None and row.hourly_cost_cny is not None:
            assert row.hourly_cost_cny <= r.max_hourly_cost + 1e-6
        if r.max_total_cost is not None and row.total_cost_cny is not None:
            assert row.total_cost_cny <= r.max_total_cost + 1e-6
        pinned, _ = _profile(stack, changes, tmp_path, zone=row.zone, instance_type=row.instance_type)
        again = planned(pinned, file=str(path))
        assert (again.instance_type, again.zone, again.nodes, again.spot) == (
            row.instance_type, row.zone or again.zone, row.nodes, row.spot), row
        assert again.capacity.zone_pinned == (row.zone is not None)
        if changes.get("resources", {}).get("capacity") == "reserve":
            assert again.capacity.reservation.instance_type == row.instance_type


def test_a_parse_without_overrides_matches_the_profile_file(tmp_path):
    profile, path = _profile("llama3-8b-lora", {}, tmp_path)
    assert profile == parse_profile(read_yaml_document(path), file=str(path), base_dir=path.parent)


# ---- resources.capacity over every combination of the inputs it depends on ---------------------------

@settings(max_examples=60, deadline=None)
@given(capacity=st.sampled_from(["never", "reserve"]), spot=st.sampled_from(["never", "allow", "require"]),
       target=st.sampled_from(["auto", "ecs", "dlc"]), workspace=st.sampled_from([None, "ws-1"]),
       explicit_spot=st.booleans())
def test_reserve_is_refused_with_spot_or_pai_dlc_and_otherwise_planned(capacity, spot, target, workspace,
                                                                          explicit_spot):
    from trainstack.errors import TrainstackError

    doc = read_yaml_document(ROOT / "stacks" / "profiles" / "llama3-8b-lora.yaml")
    resources = {**doc["resources"], "capacity": capacity, "target": target}
    if explicit_spot:
        resources["spot"] = spot
    else:
        resources.pop("spot", None)  # the default: allow
        spot = "allow"
    doc = {**doc, "resources": resources, "dlc": {"workspace_id": workspace} if workspace else {}}
    refused = capacity == "reserve" and (spot != "never" or target == "dlc" or (target == "auto" and workspace))
    try:
        profile = parse_profile(doc, file="p.yaml")
    except TrainstackError as err:
        assert err.exit_code == 2
        if refused:
            assert "resources.capacity" in " ".join(err.lines())
            if spot != "never":
                assert f"resources.spot is {spot}" in " ".join(err.lines()) and "allowed" in " ".join(err.lines())
            return
        assert "capacity" not in " ".join(err.lines())  # refused for another reason (e.g. a DLC rule)
        return
    assert not refused
    try:
        plan = planned(profile, file="p.yaml")
    except TrainstackError:
        return  # infeasible or another rule: nothing about capacity
    if plan.target == "ecs":
        assert (plan.capacity.reservation is not None) == (capacity == "reserve")
        if capacity == "reserve":
            assert not plan.spot and plan.capacity.reservation.instances == plan.nodes
    else:
        assert plan.capacity is None and capacity == "never"
