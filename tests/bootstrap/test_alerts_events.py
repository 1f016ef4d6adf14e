"""Where the events alerts post come from, through the rendered programs and the launch script: node 0 of
a plain cluster records the job's start and end, the budget guard its stop, the spot watcher a reclaim
notice; and the launch script's end waits (bounded) until the follower has posted the end."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from launch_harness import FAST, launch, local_plan  # noqa: F401  (the launch fixture)
from plan_factory import single_gpu_lora_plan
from test_alerts import TOKEN, Webhook

from trainstack.plan import AlertsPlan

NOW = 1_764_644_645.0


def read_events(run_dir):
    path = run_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def alerts_plan(tmp_path, **job):
    plan = local_plan(single_gpu_lora_plan, tmp_path, **job)
    alerts = AlertsPlan(kms_secret="team/alert-hook", format="slack", events=("job_start", "job_end"), via="nat")
    return plan.model_copy(update={"job": plan.job.model_copy(update={"alerts": alerts})})


def test_the_guard_records_its_stop_once(programs, tmp_path):
    rec = {"guard": {"cluster_spent_cny": 99.0, "max_total_cost_cny": 100.0, "reserve_seconds": 360,
                     "deadline_at": None}, "billing": {"node_hourly_cny": 10.0}, "nodes": 1, "state": "training",
           "written_at": NOW}
    assert programs.guard.check(rec, str(tmp_path)) and programs.guard.check(rec, str(tmp_path))
    (event,) = read_events(tmp_path)
    assert event["event"] == "guard_stop" and "max_total_cost 100" in event["message"]


def test_the_spot_watcher_records_the_notice_after_signalling(programs, tmp_path):
    marker = tmp_path / "spot-termination-time"
    programs.spot.on_notice("2026-12-02T03:04:05Z", signal.SIGUSR1, str(marker), str(tmp_path / "none.pid"))
    (event,) = read_events(tmp_path)
    assert event == {"event": "preemption_notice", "termination_time": "2026-12-02T03:04:05Z", "at": event["at"]}


def test_a_failed_job_on_a_plain_node_records_start_and_end(launch, tmp_path):
    plan = local_plan(single_gpu_lora_plan, tmp_path)
    result = launch(plan, FAKE_RC="3")
    assert result.returncode == 3, result.stderr
    names = [(e["event"], e.get("reason")) for e in read_events(tmp_path / "run")]
    assert names == [("job_started", None), ("job_ended", "failed"), ("node_stopped", None)]


def test_the_end_of_the_job_reaches_the_webhook_before_billing_stops(launch, tmp_path):
    hook = Webhook()
    try:
        launch.cloud.secrets["team/alert-hook"] = hook.url
        plan = alerts_plan(tmp_path)
        files, env = launch.prepare(plan)
        settings = (tmp_path / "node" / "settings.env")
        env = dict(env, TRAINSTACK_ALERTS_POLL_SECONDS="0.1", TRAINSTACK_ALERTS_RETRY_SECONDS="0")
        # the follower as trainstack-heartbeat.service starts it: `trainstack-launch.sh --heartbeat` runs
        # `alerts follow` beside the heartbeat; here alone, with the job settings the launch brings
        follower = subprocess.Popen(["bash", "-c", 'until [ -f "$1" ]; do sleep 0.05; done; '
                                     '. "$2"; . "$1"; export ALERTS_SECRET ALERTS_FORMAT ALERTS_EVENTS ALERTS_RELAY '
                                     'PLAN_TOKENS_PER_SECOND PLAN_HOURLY_CNY NODE_RANK NAME NODE_NAME REGION; '
                                     'exec "$3" "$4" follow', "-", str(settings), str(files["node.env"]),
                                     sys.executable, str(tmp_path / "node" / "trainstack_alerts.py")],
                                    env=env, stderr=subprocess.PIPE, text=True)
        try:
            result = subprocess.run(["bash", str(files["trainstack-launch.sh"])], capture_output=True, text=True,
                                    env=env, timeout=90)
        finally:
            follower.send_signal(signal.SIGTERM)
            err = follower.communicate(timeout=30)[1]
        assert result.returncode == 0, result.stderr
        posted = [p["body"]["text"] for p in hook.posts]
        assert len(posted) == 2 and "job started" in posted[0] and "job ended: succeeded (exit 0" in posted[1]
        assert "plan: " in hook.posts[1]["body"]["blocks"][0]["text"]["text"]
        assert TOKEN not in err + result.stderr
        assert launch.cloud.kms_calls[-1]["SecretName"] == "team/alert-hook"
    finally:
        hook.server.shutdown()
        hook.server.server_close()


def test_without_a_follower_the_end_waits_a_bounded_time_and_goes_on(launch, tmp_path):
    result = launch(alerts_plan(tmp_path), TRAINSTACK_ALERTS_DRAIN_SECONDS="1")
    assert result.returncode == 0, result.stderr
    assert "events remain unposted: going on" in result.stderr
    assert len(launch.cloud.ecs_calls) == 1, "billing still stops"
