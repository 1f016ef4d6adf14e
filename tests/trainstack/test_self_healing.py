"""resources.self_healing: validated in the profile; a 1-node spot plan gets a pool of its node, a
multi-node one an on-demand node 0 (the rendezvous) and a pool of the others (issue 23)."""

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
    "resources": {"target": "ecs", "gpu_models": ["A100-80G"], "spot": "require", "self_healing": True,
                  "max_hourly_cost": 650},  # all-in (docs/cost.md)
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
    healing = resolve(parse_profile(doc()))
    assert plan == healing.model_copy(update={"spot_pool": None, "self_healing": False, "labels": plan.labels,
                                              "cost": plan.cost})
    # the same money; only the billed resource differs (an ESS pool's node instead of a plain instance)
    assert healing.cost.model_dump(exclude={"items"}) == plan.cost.model_dump(exclude={"items"})
    assert [i.type for i in healing.cost.items if i.kind == "compute"] == ["alicloud:ess/scalingGroup:ScalingGroup"]


def multi(spot="allow", **changes):
    out = doc(MULTI_NODE_70B, spot=spot)
    for key, value in changes.items():
        out.setdefault(key, {}).update(value)
    return out


def refused_alike(tmp_path, capsys, document, path):
    """validate and plan both exit 2 with the same one-line message at ``path``; returns it."""
    f = tmp_path / "heal.yaml"
    f.write_text(yaml.safe_dump(document), encoding="utf-8")
    messages = []
    for command in (["validate", str(f)], ["plan", str(f)]):
        assert main(command) == 2
        err_text = capsys.readouterr().err
        messages.append(next(line for line in err_text.splitlines() if path in line))
    assert messages[0] == messages[1]
    return messages[0]


def test_a_multi_node_plan_gets_an_on_demand_anchor_and_a_pool_of_the_others():
    from trainstack.rules import check_plan

    plan = resolve(parse_profile(multi()))
    check_plan(plan)
    pool = plan.spot_pool
    assert plan.nodes == 3 and plan.elastic and pool.anchor
    assert (pool.min_size, pool.max_size) == (2, 2) and pool.compensate_with_on_demand
    assert plan.instance_ranks() == [0] and plan.node_spot_strategy(0) == "NoSpot"
    assert plan.node_spot_strategy(1) == "SpotWithPriceLimit"
    assert plan.network.pool_vswitch_cidr not in (None, plan.network.vswitch_cidr)
    # priced as it runs: node 0 at the on-demand price, the pool's nodes at the spot price
    on_demand, spot = plan.estimate.on_demand_hourly_cny / 3, plan.estimate.spot_hourly_cny / 3
    assert plan.cost.compute_hourly_cny == pytest.approx(on_demand + 2 * spot, abs=0.01)
    lines = {i.name: i for i in plan.cost.items if i.kind == "compute"}
    assert (lines["node 0 (on-demand anchor)"].count, lines["pool nodes (spot)"].count) == (1, 2)
    assert lines["node 0 (on-demand anchor)"].hourly_cny == pytest.approx(on_demand, abs=0.01)
    assert any("node 0 runs on-demand" in label for label in plan.labels)


def test_the_pool_vswitch_moves_no_other_vswitch():
    plain = resolve(parse_profile(doc(MULTI_NODE_70B, spot="allow", self_healing=False)))
    healing = resolve(parse_profile(multi()))
    for field in ("vswitch_cidr", "services_vswitch_cidr"):  # CPFS's vSwitch never moves
        assert getattr(plain.network, field) == getattr(healing.network, field)
    # no ERIs without eRDMA, but their block stays free, and the pool takes one of its own
    assert plain.network.eri_vswitch_cidr and healing.network.eri_vswitch_cidr is None
    assert healing.network.pool_vswitch_cidr not in (plain.network.eri_vswitch_cidr, plain.network.services_vswitch_cidr)


def test_multi_node_self_healing_under_spot_require_is_an_exit_2_error(tmp_path, capsys):
    """Item 3: never silently ignored. Node 0 must be on-demand, which spot: require forbids."""
    line = refused_alike(tmp_path, capsys, multi(spot="require"), "resources.spot")
    assert "node 0 on-demand" in line and "allow" in line


def test_multi_node_self_healing_needs_checkpoints_on_cpfs(tmp_path, capsys):
    line = refused_alike(tmp_path, capsys, multi(storage={"checkpoint": "oss"}), "storage.checkpoint")
    assert "another rank" in line and "cpfs" in line


@pytest.mark.parametrize("command", ["deepspeed train.py", "accelerate launch train.py"])
def test_multi_node_self_healing_needs_a_torchrun_launch(tmp_path, capsys, command):
    line = refused_alike(tmp_path, capsys, multi(job={"command": command}), "job.command")
    assert "resources.self_healing" in line and "torchrun" in line


@pytest.mark.parametrize("option", ["--rdzv-conf timeout=9", "--rdzv-id other", "--node-rank 0",
                                    "--master-addr 10.0.0.10"])
def test_torchrun_options_the_rendezvous_owns_are_refused(tmp_path, capsys, option):
    refused_alike(tmp_path, capsys, multi(job={"command": f"torchrun {option} train.py"}), "job.command")


def test_a_users_max_restarts_is_kept():
    from trainstack.bootstrap import render_files

    plan = resolve(parse_profile(multi(job={"command": "torchrun --max-restarts 3 train.py"})))
    [job_env] = [f.content for f in render_files(plan, 1, cpfs_mount_address="x.cpfs.aliyuncs.com") if f.name == "job.env"]
    assert "--max-restarts 3" in job_env and "--max-restarts 10" not in job_env


def test_an_on_demand_choice_gets_no_pool_and_says_why():
    # the time objective ranks on-demand first (spot hours carry the restart allowance)
    plan = resolve(parse_profile(doc(spot="allow", objective="time")))
    assert not plan.spot and plan.spot_pool is None
    assert any(lab.startswith("self-healing not applied: the chosen plan is on-demand") for lab in plan.labels)


def test_the_rendezvous_id_follows_what_the_job_runs_not_its_budget():
    """Nodes launched with other job settings never join the running group (docs/self-healing.md)."""
    from trainstack.launchers.topology import elastic_run_id

    base = resolve(parse_profile(multi()))
    changed_command = resolve(parse_profile(multi(job={"command": "torchrun train.py --lr 2e-5"})))
    bigger_budget = resolve(parse_profile(doc(MULTI_NODE_70B, spot="allow", max_total_cost=99_000)))
    ids = [elastic_run_id(p) for p in (base, changed_command, bigger_budget)]
    assert ids[0].startswith(base.name + "-") and ids[0] != ids[1] and ids[0] == ids[2]


def test_a_self_healing_plan_uses_one_eri_per_node_and_is_sized_for_it():
    """Issue 33: pool nodes get eRDMA through the ESS API's HighPerformance interface (one ERI, on an
    index they cannot choose), so the whole ring is sized at one ERI's share: below the same nodes with
    two ERIs each, above TCP."""
    healing = resolve(parse_profile(multi()))
    plain = resolve(parse_profile(doc(MULTI_NODE_70B, spot="allow", self_healing=False, max_hourly_cost=None)))
    assert healing.network.rdma == "erdma" and healing.network.eri_per_node == 1
    assert plain.network.rdma == "erdma" and plain.network.eri_per_node == 2 and plain.nodes == healing.nodes
    assert healing.estimate.tokens_per_second < plain.estimate.tokens_per_second
    assert any(label.startswith("self-healing pricing: node 0 on-demand") for label in healing.labels)
