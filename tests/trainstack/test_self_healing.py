"""resources.self_healing: validated in the profile, applied by the resolver only to 1-node spot plans."""

from __future__ import annotations

import copy

import pytest
import yaml

from trainstack.cli import main
from trainstack.errors import InputError
from trainstack.plan import ess_price_limit
from trainstack.profile import parse_profile, profile_json_schema
from trainstack.resolver import resolve

SPOT_7B = {
    "name": "heal", "region": "cn-shenzhen", "model": {"preset": "qwen2.5-7b"},
    "training": {"method": "full", "precision": "bf16-mixed", "micro_batch_size": 2, "sequence_length": 2048,
                 "gradient_checkpointing": True, "zero_stage": 2, "tokens": 1.0e8},
    "resources": {"target": "ecs", "gpus": 4, "spot": "require", "self_healing": True},
    "storage": {"dataset_gib": 300, "checkpoint": "oss"},
}
MULTI_NODE_70B = {
    "name": "heal-70b", "region": "cn-shenzhen", "model": {"preset": "llama-3-70b"},
    "training": {"method": "full", "precision": "bf16-mixed", "micro_batch_size": 1, "sequence_length": 4096,
                 "gradient_checkpointing": True, "zero_stage": 3, "tokens": 2.0e8},
    "resources": {"target": "ecs", "gpu_models": ["A100-80G"], "spot": "require", "self_healing": True},
    "storage": {"dataset_gib": 2000, "checkpoint": "cpfs"},
}


def doc(base=SPOT_7B, **resources):
    out = copy.deepcopy(base)
    out["resources"].update(resources)
    return out


def problems(document):
    with pytest.raises(InputError) as err:
        parse_profile(document)
    return [(p.path, p.message) for p in err.value.problems]


def test_self_healing_is_off_by_default_and_in_the_schema():
    base = doc()
    del base["resources"]["self_healing"]
    assert parse_profile(base).resources.self_healing is False
    prop = profile_json_schema()["$defs"]["ResourcesSpec"]["properties"]["self_healing"]
    assert prop["type"] == "boolean" and prop["default"] is False


def test_self_healing_needs_spot():
    [(path, message)] = problems(doc(spot="never"))
    assert path == "resources.self_healing"
    assert "needs resources.spot: allow or require" in message


@pytest.mark.parametrize("spot", ["allow", "require"])
def test_self_healing_is_valid_with_spot_allow_or_require(spot):
    assert parse_profile(doc(spot=spot)).resources.self_healing is True


def test_self_healing_refuses_essd_checkpoints_and_dlc():
    essd = doc()
    essd["storage"]["checkpoint"] = "essd"
    assert any("storage.checkpoint: oss or cpfs" in m for _, m in problems(essd))
    assert any("applies to ECS nodes" in m for _, m in problems(doc(target="dlc")))


def test_validate_reports_the_problem_on_one_line(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc(spot="never")))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "resources.self_healing" in err and "Traceback" not in err


def test_a_one_node_spot_plan_gets_a_spot_pool():
    plan = resolve(parse_profile(doc()))
    assert plan.spot and plan.nodes == 1
    pool = plan.spot_pool
    assert pool is not None
    assert (pool.min_size, pool.max_size, pool.on_demand_base) == (1, 1, 0)
    assert pool.compensate_with_on_demand is False  # spot: require
    assert pool.price_limit == ess_price_limit(plan.spot_price_limit) <= plan.spot_price_limit
    assert any(lab.startswith("self-healing: an ESS scaling group") for lab in plan.labels)


def test_spot_allow_compensates_with_on_demand():
    plan = resolve(parse_profile(doc(spot="allow")))
    assert plan.spot and plan.spot_pool is not None and plan.spot_pool.compensate_with_on_demand is True
    assert any("starts an on-demand node" in lab for lab in plan.labels)


def test_without_the_flag_nothing_changes():
    base = doc()
    del base["resources"]["self_healing"]
    plan = resolve(parse_profile(base))
    assert plan.spot_pool is None
    assert not any("self-healing" in lab for lab in plan.labels)
    assert plan == resolve(parse_profile(doc())).model_copy(
        update={"spot_pool": None, "self_healing": False, "labels": plan.labels})


def test_multi_node_self_healing_is_an_exit_2_error_never_silently_ignored(tmp_path, capsys):
    """Issue 23 item 3: one lost node of a multi-node cluster is not replaced yet, so the rule book
    refuses the plan (validate, resolve and plan alike) instead of planning plain instances."""
    from trainstack.rules import check_plan

    plan = resolve(parse_profile(MULTI_NODE_70B))  # the engine's choice, before the rule book
    assert plan.spot and plan.nodes > 1 and plan.spot_pool is None and plan.self_healing
    with pytest.raises(InputError) as err:
        check_plan(plan)
    [problem] = err.value.problems
    assert problem.path == "resources.self_healing" and f"{plan.nodes} nodes" in problem.message
    f = tmp_path / "heal.yaml"
    f.write_text(yaml.safe_dump(MULTI_NODE_70B), encoding="utf-8")
    messages = []
    for command in (["validate", str(f)], ["plan", str(f)]):
        assert main(command) == 2
        err_text = capsys.readouterr().err
        assert "resources.self_healing" in err_text
        messages.append(next(line for line in err_text.splitlines() if "resources.self_healing" in line))
    assert messages[0] == messages[1]


def test_an_on_demand_choice_gets_no_pool_and_says_why():
    # the time objective ranks on-demand first (spot hours carry the restart allowance)
    plan = resolve(parse_profile(doc(spot="allow", objective="time")))
    assert not plan.spot and plan.spot_pool is None
    assert any(lab.startswith("self-healing not applied: the chosen plan is on-demand") for lab in plan.labels)
