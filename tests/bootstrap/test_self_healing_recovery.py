"""Issue 23: one reclaimed spot node of a 3-node self-healing job is replaced, and nodes 0 and 2 are
never touched. Everything on the nodes is what trainstack renders (trainstack-launch, the spot
watcher, the agent, the job settings channel) run for real in bash/python; around them a fake
cloud: per-instance metadata services (tokens required) and an ESS scaling group that keeps the
pool at its size, launching a replacement from the one scaling configuration (rank 1's files).

``torchrun`` is a stand-in for its elastic agent, built on the behaviour documented in torch 2.13
(trainstack/layout/spot_pool.py): members keep a heartbeat in the rendezvous store on node 0; a
round completes with exactly ``--nnodes N:N`` live members, ranks in the sorted order of their
addresses; a member that stops beating fails the survivors' workers (a restart counted against
``--max-restarts``), and they wait for a full group again. The real agent is run on loopback by
``make test-launch`` (tests/launch/test_elastic_real.py).
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest
from conftest import FakeCloud, publish_programs, publish_settings, wait_for, write_rendered
from fake_oss import DirStore, oss_python_wrapper
from plan_factory import hand_edited, multi_node_erdma_plan

from trainstack.bootstrap import BootstrapOptions
from trainstack.bootstrap.render import CHANNEL_FILES, JOB_SETTINGS_TAG
from trainstack.tags import SCALE_RULE_TAG

FAST = BootstrapOptions(checkpoint_grace_seconds=1, kill_after_seconds=1, poweroff_fallback=False)
STEPS = 80
CPFS = "cpfs-x.cn-shenzhen.cpfs.aliyuncs.com"

ELASTIC_AGENT = r'''
import json, os, signal, sys, threading, time
argv = sys.argv[1:]
def opt(name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default
def record(event, **data):
    with open(os.environ["FAKE_LOG"], "a") as fh:
        fh.write(json.dumps(dict(event=event, node=os.environ["FAKE_NODE"], t=time.time(), **data)) + "\n")
if any(a.endswith("nccl_check.py") for a in argv):
    record("nccl_check", argv=argv)
    sys.exit(0)
nnodes = int(opt("--nnodes").split(":")[1])
addr, restarts_left = opt("--local-addr"), int(opt("--max-restarts", "0"))
conf = dict(kv.split("=", 1) for kv in opt("--rdzv-conf", "").split(",") if kv)
store = os.path.join(os.environ["FAKE_RDZV_ROOT"], opt("--rdzv-endpoint"), opt("--rdzv-id"))
ckpt = os.environ["TRAINSTACK_CHECKPOINT_DIR"]
if conf.get("is_host") == "true":
    os.makedirs(store, exist_ok=True)  # node 0 hosts the store
record("start", argv=argv, pid=os.getpid())
signal.signal(signal.SIGUSR1, lambda *_: record("checkpoint_signal"))
def beat():
    while True:
        if os.path.isdir(store):
            with open(os.path.join(store, addr + ".tmp"), "w") as fh:
                fh.write(str(time.time()))
            os.replace(os.path.join(store, addr + ".tmp"), os.path.join(store, addr))
        time.sleep(0.05)
threading.Thread(target=beat, daemon=True).start()
host_addr = opt("--rdzv-endpoint").rsplit(":", 1)[0]
host = conf.get("is_host") == "true"
lost_after = float(os.environ.get("FAKE_STORE_TIMEOUT", "3"))
def host_alive():  # the c10d store lives in node 0's agent: without it the others' calls fail
    try:
        return time.time() - float(open(os.path.join(store, host_addr)).read() or 0) < 0.5
    except (OSError, ValueError):
        return False
def store_lost(since):
    if host or host_alive():
        return False
    if time.time() - since > lost_after:
        record("store_lost")
        sys.exit(1)
    return False
def live():
    now = time.time()
    out = []
    for name in os.listdir(store) if os.path.isdir(store) else []:
        if name.endswith(".tmp"):
            continue
        try:
            if now - float(open(os.path.join(store, name)).read() or 0) < 0.5:
                out.append(name)
        except (OSError, ValueError):
            pass
    return sorted(out)
def latest():
    steps = [int(n.split("-")[1]) for n in os.listdir(ckpt) if n.startswith("step-")]
    return max(steps, default=0)
while True:
    since = time.time()
    while len(live()) != nnodes:  # the rendezvous: wait for a full group
        store_lost(since)
        time.sleep(0.02)
    members = live()
    step = latest() + 1
    rank = members.index(addr)
    record("round", members=members, rank=rank, resume_step=step)
    failed = False
    while step <= int(os.environ["FAKE_STEPS"]):
        time.sleep(0.03)
        while os.path.exists(os.environ["FAKE_HOLD"]) and live() == members:  # the test holds the job mid-run
            time.sleep(0.02)
        if os.path.exists(os.environ["FAKE_FAIL"]):  # the trainer fails on every node: restarts run out
            record("gave_up")
            sys.exit(1)
        if live() != members:  # a member stopped beating: this worker group fails
            failed = True
            break
        if rank == 0:
            open(os.path.join(ckpt, "step-%d" % step), "w").close()
        step += 1
    if not failed:
        record("done", step=step - 1)
        time.sleep(0.6)  # the exit barrier: the others finish their last step
        sys.exit(0)
    if restarts_left == 0:
        record("gave_up")
        sys.exit(1)
    restarts_left -= 1
    record("restart", left=restarts_left)
'''


@dataclass
class Instance:
    id: str
    ip: str
    kind: str  # anchor | pool
    cloud: FakeCloud
    root: Path
    processes: list[subprocess.Popen] = field(default_factory=list)
    billed_from: float = 0.0
    billed_until: Optional[float] = None  # released (pool) or stopped (StopInstance) at

    @property
    def launch(self) -> subprocess.Popen:
        return self.processes[0]

    def log(self) -> str:
        return "".join(p.read_text() for p in sorted(self.root.glob("launch-*.log")))[-4000:]


RULE = "ari:acs:ess:cn-shenzhen:1234567890:scalingrule/asr-scale-to-zero"


class FakeEss:
    """Node 0 as a plain instance; the pool an ESS group of ``size`` that replaces a reclaimed node and
    honours its one scale-to-0 rule (ExecuteScalingRule: desired 0, every pool node released). It
    counts billed node-seconds: from launch to release (pool) or StopInstance (node 0)."""

    def __init__(self, plan, tmp: Path, bin_dir: Path, oss_python: Path) -> None:
        self.plan, self.tmp, self.bin, self.oss_python = plan, tmp, bin_dir, oss_python
        self.size = plan.spot_pool.max_size
        self.pool_ips = (str(ip) for ip in list(ipaddress.ip_network(plan.network.pool_vswitch_cidr).hosts())[3:])
        self.instances: dict[str, Instance] = {}
        self.released: list[Instance] = []
        self.stopped: list[Instance] = []
        self.launched = 0
        self.logs: list = []
        self.rule_calls: list[dict] = []
        self.extra_env: dict[str, str] = {}
        self.lock = threading.RLock()
        self.done = threading.Event()
        self.watcher = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._boot("anchor", self.plan.node_private_ips()[0])
        while sum(i.kind == "pool" for i in self.instances.values()) < self.size:
            self._boot("pool", next(self.pool_ips))
        self.watcher.start()

    def _watch(self) -> None:
        """ESS and ECS answering the nodes' calls: the scale-to-0 rule and node 0's StopInstance."""
        while not self.done.wait(0.05):
            with self.lock:
                for inst in list(self.instances.values()):
                    calls = [c for c in inst.cloud.ecs_calls if c["Action"] == "ExecuteScalingRule"]
                    if calls and inst.kind == "pool":
                        self.rule_calls += calls
                        inst.cloud.ecs_calls[:] = [c for c in inst.cloud.ecs_calls if c not in calls]
                        self.size = 0  # TotalCapacity 0: ESS releases every pool node
                        for node in [i for i in self.instances.values() if i.kind == "pool"]:
                            self.release(node)
                    elif inst.kind == "anchor" and inst.billed_until is None and any(
                            c["Action"] == "StopInstance" for c in inst.cloud.ecs_calls):
                        inst.billed_until = time.time()
                        self.stopped.append(inst)

    def _boot(self, kind: str, ip: str, *, iid: Optional[str] = None, root: Optional[Path] = None) -> Instance:
        self.launched += 1
        iid = iid or f"i-{kind}-{self.launched}"
        cloud = FakeCloud()
        cloud.routes["meta-data/instance-id"] = [(200, iid)]
        cloud.routes["meta-data/private-ipv4"] = [(200, ip)]
        cloud.thread.start()
        root = root or self.tmp / iid
        node = root / "etc"
        rank = 0 if kind == "anchor" else 1  # every pool node boots the scaling configuration's files
        files = write_rendered(self.plan, node, rank, options=FAST, cpfs_mount_address=CPFS)
        for name in CHANNEL_FILES:  # these come from the job settings channel at job start
            (node / name).unlink(missing_ok=True)
        # what the deployer tags (ESS copies the configuration's tags onto a node at launch)
        cloud.tags[JOB_SETTINGS_TAG] = self.digest
        cloud.tags[SCALE_RULE_TAG] = RULE
        env = dict(os.environ, PATH=f"{self.bin}:{os.environ['PATH']}", FAKE_NODE=iid, FAKE_LOG=str(self.tmp / "log"),
                   FAKE_STEPS=str(STEPS), FAKE_RDZV_ROOT=str(self.tmp / "rendezvous"),
                   FAKE_CPFS_MOUNT=self.plan.storage.cpfs.mount_path, FAKE_FAIL=str(self.tmp / "fail"),
                   FAKE_HOLD=str(self.tmp / "hold"),
                   TRAINSTACK_ETC=str(node), TRAINSTACK_LIB=str(node), TRAINSTACK_STATE=str(root / "state"),
                   TRAINSTACK_RUN=str(root / "run"), TRAINSTACK_WORKDIR=str(root / "work"),
                   TRAINSTACK_METADATA_URL=cloud.url, TRAINSTACK_ECS_ENDPOINT=cloud.url,
                   TRAINSTACK_KMS_ENDPOINT=cloud.url, TRAINSTACK_ESS_ENDPOINT=cloud.url, TRAINSTACK_RETRY_SECONDS="0",
                   TRAINSTACK_SETTINGS_ATTEMPTS="2", TRAINSTACK_RAM_ROLE_WAIT_SECONDS="0",
                   TRAINSTACK_OSS_PYTHON=str(self.oss_python), FAKE_OSS_ROOT=str(self.tmp / "oss"),
                   FAKE_OSS_LOG=str(self.tmp / "oss.log"), TRAINSTACK_SPOT_POLL_SECONDS="0.05",
                   TRAINSTACK_POOL_POLL_SECONDS="0.2", TRAINSTACK_POOL_GRACE_SECONDS="2",
                   TRAINSTACK_SPOT_MARKER=str(root / "run" / "spot-termination-time"),
                   TRAINSTACK_TRAINER_PIDFILE=str(root / "run" / "trainer.pid"), TRAINSTACK_CHECKPOINT_SIGNAL="USR1",
                   **self.extra_env)
        (root / "run").mkdir(parents=True, exist_ok=True)
        out = open(root / f"launch-{self.launched}.log", "w")
        self.logs.append(out)
        inst = Instance(iid, ip, kind, cloud, root, billed_from=time.time())
        # what the node's systemd starts: trainstack-job.service and the spot watcher
        inst.processes.append(subprocess.Popen(["bash", str(files["trainstack-launch.sh"])], env=env, stdout=out,
                                               stderr=subprocess.STDOUT, start_new_session=True))
        inst.processes.append(subprocess.Popen([sys.executable, str(files["trainstack_spot.py"])], env=env, stdout=out,
                                               stderr=subprocess.STDOUT, start_new_session=True))
        with self.lock:
            self.instances[iid] = inst
        return inst

    @property
    def digest(self) -> str:
        return self.store_digest

    def _kill(self, inst: Instance, sig: int = signal.SIGKILL) -> None:
        for p in inst.processes:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
        for p in inst.processes:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        inst.cloud.server.shutdown()
        inst.cloud.server.server_close()

    def release(self, inst: Instance) -> None:
        """ESS (or Alibaba, on a reclaim) releases a pool node: everything on it ends, billing too."""
        with self.lock:
            self.instances.pop(inst.id, None)
        self._kill(inst)
        inst.billed_until = time.time()
        self.released.append(inst)

    def interrupt(self, inst: Instance, notice_seconds: float = 0.5) -> Instance:
        """Alibaba's notice (metadata termination-time), the release after the notice window (SIGKILL of
        everything on the instance), then ESS's replacement (spot_instance_remedy; it boots after the
        reclaimed node is gone, as a GPU node's boot outlasts the 5-minute notice)."""
        inst.cloud.routes["meta-data/instance/spot/termination-time"] = [(200, "2026-12-01T10:05:00Z")]
        wait_for(lambda: (inst.root / "run" / "spot-termination-time").exists(), 10, "the spot watcher's marker")
        wait_for(lambda: any(e["event"] == "checkpoint_signal" and e["node"] == inst.id for e in events(self.tmp)),
                 10, "the checkpoint signal reaching the trainer")
        time.sleep(notice_seconds)
        self.release(inst)
        return self._boot("pool", next(self.pool_ips))

    def reboot_anchor(self, anchor: Instance, *, replaced: bool) -> Instance:
        """Node 0 goes away and comes back at its fixed IP: a reboot (systemd's SIGTERM, the same disk and
        instance: also what ECS auto-recovery on a host failure does) or a replacement (`pulumi up
        --replace`: a new instance and system disk; delete-before-replace frees the IP first)."""
        with self.lock:
            self.instances.pop(anchor.id, None)
            pool = [i.id for i in self.instances.values() if i.kind == "pool"]
        gone = time.time()
        self._kill(anchor, signal.SIGKILL if replaced else signal.SIGTERM)
        # A real reboot or replacement takes minutes, the pool's agents lose node 0's store in seconds: node 0
        # is back only after each pool node's agent gave up on it (racing the fake's 3 s store timeout with a
        # ~3 s fake reboot let the pool rejoin in place, the case this test does not mean).
        wait_for(lambda: {e["node"] for e in events(self.tmp) if e["t"] >= gone and e["node"] in pool
                          and e["event"] in ("store_lost", "gave_up")} == set(pool), 30,
                 "the pool's agents losing node 0's rendezvous store")
        if replaced:
            anchor.billed_until = time.time()
            self.released.append(anchor)
            return self._boot("anchor", anchor.ip)
        shutil.rmtree(anchor.root / "run")  # /run is a tmpfs: a reboot empties it
        return self._boot("anchor", anchor.ip, iid=anchor.id, root=anchor.root)

    def billed_after(self, moment: float) -> float:
        """Node-seconds billed after ``moment`` by every instance this test launched (running ones till now)."""
        now = time.time()
        every = list(self.instances.values()) + self.released + self.stopped
        return sum(max(0.0, (i.billed_until or now) - moment) for i in {id(i): i for i in every}.values())

    def close(self) -> None:
        self.done.set()
        for inst in list(self.instances.values()):
            if inst.cloud.server.socket.fileno() != -1:
                self._kill(inst)
        for out in self.logs:
            out.close()


def events(tmp: Path) -> list[dict]:
    log = tmp / "log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def publish_generation(plan, root: Path) -> str:
    """What `pulumi up` writes for the job settings: settings.json and the generation (publish_settings)."""
    cloud = FakeCloud()  # its tags only: the server is never started
    cloud.server.server_close()
    return publish_settings(plan, cloud, root, options=FAST, cpfs_mount_address=CPFS)


PROFILE_CHANGES = {"resources": {"spot": "allow", "self_healing": True, "max_hourly_cost": 650},
                   "job": {"command": "torchrun train.py --resume latest"}}


def elastic_plan(tmp: Path):
    plan = multi_node_erdma_plan(3, profile=PROFILE_CHANGES)
    cpfs = tmp / "cpfs"
    storage = plan.storage.model_copy(update={
        "checkpoint_path": str(cpfs / "checkpoints"),
        "cpfs": plan.storage.cpfs.model_copy(update={"mount_path": str(cpfs)})})
    return hand_edited(plan, storage=storage, job=plan.job.model_copy(update={"code_uri": None}))


@pytest.fixture
def ess(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "torchrun").write_text(f"#!{sys.executable}\n{ELASTIC_AGENT}")
    (bin_dir / "systemctl").write_text("#!/bin/bash\nexit 0\n")
    # CPFS is "mounted" (a shared directory): mountpoint answers yes for it alone, findmnt names the export
    (bin_dir / "mountpoint").write_text('#!/bin/bash\n[ "${!#}" = "$FAKE_CPFS_MOUNT" ]\n')
    (bin_dir / "findmnt").write_text(f'#!/bin/bash\necho "{CPFS}:/share"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    plan = elastic_plan(tmp_path)
    (tmp_path / "cpfs" / "checkpoints").mkdir(parents=True)
    store = DirStore(tmp_path / "oss")
    publish_programs(plan, tmp_path / "oss")  # what `pulumi up` uploads (components/job_settings.py)
    cloud = FakeEss(plan, tmp_path, bin_dir, oss_python_wrapper(bin_dir / "oss-python"))
    cloud.store = store
    cloud.store_digest = publish_generation(plan, tmp_path / "oss")
    try:
        yield cloud
    finally:
        cloud.close()


def test_a_reclaimed_pool_node_is_replaced_and_the_others_are_never_touched(ess, tmp_path):
    ess.start()
    anchor, node_1, node_2 = ess.instances.values()
    wait_for(lambda: len({e["node"] for e in events(tmp_path) if e["event"] == "round"}) == 3, 60,
             "the first rendezvous round of 3 nodes")
    wait_for(lambda: len(os.listdir(tmp_path / "cpfs" / "checkpoints")) >= 10, 60, "10 checkpoints")

    replacement = ess.interrupt(node_1)

    assert anchor.launch.wait(timeout=90) == 0, anchor.log()
    for inst in (node_2, replacement):  # they finish, scale the pool to 0, and ESS releases them
        wait_for(lambda: inst in ess.released, 60, f"{inst.id} released by the scale-to-0 rule")
    # the first to finish runs the rule, which releases both: the other may be gone before it calls it too
    assert any("scaling the self-healing pool to 0" in inst.log() for inst in (node_2, replacement))
    log = events(tmp_path)
    by_node = {i: [e for e in log if e["node"] == i] for i in (anchor.id, node_1.id, node_2.id, replacement.id)}

    # nodes 0 and 2: the same instances, one launch each (their agents restarted the workers themselves)
    assert ess.released[0] == node_1 and {i.id for i in ess.released[1:]} == {node_2.id, replacement.id}
    for inst in (anchor, node_2):
        kinds = [e["event"] for e in by_node[inst.id]]
        assert kinds.count("start") == 1 and kinds.count("restart") == 1 and kinds[-1] == "done", kinds
    # node 1 got the notice as a checkpoint signal and was released before finishing
    assert "checkpoint_signal" in [e["event"] for e in by_node[node_1.id]]
    assert "done" not in [e["event"] for e in by_node[node_1.id]]
    assert not (node_1.root / "state" / "job-finished").exists()

    # the replacement: a new instance and address, the pool's files, the same launch line
    assert replacement.ip not in (anchor.ip, node_1.ip, node_2.ip)
    start = {i: next(e["argv"] for e in by_node[i] if e["event"] == "start") for i in by_node}
    local = lambda argv: argv[argv.index("--local-addr") + 1]  # noqa: E731
    assert [local(start[i.id]) for i in (anchor, node_1, node_2, replacement)] == [
        anchor.ip, node_1.ip, node_2.ip, replacement.ip]
    without_addr = lambda argv: [w for k, w in enumerate(argv) if k == 0 or argv[k - 1] != "--local-addr"]  # noqa
    assert without_addr(start[replacement.id]) == without_addr(start[node_1.id])
    assert start[anchor.id][start[anchor.id].index("--rdzv-endpoint") + 1] == f"{anchor.ip}:29400"
    assert "join_timeout=3600,is_host=true" in start[anchor.id]
    assert "join_timeout=3600,is_host=false" in start[replacement.id]

    # training resumed from the latest checkpoint, with the replacement in the group, to the end
    last = [e for e in log if e["event"] == "round" and e["node"] == anchor.id][-1]
    assert last["members"] == sorted([anchor.ip, node_2.ip, replacement.ip])
    first_resume = [e for e in log if e["event"] == "round" and e["node"] == anchor.id][0]["resume_step"]
    assert first_resume == 1 and last["resume_step"] > 10
    assert len(os.listdir(tmp_path / "cpfs" / "checkpoints")) == STEPS  # each step checkpointed once, none lost

    # at the end node 0 stops itself and the pool goes to 0 through its one rule: nothing bills after the job
    ended = job_end(tmp_path)
    wait_for(lambda: not ess.instances or all(i.kind == "anchor" for i in ess.instances.values()), 30,
             "ESS releasing the pool")
    wait_for(lambda: anchor in ess.stopped, 30, "node 0's StopInstance")
    assert [c["Action"] for c in anchor.cloud.ecs_calls] == ["StopInstance"]
    assert {c["ScalingRuleAri"] for c in ess.rule_calls} == {RULE} and ess.size == 0
    assert_nothing_bills_after(ess, ended)
    # each pool instance reports under its own id; node 0 under its name
    keys = ess.store.keys(ess.plan.storage.oss.bucket)
    pool = ess.plan.pool_node_name()
    for inst in (node_2, replacement):
        assert f"status/{pool}/{inst.id}/heartbeat.json" in keys
    assert f"status/{ess.plan.node_names()[0]}/heartbeat.json" in keys
    # ... and `trainstack status` reads them all back (the reader and the view production uses)
    view = status_view(ess)
    assert [n.name for n in view.nodes] == [ess.plan.node_names()[0]] + sorted(
        f"{pool}/{i.id}" for i in (node_2, replacement))
    assert all(n.heartbeat_at for n in view.nodes) and view.job.state == "finished"


#: what the agents' end calls may take after the job's last step (the fake's polling included): what
#: "0 CNY after the job" allows, per node; everything bills nothing once its call is answered
END_CALL_SECONDS = 8.0


def job_end(tmp: Path) -> float:
    """When node 0's agent finished (its last "done"/"gave_up"/exit record)."""
    ends = [e for e in events(tmp) if e["event"] in ("done", "gave_up", "store_lost")]
    assert ends, "the job never ended"
    return max(float(e["t"]) for e in ends)


def assert_nothing_bills_after(ess, ended: float) -> None:
    """No instance bills on after the job: each stopped or was released, within the end calls' time."""
    every = list(ess.instances.values()) + ess.released + ess.stopped
    assert all(i.billed_until is not None for i in every), [(i.id, i.kind) for i in every if i.billed_until is None]
    after = ess.billed_after(ended)
    assert after <= END_CALL_SECONDS * len({i.id for i in every}), after
    time.sleep(0.5)
    assert ess.billed_after(ended) == after  # and it stays so


class StoreReader:
    """The fake store through the reader interface `trainstack status` uses (trainstack.cloud.oss)."""

    def __init__(self, store: DirStore) -> None:
        self.store = store

    def list_keys(self, bucket: str, prefix: str) -> list[str]:
        return [key for key, _, _ in self.store.list(bucket, prefix, record=False)]

    def get_bytes(self, bucket: str, key: str) -> bytes:
        return self.store.read(bucket, key)


def status_view(ess):
    from plan_factory import merged, profile_for

    from trainstack.bootstrap.heartbeat import status_prefix
    from trainstack.cloud.oss import read_heartbeats
    from trainstack.status import build_view, parse_heartbeat, prediction_for

    plan = ess.plan
    raw = read_heartbeats(StoreReader(ess.store), plan.storage.oss.bucket, status_prefix(plan), (plan.pool_node_name(),))
    beats = [parse_heartbeat(data, key) for key, data in raw.items()]
    profile = profile_for("llama3-70b-full", merged(
        {"resources": {"gpus": 24, "max_nodes": 8, "deadline_hours": None}}, PROFILE_CHANGES))
    return build_view(profile, plan, prediction_for(profile, plan), heartbeats=beats)


# ---- issue 33: every way a healing run ends bills nothing after it; node 0 loss; no split (issue 31 item 3) ----

def started(ess, tmp: Path, checkpoints: int = 10) -> tuple[Instance, ...]:
    ess.start()
    nodes = tuple(ess.instances.values())
    wait_for(lambda: len({e["node"] for e in events(tmp) if e["event"] == "round"}) == 3, 60,
             "the first rendezvous round of 3 nodes")
    wait_for(lambda: len(os.listdir(tmp / "cpfs" / "checkpoints")) >= checkpoints, 60, f"{checkpoints} checkpoints")
    return nodes


def ended_cleanly(ess, anchor: Instance, pool: list[Instance], rc: int = 0) -> float:
    """Node 0's job exits ``rc``, the pool scales to 0 through its rule, node 0 stops: 0 CNY after the job."""
    assert anchor.launch.wait(timeout=120) == rc, anchor.log()
    for inst in pool:
        wait_for(lambda: inst in ess.released, 90, f"{inst.id} released by the scale-to-0 rule\n{inst.log()}")
    wait_for(lambda: anchor in ess.stopped, 30, "node 0's StopInstance")
    assert {c["ScalingRuleAri"] for c in ess.rule_calls} == {RULE} and ess.size == 0
    ended = job_end(ess.tmp)
    assert_nothing_bills_after(ess, ended)
    return ended


def no_imdsv1(ess) -> None:
    """Every metadata read of every node carried a session token (the fake answers 401 without one)."""
    every = list(ess.instances.values()) + ess.released + ess.stopped
    for inst in {i.id: i for i in every}.values():
        assert inst.cloud.gets and all(token for _, token in inst.cloud.gets), inst.id


def run_record(ess) -> dict:
    plan = ess.plan
    key = f"status/{plan.node_names()[0]}/run.json"
    prefix = plan.storage.oss.prefix if hasattr(plan.storage.oss, "prefix") else ""
    keys = [k for k in ess.store.keys(plan.storage.oss.bucket) if k.endswith(key)]
    assert keys, f"no run record under {prefix}{key}"
    return json.loads(ess.store.read(plan.storage.oss.bucket, keys[0]))


def test_node_0_rebooting_mid_job_rejoins_and_the_pool_waits_for_it(ess, tmp_path):
    anchor, node_1, node_2 = started(ess, tmp_path)
    (tmp_path / "hold").touch()  # however slow the machine, the job cannot end before node 0 goes away
    rebooted = ess.reboot_anchor(anchor, replaced=False)
    wait_for(lambda: {e["node"] for e in events(tmp_path) if e["event"] in ("restart", "store_lost", "gave_up")}
             >= {node_1.id, node_2.id}, 30, "the pool's worker groups failing without node 0")
    (tmp_path / "hold").unlink()
    assert rebooted.id == anchor.id and rebooted.ip == anchor.ip
    ended_cleanly(ess, rebooted, [node_1, node_2])
    log = events(tmp_path)
    # the pool nodes launched into the same run again instead of finishing alone
    for inst in (node_1, node_2):
        assert "launching into it again" in inst.log(), inst.log()
        assert [e["event"] for e in log if e["node"] == inst.id][-1] == "done"
    assert "the run was going on when node 0 (re)started" in rebooted.log() or "job_resumed" in json.dumps(
        [e for e in log if e["node"] == anchor.id])
    last = [e for e in log if e["event"] == "round" and e["node"] == anchor.id][-1]
    assert last["resume_step"] > 10 and len(os.listdir(tmp_path / "cpfs" / "checkpoints")) == STEPS
    record = run_record(ess)
    assert record["state"] == "ended" and record["reason"] == "succeeded" and record["generation"] == ess.digest
    no_imdsv1(ess)


def test_a_replaced_node_0_restarts_the_job_from_the_latest_checkpoint(ess, tmp_path):
    anchor, node_1, node_2 = started(ess, tmp_path)
    new = ess.reboot_anchor(anchor, replaced=True)  # `pulumi up --replace` or ECS auto-recovery
    assert new.id != anchor.id and new.ip == anchor.ip
    ended_cleanly(ess, new, [node_1, node_2])
    rounds = [e for e in events(tmp_path) if e["event"] == "round" and e["node"] == new.id]
    assert rounds and rounds[0]["resume_step"] > 10  # from the latest checkpoint, not from step 1
    assert len(os.listdir(tmp_path / "cpfs" / "checkpoints")) == STEPS
    assert run_record(ess)["node0"] == anchor.id  # the run it resumed, started by the old node 0
    no_imdsv1(ess)


def test_a_failed_job_ends_the_cluster_too(ess, tmp_path):
    """The trainer fails on every node until the restarts run out: node 0 stops, the pool goes to 0."""
    anchor, node_1, node_2 = started(ess, tmp_path)
    (tmp_path / "fail").touch()
    ended_cleanly(ess, anchor, [node_1, node_2], rc=1)
    assert run_record(ess)["reason"] == "failed"
    stop = json.loads((anchor.root / "state" / "stop-reason.json").read_text())
    assert stop["reason"] == "failed"
    view = status_view(ess)
    assert view.job.stop is not None and view.job.stop.reason == "failed" and view.job.stop.at
    no_imdsv1(ess)


def test_the_budget_guard_stops_node_0_and_the_pool_goes_to_0(ess, tmp_path):
    anchor, node_1, node_2 = started(ess, tmp_path)
    marker = {"at": time.time(), "message": "the hourly budget is spent", "reason": "budget"}
    (anchor.root / "run" / "guard-stop").write_text(json.dumps(marker))
    ended_cleanly(ess, anchor, [node_1, node_2], rc=15)
    assert run_record(ess)["reason"] == "guard"
    assert json.loads((anchor.root / "state" / "stop-reason.json").read_text())["reason"] == "budget"
    # the guard asked node 0's trainer to checkpoint first (the fake's 80 short steps may finish in the grace)
    assert "checkpoint_signal" in [e["event"] for e in events(tmp_path) if e["node"] == anchor.id]


def test_a_replacement_arriving_after_a_settings_change_joins_the_running_generation(ess, tmp_path):
    """`pulumi up` after a job.command edit: settings.json and the tag ESS gives new nodes name generation 2;
    a replacement launched mid-job still trains with generation 1, the one node 0's run names."""
    anchor, node_1, node_2 = started(ess, tmp_path)
    first = ess.digest
    edited = hand_edited(ess.plan, job=ess.plan.job.model_copy(update={"command": ess.plan.job.command + " --lr 1e-5"}))
    ess.store_digest = publish_generation(edited, tmp_path / "oss")
    assert ess.digest != first
    replacement = ess.interrupt(node_1)
    assert replacement.cloud.tags[JOB_SETTINGS_TAG] == ess.digest  # ESS tagged it with the new generation
    ended_cleanly(ess, anchor, [node_2, replacement])
    log = events(tmp_path)
    start = {i.id: next(e["argv"] for e in log if e["event"] == "start" and e["node"] == i.id)
             for i in (node_2, replacement)}
    without_addr = lambda argv: [w for k, w in enumerate(argv) if k == 0 or argv[k - 1] != "--local-addr"]  # noqa
    assert without_addr(start[replacement.id]) == without_addr(start[node_2.id])  # the old command, same run
    assert "--lr" not in " ".join(start[replacement.id])
    assert (replacement.root / "etc" / ".job-settings.sha256").read_text().split()[0] == first
    last = [e for e in log if e["event"] == "round" and e["node"] == anchor.id][-1]
    assert last["members"] == sorted([anchor.ip, node_2.ip, replacement.ip])
