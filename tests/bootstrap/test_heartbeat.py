"""The heartbeat and the budget guard as the nodes run them (node programs, the text the stack writes
to its bucket), in-process: progress lines, measured speed, memory, checkpoints, instance hours
carried across a replacement, the budget guard's arithmetic, and a record the CLI's strict reader
accepts."""

from __future__ import annotations

import ast
import json

import pytest
from fake_oss import DirStore
from plan_factory import single_gpu_lora_plan, spot_plan

from trainstack.bootstrap import render_script
from trainstack.bootstrap.heartbeat import status_uri
from trainstack.bootstrap.programs import program_text
from trainstack.status import parse_heartbeat

NOW = 1_750_000_000.0


@pytest.fixture
def hb(programs):
    return programs.heartbeat


@pytest.fixture
def guard(programs):
    return programs.guard


class Metadata:
    def __init__(self, instance_id: str = "i-wz9first"):
        self.instance_id = instance_id

    def require(self, path: str) -> str:
        assert path == "meta-data/instance-id"
        return self.instance_id


def node_env(tmp_path, plan=None, **over) -> dict:
    """node.env and the budget guard's job settings (settings.env), as the launcher exports them to
    the heartbeat, with the node's state files under tmp_path."""
    env = {}
    guard = ("NNODES", "NODE_HOURLY_CNY", "PRICE_SOURCE", "MAX_TOTAL_COST_CNY", "DEADLINE_HOURS")
    for name in ("node.env", "settings.env"):
        for line in render_script(plan or single_gpu_lora_plan(), name).splitlines():
            if "=" in line and not line.startswith("#"):
                key, _, value = line.partition("=")
                if name == "node.env" or key in guard:
                    env[key] = value.strip("'")
    for d in ("state", "run"):
        (tmp_path / d).mkdir(exist_ok=True)
    (tmp_path / "uptime").write_text("3600.00 10.00\n")
    (tmp_path / "boot_id").write_text("boot-1\n")
    env.update(TRAINSTACK_STATE=str(tmp_path / "state"), TRAINSTACK_RUN=str(tmp_path / "run"),
               TRAINSTACK_PROGRESS_FILE=str(tmp_path / "run" / "progress.jsonl"),
               TRAINSTACK_UPTIME_FILE=str(tmp_path / "uptime"), TRAINSTACK_BOOT_ID_FILE=str(tmp_path / "boot_id"),
               CHECKPOINT_DIR=str(tmp_path / "ckpt"))
    env.update({k: str(v) for k, v in over.items()})
    return env


def progress(tmp_path, *lines: dict, raw: str = "") -> None:
    with open(tmp_path / "run" / "progress.jsonl", "a") as fh:
        fh.write("".join(json.dumps(line) + "\n" for line in lines) + raw)


def test_the_programs_are_python_3_6_and_the_node_env_names_the_status_place():
    for name in ("trainstack_heartbeat.py", "trainstack_guard.py"):
        ast.parse(program_text(name), feature_version=(3, 6))
    plan = single_gpu_lora_plan()
    assert f"STATUS_URI={status_uri(plan, plan.node_names()[0])}" in render_script(plan, "node.env")


def test_progress_lines_give_step_tokens_speed_memory_and_the_last_checkpoint(hb, tmp_path):
    env = node_env(tmp_path)
    progress(tmp_path, *[{"time": NOW - 600 + 60 * i, "step": i, "tokens": 1000 * 60 * i,
                          "allocated_gib": 10.0 + i % 3, "reserved_gib": 12.0} for i in range(11)],
             {"time": NOW, "step": 10, "tokens": 600_000, "checkpoint_seconds": 42.5})
    rec = hb.Heartbeat(env, None, metadata=Metadata(), clock=lambda: NOW, gpu_memory=None).tick()
    assert rec["state"] == "starting"  # no trainer pid file
    assert (rec["progress"]["step"], rec["progress"]["tokens"]) == (10, 600_000)
    assert rec["progress"]["tokens_per_second"] == pytest.approx(1000.0)
    assert rec["memory"] == {"peak_allocated_gib": 12.0, "peak_reserved_gib": 12.0, "source": "trainer"}
    assert rec["checkpoint"] == {"last_at": NOW, "save_seconds": 42.5, "source": "trainer"}
    assert rec["guard"]["reserve_seconds"] == 42.5 + 60  # the measured save time plus one heartbeat interval
    # the node's record is what the CLI reads, strictly
    beat = parse_heartbeat((tmp_path / "state" / "heartbeat.json").read_bytes())
    assert beat.progress.tokens_per_second == pytest.approx(1000.0) and beat.node == "llama3-8b-lora-node-0"


def test_torn_and_foreign_lines_are_skipped_and_a_resume_restarts_the_window(hb, tmp_path):
    env = node_env(tmp_path)
    progress(tmp_path, {"time": NOW - 300, "tokens": 3_000_000}, {"time": NOW - 200, "tokens": 4_000_000},
             raw='not json\n["a list"]\n{"time": "yesterday", "tokens": 1}\n{"time": 1, "tokens": -5}\n'
                 '{"time": NOW, "tokens"')  # the last line is still being written
    beat = hb.Heartbeat(env, None, metadata=Metadata(), clock=lambda: NOW, gpu_memory=None)
    rec = beat.tick()
    assert rec["progress"]["tokens"] == 4_000_000 and rec["progress"]["tokens_per_second"] == pytest.approx(10_000)
    # the trainer restarted from an earlier checkpoint: fewer tokens than before; the speed is re-measured
    (tmp_path / "run" / "progress.jsonl").write_text(
        (tmp_path / "run" / "progress.jsonl").read_text().rsplit("\n", 1)[0] + "\n")
    progress(tmp_path, {"time": NOW - 100, "tokens": 2_000_000}, {"time": NOW, "tokens": 2_500_000})
    rec = beat.tick()
    assert rec["progress"]["tokens"] == 2_500_000 and rec["progress"]["tokens_per_second"] == pytest.approx(5_000)


def test_without_trainer_reports_memory_comes_from_nvidia_smi_and_checkpoints_from_files(hb, tmp_path):
    env = node_env(tmp_path)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "step-5.pt").write_text("x")
    seen = iter([30.5, 41.0, 35.0])
    beat = hb.Heartbeat(env, None, metadata=Metadata(), clock=lambda: NOW, gpu_memory=lambda: next(seen))
    for expected in (30.5, 41.0, 41.0):  # the peak of what nvidia-smi showed
        rec = beat.tick()
        assert rec["memory"] == {"peak_allocated_gib": None, "peak_reserved_gib": expected, "source": "nvidia-smi"}
    assert rec["checkpoint"]["source"] == "files"
    assert rec["checkpoint"]["last_at"] == pytest.approx((tmp_path / "ckpt" / "step-5.pt").stat().st_mtime)


def test_spend_is_instance_hours_times_the_plans_price_and_a_replacement_continues_the_record(hb, tmp_path):
    plan = spot_plan()
    env = node_env(tmp_path, plan)
    store = DirStore(tmp_path / "oss")
    uri = env["STATUS_URI"]
    rec = hb.Heartbeat(env, store, metadata=Metadata("i-first"), clock=lambda: NOW, gpu_memory=None).tick()
    hourly = round(plan.hourly_cost_cny / plan.nodes, 4)
    assert rec["billing"]["node_hourly_cny"] == hourly and rec["billing"]["billed_seconds"] == 3600.0
    assert rec["billing"]["spent_cny"] == pytest.approx(hourly)
    assert rec["guard"]["cluster_spent_cny"] == pytest.approx(hourly * plan.nodes)
    bucket, prefix = uri[len("oss://"):].split("/", 1)
    assert json.loads(store.read(bucket, prefix + "heartbeat.json"))["instance_id"] == "i-first"
    # a spot notice, then the instance is reclaimed; the replacement has a fresh system disk
    (tmp_path / "run" / "spot-termination-time").write_text("2025-06-15T16:00:00Z\n")
    rec = hb.Heartbeat(env, store, metadata=Metadata("i-first"), clock=lambda: NOW + 60, gpu_memory=None).tick()
    assert rec["state"] == "interrupted" and rec["interruptions"] == 1
    for path in ((tmp_path / "state").iterdir()):
        path.unlink()
    (tmp_path / "run" / "spot-termination-time").unlink()
    (tmp_path / "uptime").write_text("600.0 1.0\n")
    (tmp_path / "boot_id").write_text("boot-of-the-replacement\n")
    rec = hb.Heartbeat(env, store, metadata=Metadata("i-second"), clock=lambda: NOW + 1200, gpu_memory=None).tick()
    assert rec["instances"] == ["i-first", "i-second"] and rec["interruptions"] == 1
    assert rec["billing"]["billed_seconds"] == 3600.0 + 600.0, "the hours of the reclaimed instance still count"
    assert rec["started_at"] == NOW - 3600, "the run started when the first instance booted"
    assert parse_heartbeat(json.dumps(rec)).replacements == 1


@pytest.mark.parametrize("spent,reserve,limit,stops", [
    (90.0, 360, 100.0, False),     # 90 + 10/h x 0.1 h = 91 < 100
    (98.9, 360, 100.0, False),     # 99.9
    (99.0, 360, 100.0, True),      # 100.0: reaches the limit
    (150.0, 360, 100.0, True),
    (10_000.0, 360, None, False),  # no max_total_cost: no budget stop
])
def test_the_guard_stops_while_one_checkpoint_still_fits_the_budget(guard, spent, reserve, limit, stops):
    verdict = guard.guard_verdict(NOW, spent, 10.0, reserve, limit, None)
    assert bool(verdict) == stops
    if stops:
        assert verdict["reason"] == "budget" and "max_total_cost 100" in verdict["message"]


def test_the_guard_stops_before_the_deadline_leaves_no_time_for_a_checkpoint(guard):
    assert guard.guard_verdict(NOW, 0.0, 10.0, 360, None, NOW + 361) is None
    verdict = guard.guard_verdict(NOW, 0.0, 10.0, 360, None, NOW + 360)
    assert verdict["reason"] == "deadline"


def test_the_guard_writes_its_request_once_and_only_while_the_job_runs(hb, tmp_path):
    env = node_env(tmp_path, MAX_TOTAL_COST_CNY="5", NODE_HOURLY_CNY="10")  # 1 h billed = 10 CNY > 5
    marker = tmp_path / "run" / "guard-stop"
    (tmp_path / "run" / "trainer.pid").write_text("4242\n")
    beat = hb.Heartbeat(env, None, metadata=Metadata(), clock=lambda: NOW, gpu_memory=None)
    assert beat.tick()["state"] == "training"
    request = json.loads(marker.read_text())
    assert request["reason"] == "budget" and request["at"] == NOW
    assert beat.tick()["state"] == "stopping" and json.loads(marker.read_text()) == request
    # once the job has finished there is nothing to stop
    marker.unlink()
    (tmp_path / "state" / "job-finished").write_text("0\n")
    assert beat.tick()["state"] == "finished" and not marker.exists()


def test_a_failing_upload_is_logged_and_the_local_record_still_written(hb, tmp_path, capsys):
    class Broken(DirStore):
        def put(self, path, bucket, key):
            raise PermissionError("AccessDenied")

    env = node_env(tmp_path)
    hb.Heartbeat(env, Broken(tmp_path / "oss"), metadata=Metadata(), clock=lambda: NOW, gpu_memory=None).tick()
    assert "heartbeat upload" in capsys.readouterr().err and (tmp_path / "state" / "heartbeat.json").exists()


def test_the_documented_progress_helper_writes_lines_the_heartbeat_reads(hb, tmp_path, monkeypatch):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    helper = (root / "trainstack" / "bootstrap" / "templates" / "trainstack_progress.py").read_text()
    body = helper[helper.index("def report("):]
    doc = (root / "docs" / "status.md").read_text()
    snippet = doc[doc.index("def report("):doc.index("# in the loop:")]
    strip = lambda text: [ln for ln in text.splitlines() if ln.strip() and not ln.strip().startswith('"""')]  # noqa: E731
    assert strip(snippet) == strip(body), "docs/status.md shows the helper as shipped"
    namespace: dict = {}
    exec(compile(helper, "trainstack_progress.py", "exec"), namespace)
    path = tmp_path / "progress.jsonl"
    monkeypatch.setenv("TRAINSTACK_PROGRESS_FILE", str(path))
    monkeypatch.setenv("LOCAL_RANK", "1")
    namespace["report"](1, 100)
    assert not path.exists(), "only local rank 0 writes"
    monkeypatch.setenv("LOCAL_RANK", "0")
    namespace["report"](10, 40_960)
    namespace["report"](20, 81_920, checkpoint_seconds=12.5)
    records, _ = hb.read_progress(str(path))
    progress = hb.Progress()
    for rec in records:
        progress.add(rec)
    assert (progress.step, progress.tokens, progress.checkpoint_seconds) == (20, 81_920, 12.5)
    monkeypatch.delenv("TRAINSTACK_PROGRESS_FILE")
    namespace["report"](30, 1)  # off a trainstack node: nothing
    assert len(path.read_text().splitlines()) == 2
