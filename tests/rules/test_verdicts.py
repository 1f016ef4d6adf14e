"""The rule book's policy layer on its own: the one config loader, the verdict runner, the budget's price
channel, and the pack built from the same specs."""

from __future__ import annotations

import json

import pytest

from policies.rules import ALL_POLICIES
from trainstack.errors import InputError
from trainstack.plan import PlannedPrice
from trainstack.rules import plan_verdicts
from trainstack.rules.policy_book import POLICY_SPECS
from trainstack.rules.policy_config import PolicyConfigError, load_policy_config, resolve_policy_config
from trainstack.rules.stack_view import GpuNode, StackView, Storage, Unknown
from trainstack.rules.verdicts import CHECKS, policy_verdicts

import plan_factory as F

A10 = "ecs.gn7i-c8g1.2xlarge"
INSTANCE = "alicloud:ecs/instance:Instance"


def _node(name="n", **over) -> GpuNode:
    return GpuNode(**{"name": name, "urn": f"urn:{name}", "resource_type": INSTANCE, "kind": "ecs",
                      "instance_types": (A10,), "training": True, "zone": "cn-shenzhen-e", **over})


def test_the_pack_is_built_from_the_rule_books_specs():
    assert [p.name for p in ALL_POLICIES] == [s.name for s in POLICY_SPECS] == list(CHECKS)
    for policy, spec in zip(ALL_POLICIES, POLICY_SPECS):
        assert policy.description == spec.description and policy.enforcement_level.value == spec.level
        assert (policy.config_schema.properties if policy.config_schema else {}) == spec.config_schema


# ---- the one loader --------------------------------------------------------------------------------
@pytest.mark.parametrize("doc, key, text", [
    ({"no-such-policy": "mandatory"}, "no-such-policy", "unknown policy 'no-such-policy'"),
    ({"gpu-hourly-budget": {"max_hourly_cost_cny": -1}}, "gpu-hourly-budget.max_hourly_cost_cny", "at least 0"),
    ({"gpu-hourly-budget": {"max_cost": 5}}, "gpu-hourly-budget.max_cost", "unknown setting 'max_cost'"),
    ({"required-tags": "blocking"}, "required-tags", "enforcement level 'blocking'"),
    ({"all": "strict"}, "all", "enforcement level 'strict'"),
])
def test_a_bad_config_is_exit_2_naming_the_file_and_the_key(doc, key, text, tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as info:
        load_policy_config(path)
    (problem,) = info.value.problems
    assert info.value.exit_code == 2 and problem.file == str(path) and problem.path == key and text in problem.message


def test_a_config_that_is_not_an_object_or_not_json_is_exit_2(tmp_path):
    path = tmp_path / "policy.json"
    for text in ("[1, 2]", "{not json"):
        path.write_text(text)
        with pytest.raises(InputError, match=str(path)):
            load_policy_config(path)
    assert load_policy_config(None) is None


def test_levels_and_defaults():
    settings = resolve_policy_config({"all": "advisory", "no-public-ssh": "remediate"})
    assert settings["no-public-ssh"][0] == "remediate" and settings["gpu-hourly-budget"][0] == "advisory"
    assert settings["required-tags"] == ("advisory", {"required_tags": ["trainstack:name"]})
    with pytest.raises(PolicyConfigError):
        resolve_policy_config({"gpu-hourly-budget": {"max_hourly_cost_cny": float("nan")}})


# ---- the runner ------------------------------------------------------------------------------------
def test_unknown_values_are_advisory_cant_run_and_the_rest_still_judged():
    view = StackView(nodes=(_node("a"), _node("b", zone=Unknown(path=("tags", "trainstack:zone")))))
    verdicts = policy_verdicts(view)
    assert [(v.policy, v.level, v.resource) for v in verdicts] == [
        ("multi-node-requires-rdma", "mandatory", "a"), ("multi-node-requires-rdma", "mandatory", "b"),
        ("multi-node-requires-rdma", "advisory", None)]
    assert "can't run policy 'multi-node-requires-rdma' during preview" in verdicts[-1].message


def test_remediate_blocks_like_mandatory_and_disabled_runs_nothing():
    view = StackView(nodes=(_node("a"), _node("b")))
    assert {v.level for v in policy_verdicts(view, {"multi-node-requires-rdma": "remediate"})} == {"mandatory"}
    assert policy_verdicts(view, {"multi-node-requires-rdma": "disabled"}) == []


# ---- the budget's channel ----------------------------------------------------------------------------
BUDGET = {"gpu-hourly-budget": {"max_hourly_cost_cny": 8}}


def budget(*nodes: GpuNode) -> list:
    return [v for v in policy_verdicts(StackView(nodes=nodes), BUDGET) if v.policy == "gpu-hourly-budget"]


def test_the_planned_price_wins_over_the_catalog_and_the_spot_limit_over_both():
    planned = _node(planned_price=PlannedPrice(cny_per_hour=6.0, source="price-book"))
    assert budget(planned) == []  # the catalog says 9.53
    (v,) = budget(_node())
    assert "9.53 (on-demand)" in v.message
    capped = _node(spot=True, spot_strategy="SpotWithPriceLimit", spot_price_limits={"*": 9.0},
                   planned_price=PlannedPrice(cny_per_hour=6.0, source="price-book"))
    (v,) = budget(capped)
    assert "9.00 (spot price limit)" in v.message


def test_a_priced_quota_job_counts_and_an_unpriced_one_is_its_subscription():
    job = dict(resource_type="pulumi-python:dynamic:Resource", kind="dlc", instance_types=(), count=2,
               quota_id="quota-abc")
    priced = _node("job", **job, planned_price=PlannedPrice(cny_per_hour=160.0, source="price-book"))
    (v,) = budget(priced)
    assert "job (x2) quota quota-abc 160.00 (on-demand, price-book)" in v.message
    assert budget(_node("job", **job)) == []


def test_an_unknown_planned_price_cannot_be_judged():
    (v,) = budget(_node(planned_price=Unknown(path=("tags",))))
    assert v.level == "advisory" and "can't run policy 'gpu-hourly-budget'" in v.message


# ---- spot needs checkpoint storage that outlives the node ------------------------------------------
def test_spot_checkpoint_storage_is_decided_by_the_role_and_the_lifetime():
    spot = _node(spot=True, spot_strategy="SpotWithPriceLimit", spot_price_limits={"*": 5.0})
    bucket = dict(resource="b", resource_type="alicloud:oss/bucket:Bucket")
    stack_bucket = StackView(nodes=(spot,), storage=(Storage(**bucket, role="stack"),))
    assert [v.policy for v in policy_verdicts(stack_bucket)] == ["spot-requires-checkpoint-storage"]
    ckpt = StackView(nodes=(spot,), storage=(Storage(**bucket, role="checkpoint", protect=True),))
    assert policy_verdicts(ckpt) == []
    node_disk = Storage(resource="d", resource_type="alicloud:ecs/ecsDisk:EcsDisk", role="checkpoint", protect=True,
                        outlives_instances=False)
    assert [v.policy for v in policy_verdicts(StackView(nodes=(spot,), storage=(node_disk,)))] == [
        "spot-requires-checkpoint-storage"]


# ---- plans: what trainstack declares passes the pack's own rules -------------------------------------
@pytest.mark.parametrize("make", [F.single_gpu_lora_plan, F.spot_plan, F.spot_pool_plan, F.multi_node_erdma_plan],
                         ids=["lora", "spot", "pool", "erdma-3"])
def test_trainstack_plans_pass_every_mandatory_policy_by_default(make):
    assert [v for v in plan_verdicts(make()) if v.blocking] == []
