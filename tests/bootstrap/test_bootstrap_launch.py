"""trainstack-launch run for real in bash with a stand-in torchrun and the fake cloud: the NCCL
check, the trainer's arguments and signals, the max-runtime deadline, stopping billing, and code
and checkpoints on OSS through the real OSS helper over a fake store."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from launch_harness import FAST, STACK_BUCKET, launch, local_plan  # noqa: F401 (launch: the fixture)
from plan_factory import multi_node_erdma_plan, single_gpu_lora_plan, spot_plan

from trainstack.bootstrap import BootstrapOptions, render_files
from trainstack.plan import JobPlan, OssPlan, StoragePlan

def test_single_gpu_job_runs_under_torchrun_then_the_node_stops_billing(launch, tmp_path):
    plan = local_plan(single_gpu_lora_plan, tmp_path, command="python -u train.py --lr 3e-4",
                      env={"MY_VAR": "x y"})
    result = launch(plan)
    assert result.returncode == 0, result.stderr
    (trainer,) = launch.events()  # one GPU: no NCCL check
    assert trainer["event"] == "trainer" and "NCCL check skipped" in result.stderr
    assert trainer["argv"] == ["--nnodes", "1", "--nproc-per-node", "1", "--node-rank", "0", "--master-addr",
                               "10.0.0.10", "--master-port", "29500", "--rdzv-conf", "timeout=1800",
                               "train.py", "--lr", "3e-4"]
    assert "3e-4" not in result.stderr, "the launcher logs no trainer arguments (they may hold secrets)"
    assert trainer["usr1_ignored"], "torchrun must not die of the checkpoint signal"
    assert trainer["env"]["MY_VAR"] == "x y" and trainer["env"]["TRAINSTACK_CHECKPOINT_DIR"] == str(tmp_path / "ckpt")
    assert trainer["cwd"] == str(tmp_path / "work")
    (stop,) = launch.cloud.ecs_calls
    assert (stop["Action"], stop["StoppedMode"], stop["InstanceId"]) == ("StopInstance", "StopCharging",
                                                                         "i-wz9testinstance")
    assert (launch.state / "job-finished").read_text() == "0\n"


def test_a_finished_job_is_not_run_again_after_a_restart(launch, tmp_path):
    plan = local_plan(single_gpu_lora_plan, tmp_path)
    assert launch(plan).returncode == 0
    result = launch(plan)
    assert result.returncode == 0 and "already ran" in result.stderr
    assert len(launch.events()) == 1 and len(launch.cloud.ecs_calls) == 1


def test_hostile_arguments_reach_the_trainer_literally(launch, tmp_path):
    pwned = tmp_path / "pwned"
    plan = local_plan(single_gpu_lora_plan, tmp_path,
                      command=f"python train.py '\"; rm -rf / #' '$(touch {pwned})' '`touch {pwned}`'")
    assert launch(plan).returncode == 0
    assert launch.events()[0]["argv"][-3:] == ['"; rm -rf / #', f"$(touch {pwned})", f"`touch {pwned}`"]
    assert not pwned.exists()


def test_multi_gpu_runs_the_nccl_check_first_and_a_failure_stops_before_training(launch, tmp_path):
    plan = local_plan(spot_plan, tmp_path, command="python train.py")
    ok = launch(plan)
    assert ok.returncode == 0, ok.stderr
    check, trainer = launch.events()
    assert check["event"] == "nccl_check" and trainer["event"] == "trainer"
    assert check["argv"][-3:] == ["--master-port", "29501", str(tmp_path / "node" / "nccl_check.py")]
    assert check["env"]["NCCL_DEBUG"] == "INFO"

    (launch.state / "job-finished").unlink()
    failed = launch(plan, FAKE_NCCL_RC="1")
    assert failed.returncode == 10
    assert "NCCL all-reduce check failed" in failed.stderr
    assert [e["event"] for e in launch.events()][2:] == ["nccl_check"], "the trainer never started"
    assert len(launch.cloud.ecs_calls) == 2, "a broken fabric stops billing too"


def test_multi_node_rdma_falling_back_to_tcp_fails_the_check(launch, tmp_path):
    plan = multi_node_erdma_plan(nodes=3, profile={"job": {"code_uri": None}}).model_copy(update={"storage": StoragePlan(
        checkpoint="essd", checkpoint_path=str(tmp_path / "ckpt"), oss=STACK_BUCKET)})
    result = launch(plan, rank=1, FAKE_NCCL_LOG="NCCL INFO NET/Socket : Using [0]eth0:10.0.0.11<0>")
    assert result.returncode == 10 and "fell back to TCP" in result.stderr
    check = launch.events()[0]
    assert check["env"]["NCCL_IB_HCA"] == "erdma"
    assert check["argv"][:8] == ["--nnodes", "3", "--nproc-per-node", "8", "--node-rank", "1", "--master-addr",
                                 "10.0.0.10"]
    (launch.state / "job-finished").unlink()
    good = launch(plan, rank=1, FAKE_NCCL_LOG="NCCL INFO NET/IB : Using [0]erdma_0:1/RoCE [RO]; OOB eth0")
    assert good.returncode == 0, good.stderr


def test_max_runtime_sends_the_checkpoint_signal_then_stops_the_trainer_and_the_node(launch, tmp_path):
    plan = local_plan(single_gpu_lora_plan, tmp_path, max_runtime_hours=0.5 / 3600)
    result = launch(plan, FAKE_MODE="run-until-stopped")
    assert result.returncode == 124, result.stderr
    assert [e["event"] for e in launch.events()] == ["trainer", "USR1", "TERM"]
    assert "max runtime reached" in result.stderr
    assert len(launch.cloud.ecs_calls) == 1 and (launch.state / "job-finished").read_text() == "124\n"


def test_stop_on_success_leaves_a_failed_node_running_for_debugging(launch, tmp_path):
    plan = local_plan(single_gpu_lora_plan, tmp_path)
    result = launch(plan, options=BootstrapOptions(stop_on="success", poweroff_fallback=False), FAKE_RC="3")
    assert result.returncode == 3 and not launch.cloud.ecs_calls
    assert "leaving the instance running" in result.stderr


def test_a_failed_stop_falls_back_to_poweroff(launch, tmp_path):
    # the role answers once (the job settings are read at job start), then is gone for the stop
    launch.cloud.routes["meta-data/ram/security-credentials/"] = [(200, "TrainstackNodeRole"), (404, "")]
    plan = local_plan(single_gpu_lora_plan, tmp_path)
    result = launch(plan, options=BootstrapOptions())
    assert result.returncode == 0
    assert "StopInstance failed" in result.stderr
    assert (tmp_path / "systemctl.log").read_text().splitlines()[-1] == "systemctl poweroff"


def test_no_job_starts_on_a_spot_instance_that_is_being_reclaimed(launch, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "spot-termination-time").write_text("2026-11-30T01:05:00Z\n")
    result = launch(local_plan(single_gpu_lora_plan, tmp_path))
    assert result.returncode == 0 and "being reclaimed" in result.stderr
    assert not launch.events() and not launch.cloud.ecs_calls


def test_setup_failure_applies_the_stop_policy_with_the_boot_programs_alone(launch, tmp_path):
    plan = local_plan(single_gpu_lora_plan, tmp_path)
    files = {f.name: f for f in render_files(plan, 0, options=FAST)}
    assert "ExecStart=/usr/local/sbin/trainstack-boot --failed" in files["trainstack-setup-failed.service"].content
    for unit in ("trainstack-setup.service", "trainstack-programs.service"):
        assert "OnFailure=trainstack-setup-failed.service" in files[unit].content
    launch.prepare(plan)  # renders the files; then the failure path the unit runs, on a node with only its user data
    for f in files.values():
        if f.program and not f.boot:
            (tmp_path / "node" / f.name).unlink()
    env = dict(os.environ, TRAINSTACK_ETC=str(tmp_path / "node"), TRAINSTACK_LIB=str(tmp_path / "node"),
               TRAINSTACK_STATE=str(tmp_path / "s2"), TRAINSTACK_RUN=str(tmp_path / "r2"),
               TRAINSTACK_METADATA_URL=launch.cloud.url, TRAINSTACK_ECS_ENDPOINT=launch.cloud.url,
               TRAINSTACK_RAM_ROLE_WAIT_SECONDS="0", PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    result = subprocess.run(["bash", str(tmp_path / "node" / "trainstack-boot.sh"), "--failed"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 12, result.stderr
    (stop,) = launch.cloud.ecs_calls
    assert (stop["Action"], stop["StoppedMode"]) == ("StopInstance", "StopCharging")
    assert not (tmp_path / "s2" / "job-finished").exists(), "a restarted node retries the setup"


def test_systemctl_stop_forwards_sigterm_and_neither_finishes_the_job_nor_stops_the_node(launch, tmp_path,
                                                                                         waiter):
    plan = local_plan(single_gpu_lora_plan, tmp_path)
    launch(plan, FAKE_RC="0")  # render the files once
    (launch.state / "job-finished").unlink()
    launch.cloud.ecs_calls.clear()
    (tmp_path / "torchrun.log").unlink()
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", FAKE_LOG=str(tmp_path / "torchrun.log"),
               FAKE_MODE="run-until-stopped", TRAINSTACK_ETC=str(tmp_path / "node"),
               TRAINSTACK_LIB=str(tmp_path / "node"), TRAINSTACK_STATE=str(launch.state),
               TRAINSTACK_RUN=str(tmp_path / "run"), TRAINSTACK_WORKDIR=str(tmp_path / "work"),
               TRAINSTACK_METADATA_URL=launch.cloud.url, TRAINSTACK_ECS_ENDPOINT=launch.cloud.url,
               TRAINSTACK_OSS_PYTHON=str(tmp_path / "bin" / "oss-python"), FAKE_OSS_ROOT=str(tmp_path / "oss"),
               FAKE_OSS_LOG=str(tmp_path / "oss.log"), TRAINSTACK_RETRY_SECONDS="0")
    proc = subprocess.Popen(["bash", str(tmp_path / "node" / "trainstack-launch.sh")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waiter(lambda: bool(launch.events()), what="the trainer to start")
        proc.send_signal(signal.SIGTERM)  # what systemd sends the main process (KillMode=mixed)
        _, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [e["event"] for e in launch.events()] == ["trainer", "TERM"]
    assert proc.returncode == 143, stderr
    assert "resumes at the next start" in stderr
    assert not launch.cloud.ecs_calls and not (launch.state / "job-finished").exists()


def test_code_is_cloned_from_git_and_the_trainer_runs_inside_it(launch, tmp_path):
    repo = tmp_path / "src"
    repo.mkdir()
    (repo / "train.py").write_text("print('hi')\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "train.py"], ["commit", "-qm", "code"], ["tag", "v1"]):
        subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True)
    plan = local_plan(single_gpu_lora_plan, tmp_path, code_uri=f"file://{repo}/.git#v1")
    result = launch(plan)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "work" / "train.py").read_text() == "print('hi')\n"
    assert launch.events()[0]["cwd"] == str(tmp_path / "work")


def test_an_oss_archive_is_fetched_through_the_internal_endpoint_and_unpacked(launch, tmp_path):
    pkg = tmp_path / "pkg" / "project"
    pkg.mkdir(parents=True)
    (pkg / "train.py").write_text("print('hi')\n")
    archive = tmp_path / "code.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(tmp_path / "pkg"), "project"], check=True)
    launch.oss.write("code-bucket", "jobs/code.tar.gz", archive.read_bytes())
    plan = local_plan(single_gpu_lora_plan, tmp_path, code_uri="oss://code-bucket/jobs/code.tar.gz")
    result = launch(plan)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "work" / "train.py").exists(), "the archive's one top-level folder is entered"
    (call,) = launch.oss_calls()
    assert (call["op"], call["bucket"], call["key"]) == ("get", "code-bucket", "jobs/code.tar.gz")
    assert (call["region"], call["endpoint"]) == ("cn-shenzhen", "oss-cn-shenzhen-internal.aliyuncs.com")


def test_oss_code_folder_and_single_file(launch, tmp_path):
    launch.oss.write("code-bucket", "jobs/src/train.py", b"print('dir')\n")
    launch.oss.write("code-bucket", "jobs/src/lib/util.py", b"X = 1\n")
    launch.oss.write("code-bucket", "jobs/one.py", b"print('one')\n")
    assert launch(local_plan(single_gpu_lora_plan, tmp_path, code_uri="oss://code-bucket/jobs/src/")).returncode == 0
    assert (tmp_path / "work" / "lib" / "util.py").read_text() == "X = 1\n"
    (launch.state / "job-finished").unlink()
    assert launch(local_plan(single_gpu_lora_plan, tmp_path, code_uri="oss://code-bucket/jobs/one.py")).returncode == 0
    assert os.listdir(tmp_path / "work") == ["one.py"]


def test_an_archive_that_escapes_its_folder_is_refused(launch, tmp_path):
    bad = tmp_path / "bad"
    (bad / "project").mkdir(parents=True)
    (bad / "project" / "train.py").write_text("x")
    archive = tmp_path / "code.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(bad), "project", "--transform", "s,^project/train,../../evil,"],
                   check=True)
    launch.oss.write("code-bucket", "code.tar.gz", archive.read_bytes())
    result = launch(local_plan(single_gpu_lora_plan, tmp_path, code_uri="oss://code-bucket/code.tar.gz"))
    assert result.returncode == 11 and "unsafe archive member" in result.stderr
    assert not list(tmp_path.rglob("evil.py")) and not launch.events()


def oss_checkpoint_plan(tmp_path):
    return single_gpu_lora_plan(
        storage=StoragePlan(checkpoint="oss", checkpoint_path=str(tmp_path / "ckpt"),
                            oss=OssPlan(bucket="ckpt-bucket", internal_endpoint="oss-cn-shenzhen-internal.aliyuncs.com",
                                        prefix="run1/")),
        job=JobPlan(method="full", precision="bf16", command="python train.py"))


def test_oss_checkpoints_are_restored_before_the_job_and_new_ones_uploaded_after(launch, tmp_path):
    launch.oss.write("ckpt-bucket", "run1/step-100.pt", b"from the last node", mtime=1_700_000_000)
    result = launch(oss_checkpoint_plan(tmp_path), FAKE_SAVE="step-200.pt")
    assert result.returncode == 0, result.stderr
    (trainer,) = launch.events()
    assert trainer["checkpoints"] == ["step-100.pt"], "restored before the trainer started"
    assert launch.oss.read("ckpt-bucket", "run1/step-200.pt") == b"saved by the trainer"
    ops = [(c["op"], c.get("key")) for c in launch.oss_calls()
           if not (c.get("key") or c.get("prefix") or "").startswith(("status/", "job/"))]  # the heartbeat's
    assert ops == [("list", None), ("get", "run1/step-100.pt"), ("list", None), ("put", "run1/step-200.pt")]
    assert {c["endpoint"] for c in launch.oss_calls()} == {"oss-cn-shenzhen-internal.aliyuncs.com"}
    assert len(launch.cloud.ecs_calls) == 1


def test_a_failed_checkpoint_restore_stops_before_training(launch, tmp_path):
    result = launch(oss_checkpoint_plan(tmp_path), FAKE_OSS_FAIL="AccessDenied: oss:ListObjects")
    assert result.returncode == 13, result.stderr
    assert "cannot restore checkpoints" in result.stderr and "AccessDenied" in result.stderr
    assert not launch.events(), "the trainer never started from scratch"
    assert len(launch.cloud.ecs_calls) == 1 and (launch.state / "job-finished").read_text() == "13\n"


def test_a_code_fetch_failure_exits_11_and_stops_billing(launch, tmp_path):
    plan = local_plan(single_gpu_lora_plan, tmp_path, code_uri=f"file://{tmp_path}/missing.git")
    result = launch(plan)
    assert result.returncode == 11 and "cannot fetch job.code_uri" in result.stderr
    assert not launch.events() and len(launch.cloud.ecs_calls) == 1


def test_the_sync_service_uploads_new_checkpoints_each_round(launch, tmp_path, waiter):
    plan = oss_checkpoint_plan(tmp_path)
    launch(plan, FAKE_OSS_FAIL="")  # renders the files (and runs the job once)
    (tmp_path / "ckpt" / "step-1.pt").write_text("one")
    env = dict(os.environ, TRAINSTACK_ETC=str(tmp_path / "node"), TRAINSTACK_LIB=str(tmp_path / "node"),
               TRAINSTACK_STATE=str(launch.state), TRAINSTACK_RUN=str(tmp_path / "run"),
               TRAINSTACK_OSS_PYTHON=str(tmp_path / "bin" / "oss-python"), FAKE_OSS_ROOT=str(tmp_path / "oss"),
               FAKE_OSS_LOG=str(tmp_path / "oss.log"))
    unit = render_files(plan, 0, options=FAST)
    (sync_unit,) = [f.content for f in unit if f.name == "trainstack-ckpt-sync.service"]
    assert "ExecStart=/bin/bash /usr/local/lib/trainstack/trainstack-launch.sh --ckpt-sync" in sync_unit
    (tmp_path / "node" / "node.env").write_text(
        (tmp_path / "node" / "node.env").read_text().replace("CKPT_SYNC_SECONDS=300", "CKPT_SYNC_SECONDS=1"))
    proc = subprocess.Popen(["bash", str(tmp_path / "node" / "trainstack-launch.sh"), "--ckpt-sync"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waiter(lambda: "run1/step-1.pt" in launch.oss.keys("ckpt-bucket"), what="the first upload")
        (tmp_path / "ckpt" / "step-2.pt").write_text("two")
        waiter(lambda: "run1/step-2.pt" in launch.oss.keys("ckpt-bucket"), what="the next round")
        rounds = len([c for c in launch.oss_calls() if c["op"] == "list"])
        waiter(lambda: len([c for c in launch.oss_calls() if c["op"] == "list"]) > rounds, what="one more round")
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    puts = [c["key"] for c in launch.oss_calls() if c["op"] == "put"]
    assert puts.count("run1/step-1.pt") == 1 and puts.count("run1/step-2.pt") == 1, puts
    assert not launch.events()[1:], "the sync mode never starts a trainer"


def test_the_job_settings_come_from_the_channel_and_a_change_reaches_the_next_job_start(launch, tmp_path):
    """Day two: the node reads job.env, settings.env and the hostfile from the stack bucket, checked
    against the SHA-256 in its own tag; a new command reaches it at the next job start, unchanged
    settings are not downloaded again."""
    first = local_plan(single_gpu_lora_plan, tmp_path, command="python train.py --lr 1")
    assert launch(first).returncode == 0
    assert launch.events()[-1]["argv"][-2:] == ["--lr", "1"]
    (tag,) = launch.cloud.tag_calls
    assert (tag["Action"], tag["ResourceType"], tag["ResourceId.1"], tag["Tag.1.Key"]) == (
        "ListTagResources", "instance", "i-wz9testinstance", "trainstack:job-settings")
    gets = lambda: [c for c in launch.all_oss_calls() if c["op"] == "get" and c["key"] == "job/settings.json"]  # noqa: E731
    assert len(gets()) == 1
    (launch.state / "job-finished").unlink()
    assert launch(first, PUBLISH=False).returncode == 0
    assert len(gets()) == 1, "unchanged settings (same tag) are not downloaded again"
    (launch.state / "job-finished").unlink()
    second = local_plan(single_gpu_lora_plan, tmp_path, command="python train.py --lr 2")
    assert launch(second).returncode == 0
    assert launch.events()[-1]["argv"][-2:] == ["--lr", "2"] and len(gets()) == 2


def test_settings_that_do_not_match_the_tag_are_refused_with_exit_16(launch, tmp_path):
    plan = local_plan(single_gpu_lora_plan, tmp_path, command="python train.py")
    launch.oss.write("stack-bucket", "job/settings.json", b'{"kind": "trainstack-job-settings"}')
    launch.cloud.tags["trainstack:job-settings"] = "0" * 64
    result = launch(plan, PUBLISH=False)
    assert result.returncode == 16 and "do not match" in result.stderr
    assert "is not the tag's 000000000000" in result.stderr
    assert not launch.events(), "the trainer never started"
    launch.cloud.tags.clear()
    (launch.state / "job-finished").unlink()
    result = launch(plan, PUBLISH=False)
    assert result.returncode == 16 and "has no trainstack:job-settings tag" in result.stderr


# ---- the heartbeat service and the budget guard (trainstack-heartbeat.service, docs/status.md) ----

def GUARDED(max_total_cost):  # noqa: N802 - the profile changes of guarded_plan
    return {"storage": {"checkpoint": "essd"}, "job": {"code_uri": None},
            "resources": {"max_total_cost": max_total_cost}}


def guarded_plan(tmp_path, max_total_cost=None):
    """The resolver's plan for the 1-GPU sample with checkpoints on ESSD and a budget (the stack
    bucket then holds only the heartbeats); the checkpoint path moved under tmp_path."""
    plan = single_gpu_lora_plan(profile=GUARDED(max_total_cost))
    assert plan.storage.oss is not None and plan.job.max_total_cost_cny == max_total_cost
    return plan.model_copy(update={"storage": plan.storage.model_copy(update={"checkpoint_path": str(tmp_path / "ckpt")})})


def last_heartbeat(launch, plan):
    from trainstack.bootstrap.heartbeat import status_prefix
    from trainstack.status import parse_heartbeat

    return parse_heartbeat(launch.oss.read(plan.storage.oss.bucket,
                                           status_prefix(plan, plan.node_names()[0]) + "heartbeat.json"))


def test_the_budget_guard_checkpoints_stops_the_trainer_and_the_node_at_the_limit(launch, tmp_path, waiter):
    plan = guarded_plan(tmp_path, max_total_cost=1000.0)
    node_hourly = plan.hourly_cost_cny  # one node
    uptime = tmp_path / "uptime"
    uptime.write_text("60.0 1.0\n")  # one minute billed: far under the budget
    options = BootstrapOptions(checkpoint_grace_seconds=1, kill_after_seconds=1, poweroff_fallback=False,
                               heartbeat_seconds=1)
    files, env = launch.prepare(plan, options=options, FAKE_MODE="run-until-stopped",
                                TRAINSTACK_UPTIME_FILE=str(uptime), TRAINSTACK_BOOT_ID_FILE=str(tmp_path / "boot"))
    service = subprocess.Popen(["bash", str(files["trainstack-launch.sh"]), "--heartbeat"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        job = subprocess.Popen(["bash", str(files["trainstack-launch.sh"])], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        waiter(lambda: [e["event"] for e in launch.events()] == ["trainer"], what="the trainer to start")
        assert not (tmp_path / "run" / "guard-stop").exists(), "under budget: no stop"
        # the node has now been billed for as many hours as the budget buys: the next beat trips the guard
        uptime.write_text(f"{1000.0 / node_hourly * 3600:.0f} 1.0\n")
        out, err = job.communicate(timeout=60)
    finally:
        service.terminate()
        service.communicate(timeout=10)
    assert job.returncode == 15, err
    assert [e["event"] for e in launch.events()] == ["trainer", "USR1", "TERM"], "checkpoint signal, then stop"
    assert "budget guard" in err and "reaches max_total_cost 1000" in err
    (stop,) = launch.cloud.ecs_calls
    assert (stop["Action"], stop["StoppedMode"]) == ("StopInstance", "StopCharging")
    assert (launch.state / "job-finished").read_text() == "15\n"
    assert json.loads((launch.state / "stop-reason.json").read_text())["reason"] == "budget"
    beat = last_heartbeat(launch, plan)  # the last heartbeat, written before the node stopped
    assert beat.state == "stopped" and beat.exit_code == 15 and beat.stop.reason == "budget"
    assert beat.billing.spent_cny >= 1000.0 - node_hourly * beat.guard.reserve_seconds / 3600

    # and `trainstack status` says why it stopped
    from trainstack.status import build_view, prediction_for
    from trainstack.status.render import render_text

    profile = _profile_of(plan)
    view = build_view(profile, plan, prediction_for(profile, plan), heartbeats=[beat])
    assert view.job.state == "stopped" and view.job.stop.reason == "budget" and view.job.exit_code == 15
    assert "stopped by trainstack: budget" in render_text(view)


def _profile_of(plan):
    from plan_factory import profile_for

    return profile_for("llama3-8b-lora", GUARDED(plan.job.max_total_cost_cny))


def test_a_job_over_budget_before_training_never_starts_the_trainer(launch, tmp_path):
    plan = guarded_plan(tmp_path, max_total_cost=1000.0)
    (tmp_path / "run").mkdir()
    files, env = launch.prepare(plan, options=BootstrapOptions(heartbeat_seconds=1, poweroff_fallback=False))
    # the guard asked for a stop while the node was still setting up (fetching code, the NCCL check)
    env["TRAINSTACK_STATE"] = str(tmp_path / "state")
    script = files["trainstack-launch.sh"].read_text().replace(
        'fetch_code || {', 'echo \'{"reason": "budget", "message": "over"}\' >"$GUARD_MARKER"; fetch_code || {', 1)
    files["trainstack-launch.sh"].write_text(script)
    result = subprocess.run(["bash", str(files["trainstack-launch.sh"])], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 15 and "not starting the trainer" in result.stderr
    assert not launch.events() and len(launch.cloud.ecs_calls) == 1


def test_a_finished_job_leaves_its_last_heartbeat(launch, tmp_path):
    plan = guarded_plan(tmp_path)
    result = launch(plan)
    assert result.returncode == 0, result.stderr
    beat = last_heartbeat(launch, plan)
    assert beat.state == "finished" and beat.exit_code == 0 and beat.stop is None
