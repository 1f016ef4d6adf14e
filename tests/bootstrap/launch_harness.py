"""The node as the launch tests run it: its rendered files in one directory (ETC and LIB), a
stand-in torchrun and systemctl, the fake cloud (metadata, ECS, KMS) and a fake stack bucket that
holds what `pulumi up` writes (the job settings, the node programs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import publish_programs, publish_settings
from fake_oss import DirStore, oss_python_wrapper

from trainstack.bootstrap import BootstrapOptions
from trainstack.bootstrap.render import CHANNEL_FILES
from trainstack.plan import JobPlan, OssPlan, StoragePlan

FAST = BootstrapOptions(checkpoint_grace_seconds=1, kill_after_seconds=1, poweroff_fallback=False)

TORCHRUN = """\
import json, os, signal, sys, time
def record(event, **data):
    with open(os.environ["FAKE_LOG"], "a") as fh:
        fh.write(json.dumps(dict(event=event, **data)) + "\\n")
check = any(a.endswith("nccl_check.py") for a in sys.argv)
ckpt = os.environ["TRAINSTACK_CHECKPOINT_DIR"]
record("nccl_check" if check else "trainer", argv=sys.argv[1:], cwd=os.getcwd(),
       usr1_ignored=signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN,
       env={k: os.environ.get(k) for k in ("NCCL_IB_HCA", "NCCL_DEBUG", "MY_VAR", "TRAINSTACK_CHECKPOINT_DIR")},
       extra_env={k: os.environ.get(k) for k in os.environ.get("FAKE_ENV_KEYS", "").split(",") if k},
       checkpoints=sorted(os.listdir(ckpt)) if os.path.isdir(ckpt) else None)
if not check and os.environ.get("FAKE_SAVE"):
    with open(os.path.join(ckpt, os.environ["FAKE_SAVE"]), "w") as fh:
        fh.write("saved by the trainer")
if check:
    if os.environ.get("FAKE_NCCL_LOG"):
        print(os.environ["FAKE_NCCL_LOG"])
    sys.exit(int(os.environ.get("FAKE_NCCL_RC", "0")))
if os.environ.get("FAKE_MODE") == "run-until-stopped":
    signal.signal(signal.SIGUSR1, lambda *_: record("USR1"))
    def on_term(*_):
        record("TERM")
        sys.exit(143)
    signal.signal(signal.SIGTERM, on_term)
    end = time.monotonic() + 20  # bounded: the deadline test stops it long before
    while time.monotonic() < end:
        time.sleep(0.02)
sys.exit(int(os.environ.get("FAKE_RC", "0")))
"""


@pytest.fixture
def launch(tmp_path, fake_cloud, rendered):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "torchrun").write_text(f"#!{sys.executable}\n{TORCHRUN}")
    (bin_dir / "systemctl").write_text(f'#!/bin/bash\necho "systemctl $*" >>"{tmp_path}/systemctl.log"\n')
    for tool in ("torchrun", "systemctl"):
        (bin_dir / tool).chmod(0o755)
    oss_python = oss_python_wrapper(bin_dir / "oss-python")  # the real trainstack_oss.py over a DirStore

    def prepare(plan, rank=0, options=FAST, **env):
        """The node's files rendered under tmp_path/node and the environment the scripts run in."""
        kwargs = {"cpfs_mount_address": "cpfs-x.cn-shenzhen.cpfs.aliyuncs.com"} if plan.storage.cpfs else {}
        publish = env.pop("PUBLISH", True)
        kept = {n: (tmp_path / "node" / n).read_text() for n in CHANNEL_FILES if (tmp_path / "node" / n).exists()}
        files = {k: v for k, v in rendered(plan, tmp_path / "node", rank, options=options, **kwargs).items()
                 if k not in CHANNEL_FILES}  # these come from the job settings channel
        for name in CHANNEL_FILES:  # what the node had (a later job start), never the render's copy
            (tmp_path / "node" / name).unlink(missing_ok=True)
            if name in kept and not publish:
                (tmp_path / "node" / name).write_text(kept[name])
        if publish:
            publish_settings(plan, fake_cloud, tmp_path / "oss", options=options, **kwargs)
        publish_programs(plan, tmp_path / "oss")  # what `pulumi up` writes (components/job_settings.py)
        # the launcher reads /etc/trainstack and /usr/local/lib/trainstack: point both at the render
        base = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", FAKE_LOG=str(tmp_path / "torchrun.log"),
                    TRAINSTACK_ETC=str(tmp_path / "node"), TRAINSTACK_LIB=str(tmp_path / "node"),
                    TRAINSTACK_STATE=str(tmp_path / "state"), TRAINSTACK_RUN=str(tmp_path / "run"),
                    TRAINSTACK_WORKDIR=str(tmp_path / "work"), TRAINSTACK_METADATA_URL=fake_cloud.url,
                    TRAINSTACK_ECS_ENDPOINT=fake_cloud.url, TRAINSTACK_KMS_ENDPOINT=fake_cloud.url,
                    TRAINSTACK_RETRY_SECONDS="0", TRAINSTACK_SETTINGS_ATTEMPTS="2",
                    TRAINSTACK_RAM_ROLE_WAIT_SECONDS="0", TRAINSTACK_OSS_PYTHON=str(oss_python),
                    FAKE_OSS_ROOT=str(tmp_path / "oss"), FAKE_OSS_LOG=str(tmp_path / "oss.log"))
        return files, {**base, **env}

    def run(plan, rank=0, options=FAST, **env):
        files, full = prepare(plan, rank, options, **env)
        return subprocess.run(["bash", str(files["trainstack-launch.sh"])], capture_output=True, text=True,
                              env=full, timeout=60)

    def events():
        log = tmp_path / "torchrun.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def oss_calls():
        """The OSS calls of code and checkpoints (not the job settings channel's or the heartbeat's)."""
        return [c for c in all_oss_calls()
                if not str(c.get("key", c.get("prefix", ""))).startswith(("job/", "status/"))]

    def all_oss_calls():
        log = tmp_path / "oss.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    run.prepare = prepare
    run.events = events
    run.oss_calls = oss_calls
    run.all_oss_calls = all_oss_calls
    run.oss = DirStore(tmp_path / "oss")
    run.cloud = fake_cloud
    run.state = tmp_path / "state"
    return run


STACK_BUCKET = OssPlan(bucket="stack-bucket", internal_endpoint="oss-cn-shenzhen-internal.aliyuncs.com")


def local_plan(base, tmp_path, **job):
    """A plan whose checkpoints live under tmp_path (the launcher creates nothing outside it)."""
    return base(storage=StoragePlan(checkpoint="essd", checkpoint_path=str(tmp_path / "ckpt"), oss=STACK_BUCKET),
                job=JobPlan(method="full", precision="bf16", **{"command": "python train.py", **job}))
