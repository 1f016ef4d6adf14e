"""`trainstack up`'s loop against a fake ECS (stock per zone and type, RunInstances failing where the test says)
and a fake stack that runs the real program (tests/commands/fake_cloud.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_cloud import FakeStack, FakeWitness, stock_table
from plan_factory import merged
from trainstack.commands.up_failover import KEPT_TYPES, Failover, Verdict
from trainstack.errors import CloudApiError, InfeasibleError, PolicyError
from trainstack.preview.sources import find_project, stack_config
from trainstack.profile import read_yaml_document
from trainstack.stack_config import plan_for_config, trusted_profile

ROOT = Path(__file__).resolve().parents[2]
A10, A10_BIG = "ecs.gn7i-c8g1.2xlarge", "ecs.gn7i-c16g1.4xlarge"
E, F = "cn-shenzhen-e", "cn-shenzhen-f"
EVERYWHERE = {t: {E: "WithStock", F: "WithStock"} for t in (A10, A10_BIG, "ecs.gn7i-c32g1.8xlarge")}


def planner(cfg):
    return plan_for_config(dict(cfg), "trainstack", ROOT)


def base_config(stack: str = "llama3-8b-lora") -> dict:
    return stack_config(find_project(ROOT), stack)[0]


@pytest.fixture
def profile_config(tmp_path):
    """The sample stack's config with profile changes (a profile file outside stacks/, trusted like
    `trainstack plan PROFILE` trusts the file it is given)."""
    opened = []

    def make(changes: dict, stack: str = "llama3-8b-lora") -> dict:
        doc = merged(read_yaml_document(ROOT / "stacks" / "profiles" / f"{stack}.yaml"), changes)
        path = tmp_path / f"{stack}.yaml"
        path.write_text(json.dumps(doc))
        ctx = trusted_profile(path)
        ctx.__enter__()
        opened.append(ctx)
        return {**base_config(stack), "trainstack:profile": str(path)}

    yield make
    for ctx in opened:
        ctx.__exit__(None, None, None)


def up(stack: FakeStack, stock=None, witness=None, max_attempts: int = 3, lines=None):
    lines = [] if lines is None else lines
    loop = Failover("test", stack, stock or stack.stock, witness or FakeWitness(), planner,
                    max_attempts=max_attempts, echo=lines.append)
    return loop.run()


# ---- first deploy ------------------------------------------------------------------------------------------

def test_a_first_deploy_moves_to_the_next_zone_when_run_instances_finds_no_stock():
    stack = FakeStack(base_config(), stock_table(EVERYWHERE), run_fails={(A10, E)})
    lines: list[str] = []
    report = up(stack, lines=lines)
    assert [(a.instance_type, a.zone, a.outcome) for a in report.attempts] == [
        (A10, E, "no-capacity"), (A10, F, "deployed")]
    assert report.attempts[0].code == "OperationDenied.NoStock"
    assert stack.ups() == [(E, None), (F, None)]
    # nothing is left in the old zone, no orphan node: the one planned node, in f
    assert stack.zones() == {F}
    assert [(n.outputs["instanceType"], n.zone) for n in stack.nodes()] == [(A10, F)]
    assert stack.cfg["trainstack:zone"] == F and "trainstack:instanceType" not in stack.cfg
    assert any(c[0] == "destroy" for c in stack.calls)
    assert any("OperationDenied.NoStock" in ln for ln in lines) and any("deployed" in ln for ln in lines)


def test_a_row_without_stock_is_skipped_without_a_pulumi_up():
    stock = stock_table({A10: {E: "WithoutStock", F: "ClosedWithStock"}})
    stack = FakeStack(base_config(), stock)
    report = up(stack)
    assert [(a.zone, a.outcome) for a in report.attempts] == [(E, "no-stock"), (F, "deployed")]
    assert report.attempts[0].cause == "DescribeAvailableResource: WithoutStock"
    assert stack.ups() == [(F, None)]


def test_protected_checkpoint_storage_of_a_failed_first_attempt_is_released_and_removed(profile_config):
    """ESSD checkpoints are protected and retained; on a first deploy nothing has written to them."""
    stack = FakeStack(profile_config({"storage": {"checkpoint": "essd"}}), stock_table(EVERYWHERE),
                      run_fails={(A10, E)})
    report = up(stack)
    assert report.deployed.zone == F
    released = [c for c in stack.calls if c[0] == "release_protection"]
    assert released and all("ckpt-disk" in urn for urn in released[0][1])
    assert stack.zones() == {F} and stack.left_in_cloud == []  # deleted, not just forgotten
    disks = [r for r in stack.state.values() if r.type == "alicloud:ecs/ecsDisk:EcsDisk"]
    assert disks and all(d.zone == F for d in disks) and any(d.protect for d in disks)  # protected again


def test_cpfs_of_a_failed_first_attempt_moves_with_the_zone(profile_config):
    stack = FakeStack(profile_config({"storage": {"checkpoint": "cpfs"}}), stock_table(EVERYWHERE),
                      run_fails={(A10, E)})
    report = up(stack)
    assert report.deployed.zone == F
    cpfs = [r for r in stack.state.values() if r.type == "alicloud:nas/fileSystem:FileSystem"]
    assert [c.zone for c in cpfs] == [F] and cpfs[0].protect and cpfs[0].retain  # kept safe again in f
    assert stack.left_in_cloud == []  # the empty CPFS in e is deleted, not left billing


def test_another_type_in_the_same_zone_when_the_type_has_no_stock_anywhere():
    stack = FakeStack(base_config(), stock_table(EVERYWHERE), run_fails={(A10, E), (A10, F)})
    report = up(stack)
    assert [(a.instance_type, a.zone, a.outcome) for a in report.attempts] == [
        (A10, E, "no-capacity"), (A10, F, "no-capacity"), (A10_BIG, E, "deployed")]
    assert stack.cfg["trainstack:instanceType"] == A10_BIG and stack.cfg["trainstack:zone"] == E
    assert [(n.outputs["instanceType"], n.zone) for n in stack.nodes()] == [(A10_BIG, E)]
    assert stack.zones() == {E}


def test_a_multi_node_create_that_gets_some_nodes_leaves_none_behind(profile_config):
    """3 nodes planned, ECS creates 2 and then runs out: no row is left, and the 2 nodes go too."""
    config = profile_config({"resources": {"gpus": 24, "deadline_hours": None}}, stack="llama3-70b-full")
    plan = planner(config)
    assert plan.nodes == 3 and len(plan.capacity.candidates) == 1
    stack = FakeStack(config, stock_table({plan.instance_type: {plan.zone: "WithStock"}}),
                      capacity={(plan.instance_type, plan.zone): 2})
    with pytest.raises(InfeasibleError) as err:
        up(stack)
    assert [a["outcome"] for a in err.value.details["up"]["attempts"]] == ["no-capacity"]
    assert stack.nodes() == []  # the two that were created were removed: no orphan node
    assert stack.zones() == set()


# ---- nothing has stock: exit 3 with the attempts -------------------------------------------------------------

def test_no_stock_anywhere_is_exit_3_with_every_row_and_no_pulumi_up():
    stack = FakeStack(base_config(), stock_table({}))
    with pytest.raises(InfeasibleError) as err:
        up(stack)
    assert err.value.exit_code == 3
    attempts = err.value.details["up"]["attempts"]
    assert len(attempts) == len(planner(base_config()).capacity.candidates)
    assert {a["outcome"] for a in attempts} == {"no-stock"}
    assert stack.ups() == [] and stack.state == {}
    assert stack.cfg == base_config()  # the config as it was


def test_failed_creates_everywhere_stop_at_the_attempt_limit_and_leave_no_node():
    stack = FakeStack(base_config(), stock_table(EVERYWHERE),
                      run_fails={(t, z) for t in EVERYWHERE for z in (E, F)})
    with pytest.raises(InfeasibleError) as err:
        up(stack, max_attempts=2)
    assert len(stack.ups()) == 2
    assert [a["outcome"] for a in err.value.details["up"]["attempts"]] == ["no-capacity", "no-capacity"]
    assert any("--max-attempts 2" in n for n in err.value.details["up"]["notes"])
    assert stack.nodes() == [] and stack.zones() == set()  # nothing zonal bills on
    assert stack.cfg == base_config()


# ---- after a job has run: the zone never moves -----------------------------------------------------------

def deployed_in_e() -> FakeStack:
    stack = FakeStack(base_config(), stock_table(EVERYWHERE))
    assert up(stack).deployed.zone == E
    return stack


def test_after_a_job_only_other_types_in_the_same_zone_are_tried():
    stack = deployed_in_e()
    for node in stack.nodes():  # the node is gone (released at its deadline); A10 has no capacity left in e
        del stack.state[node.urn]
    stack.run_fails = {(A10, E)}
    before = {u: r for u, r in stack.state.items() if r.type != "alicloud:ecs/instance:Instance"}
    report = up(stack)
    assert report.job_has_run
    # the first deploy recorded trainstack:zone: the plan lists only e now
    outcomes = [(a.instance_type, a.zone, a.outcome) for a in report.attempts]
    assert outcomes == [(A10, E, "no-capacity"), (A10_BIG, E, "deployed")]
    assert not any(c[0] in ("destroy", "release_protection") for c in stack.calls[-10:])
    assert stack.zones() == {E}
    kept = {u: (r.zone, r.protect) for u, r in before.items() if r.type in KEPT_TYPES}
    assert kept and {u: (stack.state[u].zone, stack.state[u].protect) for u in kept} == kept  # never replaced


def test_after_a_job_a_zone_the_plan_lists_is_skipped_when_the_config_does_not_pin_it():
    stack = deployed_in_e()
    stack.cfg.pop("trainstack:zone")  # deployed by a plain `pulumi up`: the zone is the node vSwitch's
    for node in stack.nodes():
        del stack.state[node.urn]
    stack.run_fails = {(A10, E)}
    report = up(stack)
    outcomes = [(a.instance_type, a.zone, a.outcome) for a in report.attempts]
    assert outcomes[:3] == [(A10, E, "no-capacity"), (A10, F, "skipped"), (A10_BIG, E, "deployed")]
    assert "has run a job in cn-shenzhen-e: its zone never moves" in report.attempts[1].cause
    assert stack.zones() == {E}


def test_after_a_job_a_new_type_is_not_tried_while_a_node_runs():
    stack = deployed_in_e()
    stack.cfg.pop("trainstack:zone")  # the stack was deployed with plain `pulumi up`: read back from state
    stack.run_fails = {(A10, E)}
    for node in stack.nodes():
        del stack.state[node.urn]
    with pytest.raises(InfeasibleError) as err:
        up(stack, witness=FakeWitness(running=("llama3-8b-lora-node-0",)))
    causes = [a["cause"] for a in err.value.details["up"]["attempts"] if a["outcome"] == "skipped"]
    assert any("running: a new type stops it" in c for c in causes)
    assert stack.zones() == {E}


def test_a_heartbeat_in_the_bucket_counts_as_a_job_that_has_run():
    stack = FakeStack(base_config(), stock_table(EVERYWHERE), run_fails={(A10, E)})
    stack.up()  # a plain `pulumi up` that failed at the node: the bucket exists, a node wrote a heartbeat
    witness = FakeWitness(heartbeat=True)
    report = up(stack, witness=witness)
    assert report.job_has_run and witness.asked and witness.asked[0][1] == "status/"
    assert all(a.zone == E for a in report.attempts if a.outcome != "skipped")
    assert not any(c[0] == "destroy" for c in stack.calls)


def test_a_bucket_that_cannot_be_read_counts_as_a_job_that_has_run():
    stack = FakeStack(base_config(), stock_table(EVERYWHERE), run_fails={(A10, E)})
    stack.up()
    report = up(stack, witness=FakeWitness(heartbeat=None))
    assert report.job_has_run and any("cannot read" in n for n in report.notes)


def test_a_stock_change_between_two_ups_moves_nothing():
    stack = deployed_in_e()
    state = dict(stack.state)
    stack.stock = stock_table({A10: {E: "WithoutStock", F: "WithStock"}})
    report = up(stack)
    assert [(a.instance_type, a.zone, a.outcome) for a in report.attempts] == [(A10, E, "deployed")]
    assert stack.state == state and stack.cfg["trainstack:zone"] == E


# ---- what stops the loop ---------------------------------------------------------------------------------

def test_a_mandatory_policy_stops_with_exit_4():
    stack = FakeStack(base_config(), stock_table(EVERYWHERE),
                      verdicts=(Verdict("cost-hourly-budget", "mandatory", None, "too expensive"),))
    with pytest.raises(PolicyError) as err:
        up(stack)
    assert err.value.exit_code == 4 and "cost-hourly-budget" in err.value.message
    assert stack.ups() == []


def test_an_error_that_is_not_about_stock_is_exit_5_without_another_attempt():
    stack = FakeStack(base_config(), stock_table(EVERYWHERE),
                      other_failure="Code: QuotaExceed.ElasticQuota\n Message: the quota of vCPUs is exceeded")
    with pytest.raises(CloudApiError) as err:
        up(stack)
    assert err.value.exit_code == 5 and len(stack.ups()) == 1


def test_a_row_the_rule_book_refuses_once_pinned_is_skipped():
    """Pinned, a row is planned again; if the rule book refuses it then, the next row is tried."""
    calls = []

    def picky(cfg):
        if cfg.get("trainstack:zone") == E:
            calls.append(cfg["trainstack:zone"])
            raise InfeasibleError("no feasible placement once pinned")
        return planner(cfg)

    stack = FakeStack(base_config(), stock_table(EVERYWHERE))
    report = Failover("test", stack, stack.stock, FakeWitness(), picky, echo=lambda line: None).run()
    assert report.attempts[0].outcome == "skipped" and "refuses it pinned" in report.attempts[0].cause
    assert report.deployed.zone == F and calls


def test_a_dlc_stack_is_one_pulumi_up():
    stack = FakeStack(base_config("qwen-7b-dlc"), stock_table({}))
    report = up(stack)
    assert report.deployed is not None and len(stack.ups()) == 1 and report.attempts == []
