"""The capacity reservation (profile ``resources.capacity: reserve``): what is declared, in which order, and
what a later `pulumi up` or `pulumi destroy` does to it (from the provider facts, not a hand-kept list)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plan_factory import multi_node_erdma_plan, single_gpu_lora_plan
from test_provider_facts_coverage import uncovered
from trainstack.catalog import load_catalog
from trainstack.catalog.provider_facts import load_provider_facts

ROOT = Path(__file__).resolve().parents[2]
RESERVATION = "ecs/capacityReservation:CapacityReservation"
TOKEN = "alicloud:ecs/capacityReservation:CapacityReservation"
RESERVE = {"resources": {"capacity": "reserve"}}


def reserved_70b(nodes: int = 3):
    return multi_node_erdma_plan(nodes, profile=RESERVE)


@pytest.mark.parametrize("plan_of", [lambda: single_gpu_lora_plan(profile=RESERVE), reserved_70b],
                         ids=["1-node", "3-node"])
def test_the_reservation_holds_the_plans_type_zone_and_nodes_on_demand(engine, plan_of):
    plan = plan_of()
    engine.declare(plan)
    r = engine.one(RESERVATION)
    assert r.inputs["instanceType"] == plan.instance_type
    assert r.inputs["instanceAmount"] == plan.nodes == plan.capacity.reservation.instances
    assert r.inputs["zoneIds"] == [plan.zone]
    assert r.inputs["matchCriteria"] == "Open" and r.inputs["platform"] == "linux"
    assert r.inputs["endTimeType"] == "Unlimited" and "endTime" not in r.inputs
    assert r.inputs["tags"]["trainstack:role"] == "capacity" and r.inputs["tags"]["trainstack:zone"] == plan.zone
    # released by `pulumi destroy`, one at a time: never kept, never two billing at once
    assert not r.protect and not r.retain_on_delete and r.delete_before_replace
    assert all(not n.inputs.get("spotStrategy") or n.inputs["spotStrategy"] == "NoSpot"
               for n in engine.of_type("ecs/instance:Instance"))


def test_the_nodes_are_created_after_the_reservation_holds_their_capacity(engine):
    engine.declare(reserved_70b())
    reservation = engine.one(RESERVATION).urn
    switches = {s.name.rsplit("-network-", 1)[-1]: s for s in engine.of_type("vpc/switch:Switch")}
    assert reservation in switches["vswitch"].dependencies and reservation in switches["eri-vswitch"].dependencies
    # the nodes are in the node vSwitch, so after it
    assert all(switches["vswitch"].urn in n.dependencies for n in engine.of_type("ecs/instance:Instance"))
    # a retained services vSwitch never depends on what `pulumi destroy` deletes (trainstack/preview/teardown.py)
    assert reservation not in switches["services-vswitch"].dependencies


def test_one_destroy_completes_with_a_reservation_and_retained_cpfs(tmp_path):
    """The reservation is deleted by `pulumi destroy`; nothing kept depends on it."""
    import json
    import shutil

    from trainstack.cli import main

    profile = tmp_path / "p.yaml"
    shutil.copy(ROOT / "stacks" / "profiles" / "llama3-70b-full.yaml", profile)
    text = profile.read_text().replace("resources:\n", "resources:\n  capacity: reserve\n", 1)
    profile.write_text(text)
    out = tmp_path / "plan.json"
    assert main(["plan", str(profile), "--format", "json", "--out", str(out)]) in (0, 4)
    doc = json.loads(out.read_text())
    from trainstack.preview.teardown import pinned_deletions

    assert any(r["type"] == TOKEN for r in doc["resources"])
    assert pinned_deletions(doc) == []


def test_the_nodes_inputs_are_the_same_with_or_without_a_reservation(engine_factory):
    """An Open pool matches the nodes by type and zone: no node argument changes, so adding or
    dropping ``capacity: reserve`` on a running stack leaves its nodes alone."""
    with_r = engine_factory()  # one engine at a time: each owns the process-wide mocks while it runs
    with_r.declare(single_gpu_lora_plan(profile=RESERVE))
    without = engine_factory()
    without.declare(single_gpu_lora_plan())
    nodes = lambda e: [n.inputs for n in e.of_type("ecs/instance:Instance")]  # noqa: E731
    assert nodes(with_r) == nodes(without)
    assert without.of_type(RESERVATION) == []


def test_a_stack_deadline_ends_the_reservation_with_the_nodes(engine):
    engine.declare(single_gpu_lora_plan(profile=RESERVE), auto_release_time="2031-01-31T18:00:00Z")
    r = engine.one(RESERVATION).inputs
    assert r["endTimeType"] == "Limited" and r["endTime"] == "2031-01-31T18:00:00Z"
    node = engine.one("ecs/instance:Instance").inputs
    assert node["autoReleaseTime"] == r["endTime"]


def test_the_reservation_id_is_exported_only_when_there_is_one(engine_factory):
    reserved = engine_factory()
    stack = reserved.declare(single_gpu_lora_plan(profile=RESERVE))
    assert reserved.value(stack.outputs["capacity_reservation_id"]).startswith("capacityreservation-")
    assert "capacity_reservation_id" not in engine_factory().declare(single_gpu_lora_plan()).outputs


def test_every_reservation_input_has_provider_facts(engine):
    engine.declare(reserved_70b())
    assert uncovered([engine.one(RESERVATION)]) == []


def test_day_two_of_each_argument_follows_the_provider_source():
    rf = load_provider_facts().resource(TOKEN)
    assert rf is not None and rf.terraform_type == "alicloud_ecs_capacity_reservation"
    arg = lambda name: rf.argument(name)[1]  # noqa: E731
    # more or fewer nodes: ModifyCapacityReservation in place
    assert not arg("instanceAmount").force_new and arg("instanceAmount").update
    for name in ("description", "endTime", "endTimeType", "capacityReservationName"):
        assert not arg(name).force_new and arg(name).update, name
    # another type or zone: a new reservation (delete_before_replace releases the old one first)
    for name in ("instanceType", "zoneIds", "matchCriteria", "platform"):
        assert arg(name).force_new, name


def test_the_reservation_is_priced_at_the_on_demand_rate_of_its_nodes():
    plan = reserved_70b(4)
    quote = load_catalog().quote(plan.region, plan.instance_type)
    assert plan.capacity.reservation.hourly_cny == pytest.approx(quote.on_demand_cny_per_hour * 4, abs=1e-3)
    assert plan.capacity.reservation.hourly_cny == pytest.approx(plan.cost.compute_hourly_cny, abs=1e-3)
    assert any("capacity reservation of 4 x" in label and "CNY/h" in label for label in plan.labels)
