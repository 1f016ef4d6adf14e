"""Issue 23, for real (``make test-launch``): a multi-node self-healing plan's torchrun elastic
launch, exactly as trainstack renders it into job.env, run as two local "nodes" on loopback with
gloo. Node 0 (127.0.0.10, the rendezvous host) and a pool node (127.0.1.10) train; the pool node
is killed (SIGKILL, as a reclaim releases it); a replacement from another address (127.0.1.11)
starts with the same files, and training resumes from the latest checkpoint with node 0's agent
never restarted."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from plan_factory import hand_edited, multi_node_erdma_plan

from trainstack.bootstrap import BootstrapOptions, render_files

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
STEPS = 40


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (torchrun starts its workers in sessions of their own, so a
    process group kill would leave them running: a reclaimed node loses them all)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def reclaim(proc: subprocess.Popen) -> None:
    for pid in descendants(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def loopback_plan(tmp_path: Path):
    """A 2-node self-healing plan whose node vSwitch and pool vSwitch are loopback ranges."""
    plan = multi_node_erdma_plan(2, profile={"resources": {"spot": "allow", "self_healing": True,
                                                           "max_hourly_cost": 520},  # all-in: on-demand is 591.51
                                             "model": {"preset": "llama-3-8b"},
                                             "job": {"command": "python elastic_train.py"}})
    network = plan.network.model_copy(update={"vpc_cidr": "127.0.0.0/16", "vswitch_cidr": "127.0.0.0/24",
                                              "pool_vswitch_cidr": "127.0.1.0/24"})
    pool = plan.spot_pool.model_copy(update={"rendezvous_port": free_port(), "join_timeout_seconds": 120,
                                             "max_restarts": 3})
    job = plan.job.model_copy(update={"nproc_per_node": 1})
    return hand_edited(plan, network=network, spot_pool=pool, job=job,
                       storage=plan.storage.model_copy(update={"checkpoint_path": str(tmp_path / "cpfs")}))


def test_a_killed_pool_node_is_replaced_from_another_address_and_training_resumes(tmp_path):
    plan = loopback_plan(tmp_path)
    work, out, ckpt = tmp_path / "work", tmp_path / "out", tmp_path / "cpfs"
    for d in (work, out, ckpt):
        d.mkdir()
    (work / "elastic_train.py").write_text((HERE / "elastic_train.py").read_text())
    procs, logs = {}, {}

    def start(name: str, rank: int, addr: str) -> subprocess.Popen:
        node = tmp_path / name
        node.mkdir()
        for f in render_files(plan, rank, cpfs_mount_address="cpfs-x.cn-shenzhen.cpfs.aliyuncs.com",
                              options=BootstrapOptions()):
            (node / f.name).write_text(f.content)
        # what trainstack-launch does: the node's address from the metadata service, then job.env's line
        script = (f'TRAINSTACK_LOCAL_ADDR={addr}; export TRAINSTACK_LOCAL_ADDR; . ./node.env; . ./job.env; '
                  'cd "$E2E_WORK" || exit 1; exec "${LAUNCH_ARGV[@]}"')
        env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "E2E_OUT": str(out), "E2E_WORK": str(work),
               "E2E_STEPS": str(STEPS), "TRAINSTACK_CHECKPOINT_DIR": str(ckpt), "OMP_NUM_THREADS": "1",
               "GLOO_SOCKET_IFNAME": "lo", "TORCH_CPP_LOG_LEVEL": "ERROR"}
        logs[name] = open(tmp_path / f"{name}.log", "w")
        procs[name] = subprocess.Popen(["bash", "-c", script], cwd=node, env=env, stdout=logs[name],
                                       stderr=subprocess.STDOUT, start_new_session=True)
        return procs[name]

    def progress() -> list[dict]:
        f = out / "progress.jsonl"
        return [json.loads(line) for line in f.read_text().splitlines()] if f.exists() else []

    def wait(predicate, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return
            if any(p.poll() not in (None, 0) for p in procs.values() if p is not procs.get("node1")):
                break
            time.sleep(0.1)
        raise AssertionError(f"{what}; logs:\n" + "\n".join(
            f"--- {n}\n{(tmp_path / f'{n}.log').read_text()[-3000:]}" for n in procs))

    try:
        anchor = start("node0", 0, "127.0.0.10")
        start("node1", 1, "127.0.1.10")
        wait(lambda: len(os.listdir(ckpt)) >= 8, 240, "8 checkpoints before the reclaim")
        reclaim(procs["node1"])  # the node and everything on it gone
        killed_at = time.time()
        saved_before = max(int(n[5:-3]) for n in os.listdir(ckpt) if n.endswith(".pt"))
        started_at = time.time()
        replacement = start("node2", 1, "127.0.1.11")  # ESS's new node: the same files, another address
        for p in (anchor, replacement):
            p.wait(timeout=300)
        wait(lambda: anchor.returncode == 0 and replacement.returncode == 0, 1, "both nodes finish")
    finally:
        for p in procs.values():
            if p.poll() is None:
                reclaim(p)
        for fh in logs.values():
            fh.close()

    log = progress()
    resumes = [r for r in log if r["event"] == "resume"]
    first = [r for r in resumes if r["step"] == 1]
    after = [r for r in resumes if r["restart"] >= 1]
    assert {r["addr"] for r in first} == {"127.0.0.10", "127.0.1.10"}
    # node 0's agent restarted its worker (the survivor's restart count), the replacement joined
    assert {r["addr"] for r in after if r["addr"] == "127.0.0.10"} and any(r["addr"] == "127.0.1.11" for r in resumes)
    last_round = [r for r in resumes if r["addr"] in ("127.0.0.10", "127.0.1.11")][-2:]
    assert {r["world"] for r in last_round} == {2} and {r["master"] for r in last_round} <= {"127.0.0.10", "127.0.1.11"}
    resumed = last_round[-1]["step"]
    assert 1 < resumed <= saved_before + 2, (resumed, saved_before)  # from the latest checkpoint, not from 0
    done = [r for r in log if r["event"] == "done"]
    assert {r["addr"] for r in done} == {"127.0.0.10", "127.0.1.11"} and {r["weight"] for r in done} == {2.0 * STEPS}
    assert len({r["pid"] for r in resumes if r["addr"] == "127.0.0.10"}) == 2  # one new worker, same agent
    print(f"recovery: the replacement started {started_at - killed_at:.1f} s after the kill; training resumed "
          f"{last_round[-1]['at'] - started_at:.1f} s after it started, at step {resumed} "
          f"({saved_before} saved before the kill)")
