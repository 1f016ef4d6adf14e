"""The channel beyond properties, through policies/runner.py: a GPU node's planned price (the tag
``trainstack:planned-price``, the DLC job's ``on_demand_cny_per_hour``/``price_source``) is what
``gpu-hourly-budget`` prices it at; a resource without it (a hand-written stack) is priced from the
catalog as before."""

from __future__ import annotations

import pathlib

import pytest

from policies.runner import run_policies
from policy_testkit import DYNAMIC, INSTANCE, UNKNOWN, training_node
from trainstack.plan import PlannedPrice
from trainstack.preview.planner import plan_source
from trainstack.preview.sources import Source, find_project
from trainstack.tags import PLANNED_PRICE, node_tags, parse_price_text, planned_price, price_text

import plan_factory as F

ROOT = pathlib.Path(__file__).resolve().parents[2]
A10 = "ecs.gn7i-c8g1.2xlarge"  # 9.5326 CNY/h in the catalog snapshot
BUDGET = {"gpu-hourly-budget": {"max_hourly_cost_cny": 8}}


def _budget(resources, config=BUDGET) -> list[dict]:
    return [v for v in run_policies(resources, config) if v["policy"] == "gpu-hourly-budget"]


def _node(tag=None):
    inputs = training_node(A10, zone="cn-shenzhen-e")
    if tag is not None:
        inputs["tags"][PLANNED_PRICE] = tag
    return {"type": INSTANCE, "name": "node-0", "inputs": inputs, "provider_region": "cn-shenzhen"}


def test_a_node_carrying_its_planned_price_is_priced_from_it():
    assert _budget([_node("6.0000 CNY/h price-book")]) == []
    (v,) = _budget([_node("6.0000 CNY/h price-book")], {"gpu-hourly-budget": {"max_hourly_cost_cny": 5}})
    assert "node-0 ecs.gn7i-c8g1.2xlarge 6.00 (on-demand, price-book)" in v["message"]


@pytest.mark.parametrize("tag", [None, "cheap", "6 CNY", ""])
def test_without_a_planned_price_of_trainstack_the_catalog_prices_it(tag):
    (v,) = _budget([_node(tag)])
    assert "9.53 (on-demand)" in v["message"] and v["level"] == "mandatory"


def test_an_unknown_planned_price_is_an_advisory_cant_run():
    (v,) = _budget([_node(UNKNOWN)])
    assert v["level"] == "advisory" and "can't run policy 'gpu-hourly-budget'" in v["message"]


@pytest.mark.parametrize("spelling", [("on_demand_cny_per_hour", "price_source"), ("onDemandCnyPerHour", "priceSource")])
def test_a_dlc_job_carries_its_price_per_pod_as_plain_inputs(spelling):
    price, source = spelling
    job = {"type": DYNAMIC, "name": "job", "inputs": {"kind": "pai-dlc-job", "ecs_spec": A10, "pod_count": 2,
                                                       price: 3.0, source: "price-book"}}
    assert _budget([job]) == []  # 2 pods x 3.0 (the team's DLC price), not 2 x 9.53 (the ECS list price)
    quota = {"type": DYNAMIC, "name": "job", "inputs": {"kind": "pai-dlc-job", "resource_id": "quota-abc",
                                                         "pod_count": 2, price: 160.0, source: "price-book"}}
    (v,) = _budget([quota])
    assert "job (x2) quota quota-abc 160.00 (on-demand, price-book)" in v["message"]


def test_the_tag_text_round_trips_and_counts_against_the_tag_limit():
    for value in (9.5326, 6.0, 1234.5678):
        price = PlannedPrice(cny_per_hour=value, source="snapshot")
        assert parse_price_text(price_text(price)) == price
    plan = F.single_gpu_lora_plan()
    assert planned_price(plan) == PlannedPrice(cny_per_hour=plan.prices.on_demand_cny_per_hour, source="snapshot")
    tags = node_tags(plan, "cn-shenzhen-e", 0, "digest")
    assert parse_price_text(tags[PLANNED_PRICE]) == planned_price(plan)
    assert len([k for k in tags if k.startswith("trainstack:")]) == 8  # 20 minus these: 12 profile tags at most


def test_the_recorded_program_carries_the_price_book_to_the_runner(monkeypatch):
    """The real program on the issue-30 profile (price book 6.0, catalog 9.53): the runner prices the node
    it declared from its tag, so a budget between the two passes and one below both is refused."""
    monkeypatch.chdir(ROOT)
    captured: dict = {}

    def runner(resources, config):
        captured["resources"] = resources
        return []

    path = ROOT / "tests" / "data" / "rule_book" / "issue30_price_book_budget.yaml"
    plan_source(Source("profile", str(path), path), find_project(), policy_runner=runner)
    assert _budget(captured["resources"]) == []
    (v,) = _budget(captured["resources"], {"gpu-hourly-budget": {"max_hourly_cost_cny": 5}})
    assert "llama3-8b-lora-cluster-node-0 ecs.gn7i-c8g1.2xlarge 6.00 (on-demand, price-book)" in v["message"]
