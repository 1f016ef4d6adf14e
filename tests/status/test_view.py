"""The status view from recorded heartbeats and observed instances / DLC jobs: spend, ETA against
the deadline, projected total against the budget, plan beside measurement, stale and missing nodes."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_factory import profile_for, resolved

from trainstack.status import DlcJobObservation, InstanceObservation, build_view, parse_heartbeat, prediction_for
from trainstack.status.render import render_text
from trainstack.status.view import STALE_AFTER_SECONDS, is_terminal

HEARTBEATS = Path(__file__).resolve().parents[1] / "data" / "heartbeats"
NOW = 1_750_000_000.0 + 30  # 30 s after the recorded runs' last beat


def beat(name: str):
    return parse_heartbeat((HEARTBEATS / name).read_bytes(), name)


def running(plan, rank=0, status="Running", **kw) -> InstanceObservation:
    return InstanceObservation(instance_id=f"i-wz9node{rank}", name=plan.node_names()[rank], node_rank=rank,
                               status=status, spot=plan.spot, instance_type=plan.instance_type,
                               started_at=kw.pop("started_at", NOW - 7200), **kw)


def view(stack, heartbeats=(), instances=(), dlc=None, changes=None, now=NOW):
    profile, plan = profile_for(stack, changes), resolved(stack, changes)
    return plan, build_view(profile, plan, prediction_for(profile, plan), heartbeats=heartbeats,
                            instances=instances, dlc=dlc, now=now)


def test_a_training_node_gives_progress_speed_spend_eta_and_the_plan_beside_the_measurement():
    hb = beat("llama3-8b-lora-node-0.json")
    plan, v = view("llama3-8b-lora", [hb], [running(resolved("llama3-8b-lora"))])
    assert (v.job.state, v.nodes[0].state, v.nodes[0].job_state) == ("training", "Running", "training")
    assert v.progress.tokens_done == hb.progress.tokens and v.progress.tokens_total == 5e7
    assert v.progress.tokens_per_second == pytest.approx(hb.progress.tokens_per_second, abs=0.1)
    assert v.spend.spent_cny == pytest.approx(hb.billing.spent_cny, abs=0.01) and v.spend.basis == "heartbeats"
    assert v.spend.estimate is True and "list price" in v.spend.price_source
    left = (5e7 - hb.progress.tokens) / hb.progress.tokens_per_second / 3600
    assert v.eta.remaining_hours == pytest.approx(left, abs=0.01) and v.eta.basis == "measured"
    assert v.eta.on_track is True  # 48 h deadline from the first boot
    assert v.budget.projected_total_cny == pytest.approx(hb.billing.spent_cny + left * plan.hourly_cost_cny, abs=0.05)
    pvm = v.predicted_vs_measured
    assert pvm.tokens_per_second_per_gpu.predicted == plan.estimate.tokens_per_second_per_gpu
    # the run was faster than the plan: its ratio is measured over planned (1.12 with the issue-32 constants)
    ratio = hb.progress.tokens_per_second / plan.estimate.tokens_per_second_per_gpu
    assert pvm.tokens_per_second_per_gpu.ratio == pytest.approx(ratio, abs=0.01) and ratio > 1.05
    assert pvm.peak_allocated_gib.measured == 16.2 and pvm.peak_allocated_gib.predicted == plan.estimate.peak_gib_per_gpu
    text = render_text(v)
    assert f"measured/plan {ratio:.2f}" in text and "so far (estimate at 9.53 CNY/h" in text and "on track" in text


def test_a_stale_node_and_a_missing_instance_are_marked_and_spend_sums_over_the_nodes():
    beats = [beat(f"llama3-70b-full-node-{r}.json") for r in range(3)]
    plan = resolved("llama3-70b-full")
    _, v = view("llama3-70b-full", beats, [running(plan, 0), running(plan, 1)])
    assert [n.stale for n in v.nodes] == [False, False, True]
    assert v.nodes[2].heartbeat_age_seconds > STALE_AFTER_SECONDS and v.nodes[2].state == "missing"
    assert any("llama3-70b-full-node-2: last heartbeat 20 min ago" in label for label in v.labels)
    assert v.spend.spent_cny == pytest.approx(sum(b.billing.spent_cny for b in beats), abs=0.01)
    assert v.progress.tokens_per_second_per_gpu == pytest.approx(beats[0].progress.tokens_per_second / 24, abs=0.1)


def test_the_budget_guard_stop_is_the_jobs_state_and_the_projection_stops_growing():
    hb = beat("qwen-7b-spot-stopped.json")
    plan = resolved("qwen-7b-spot")
    _, v = view("qwen-7b-spot", [hb], [running(plan, status="Stopped", stopped_mode="StopCharging")])
    assert v.job.state == "stopped" and v.job.exit_code == 15 and v.job.stop.reason == "budget"
    assert v.eta.finish_at is None and v.budget.max_total_cost_cny == 5000
    assert v.budget.projected_total_cny == pytest.approx(hb.billing.spent_cny, abs=0.01) and v.budget.within_budget
    assert is_terminal(v)
    text = render_text(v)
    assert "stopped by trainstack: budget (spend so far 4998.18 CNY" in text and "within budget" in text


def test_a_replaced_spot_node_shows_its_interruption_and_the_projection_against_the_budget():
    hb = beat("qwen-7b-spot-node-0.json")
    plan = resolved("qwen-7b-spot")
    _, v = view("qwen-7b-spot", [hb], [running(plan)], changes={"resources": {"max_total_cost": 165}})
    node = v.nodes[0]
    assert (node.interruptions, node.replacements, node.spot) == (1, 1, True)
    assert v.budget.max_total_cost_cny == 165 and v.budget.within_budget is False  # 104 spent + the rest > 165
    assert "OVER BUDGET" in render_text(v)
    assert any("nvidia-smi" in label for label in v.labels)


def test_without_heartbeats_spend_counts_from_the_instances_start_and_the_eta_uses_the_plan():
    plan = resolved("llama3-8b-lora")
    _, v = view("llama3-8b-lora", [], [running(plan, started_at=NOW - 1800)])
    assert v.job.state == "unknown" and v.spend.basis == "instance-start"
    assert v.spend.spent_cny == pytest.approx(0.5 * plan.hourly_cost_cny, abs=0.01)
    assert v.eta.basis == "plan" and v.eta.remaining_hours == pytest.approx(5e7 / plan.estimate.tokens_per_second / 3600,
                                                                            abs=0.01)
    assert v.predicted_vs_measured.tokens_per_second_per_gpu.measured is None
    _, none = view("llama3-8b-lora")
    assert none.job.state == "not-deployed" and none.spend.spent_cny is None and none.nodes[0].state == "missing"


def test_another_stacks_heartbeat_is_ignored():
    _, v = view("qwen-7b-spot", [beat("llama3-8b-lora-node-0.json")])
    assert v.progress.tokens_done is None and "ignored heartbeats of another stack" in v.labels[0]


def test_a_dlc_job_is_read_through_the_dlc_api():
    job = DlcJobObservation(job_id="dlc-abc", status="Running", duration_seconds=5400, running_at=NOW - 5400, pods=2)
    plan, v = view("qwen-7b-dlc", dlc=job)
    assert v.target == "dlc" and v.nodes == [] and (v.job.state, v.job.dlc_status) == ("training", "Running")
    assert plan.hourly_cost_cny is None and v.spend.spent_cny is None  # DLC prices are not in the offline catalog
    assert any("DLC spend unknown" in label for label in v.labels)
    # with a price (what a DLC price book gives the plan; hand-set here): running time x price
    priced = plan.model_copy(update={"hourly_cost_cny": 10.0})
    profile = profile_for("qwen-7b-dlc")
    v2 = build_view(profile, priced, prediction_for(profile, priced), dlc=job, now=NOW)
    assert v2.spend.basis == "dlc-duration" and v2.spend.spent_cny == 15.0
    assert v.job.started_at == "2025-06-15T13:37:10Z" and not is_terminal(v)
    done = job.model_copy(update={"status": "Succeeded"})
    assert is_terminal(view("qwen-7b-dlc", dlc=done)[1])
    assert view("qwen-7b-dlc")[1].job.state == "not-deployed"


def test_a_self_healing_cluster_lists_node_0_and_each_pool_instance():
    """Issue 23: the pool's nodes share one name (one scaling configuration) and report under their
    instance ids; a replaced node shows as a new instance, a slot nobody fills as missing."""
    changes = {"resources": {"spot": "allow", "self_healing": True, "gpus": 24, "max_hourly_cost": 600}}
    plan = resolved("llama3-70b-full", changes)
    assert plan.elastic and plan.nodes == 3
    node_0 = beat("llama3-70b-full-node-0.json")
    pool = plan.pool_node_name()
    pooled = [beat("llama3-70b-full-node-1.json").model_copy(update={"node": pool, "instance_id": iid})
              for iid in ("i-wz9pool-b", "i-wz9pool-a")]
    instances = [running(plan, 0), InstanceObservation(instance_id="i-wz9pool-a", name=pool, status="Running",
                                                        spot=True, instance_type=plan.instance_type)]
    _, v = view("llama3-70b-full", [node_0, *pooled], instances, changes=changes)
    assert [n.name for n in v.nodes] == [plan.node_names()[0], f"{pool}/i-wz9pool-a", f"{pool}/i-wz9pool-b"]
    assert [n.state for n in v.nodes] == ["Running", "Running", "missing"]
    _, lone = view("llama3-70b-full", [node_0], [running(plan, 0)], changes=changes)
    assert [n.name for n in lone.nodes] == [plan.node_names()[0], f"{pool}/(none)", f"{pool}/(none)"]
