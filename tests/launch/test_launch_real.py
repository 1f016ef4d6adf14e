"""The launchers for real (``make test-launch``): each tool's own parser reads the command line
trainstack renders, the documented-option files match those parsers, and a 2-node plan runs as
two local "nodes" (127.0.0.10 and 127.0.0.11, both loopback) with the gloo backend: every
process joins one group with the plan's world size and ranks, and one all-reduce crosses it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from plan_factory import single_gpu_lora_plan
from tool_parsers import PARSERS, documented_options

from trainstack.bootstrap import BootstrapOptions, render_files
from trainstack.bootstrap.render import DEEPSPEED_HOSTFILE
from trainstack.launchers import Topology, render_launch
from trainstack.launchers.options import DATA
from trainstack.launchers.words import text_of
from trainstack.plan import JobPlan, NetworkPlan, OssPlan, StoragePlan

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
TWO = Topology(nnodes=2, nproc_per_node=8, hosts=("10.0.0.10", "10.0.0.11"))


def two_node_plan(command: str, tmp_path: Path):
    """Two nodes of two 'GPUs' whose fixed private IPs are loopback addresses."""
    return single_gpu_lora_plan(
        nodes=2, gpus_per_node=2, total_gpus=4,
        network=NetworkPlan(vpc_cidr="127.0.0.0/16", vswitch_cidr="127.0.0.0/24"),
        storage=StoragePlan(checkpoint="essd", checkpoint_path=str(tmp_path / "ckpt"),
                            oss=OssPlan(bucket="stack-bucket", internal_endpoint="oss-cn-shenzhen-internal.aliyuncs.com")),
        job=JobPlan(command=command, method="full", precision="bf16", nproc_per_node=2))


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_the_documented_option_files_match_the_tools_parsers(tool):
    text = (DATA / f"{tool}.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(text) == documented_options(tool), "rerun tests/launch/tool_parsers.py --write"


def words(command: str, rank: int = 1) -> list[str]:
    return [text_of(w) for w in render_launch(command, TWO, rank, deepspeed_hostfile=DEEPSPEED_HOSTFILE).argv]


def test_torchrun_parses_what_trainstack_renders():
    args = PARSERS["torchrun"]().parse_args(words("python -u train.py --lr 1")[1:])
    assert (args.nnodes, args.nproc_per_node, args.node_rank, args.master_addr, args.master_port) == (
        "2", "8", 1, "10.0.0.10", 29500)
    assert (args.training_script, args.training_script_args, args.rdzv_backend) == ("train.py", ["--lr", "1"], "static")


def test_accelerate_parses_what_trainstack_renders():
    args = PARSERS["accelerate"]().parse_args(words("accelerate launch --use_deepspeed train.py --x 1")[2:])
    assert (args.num_machines, args.num_processes, args.machine_rank, args.main_process_ip,
            args.main_process_port) == (2, 16, 1, "10.0.0.10", 29500)
    assert args.deepspeed_multinode_launcher == "standard" and args.use_deepspeed
    assert (args.training_script, args.training_script_args) == ("train.py", ["--x", "1"])


def test_deepspeed_parses_what_trainstack_renders():
    from deepspeed.launcher import runner

    args = runner.parse_args(words("deepspeed train.py --deepspeed ds.json")[1:])
    assert args.no_ssh and (args.node_rank, args.master_addr, args.master_port, args.num_nodes, args.num_gpus) == (
        1, "10.0.0.10", 29500, 2, 8)
    assert args.hostfile == DEEPSPEED_HOSTFILE and args.user_script == "train.py"
    assert runner._parse_hostfile(render_launch("deepspeed t.py", TWO, 0).hostfile.splitlines()) == {
        "10.0.0.10": 8, "10.0.0.11": 8}


def test_tune_run_parses_what_trainstack_renders():
    from torchtune._cli import run

    import argparse

    sub = argparse.ArgumentParser().add_subparsers()
    parser = run.Run(sub)._parser
    args = parser.parse_args(words("tune run full_finetune_distributed --config llama3/8B_full")[2:])
    assert (args.nnodes, args.node_rank, args.rdzv_endpoint, args.standalone) == ("2", 1, "10.0.0.10:29500", False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_two_nodes(command: str, tmp_path: Path) -> list[dict]:
    """Render both nodes' files, then run each node's LAUNCH_ARGV from its sourced job.env at once."""
    plan = two_node_plan(command, tmp_path)
    options = BootstrapOptions(master_port=free_port())
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    (work / "allreduce.py").write_text((HERE / "allreduce.py").read_text())
    procs = []
    for rank in (0, 1):
        node = tmp_path / f"node{rank}"
        node.mkdir()
        for f in render_files(plan, rank, options=options):
            # sandbox: the DeepSpeed hostfile lives in the node's folder, not under /etc/trainstack
            (node / f.name).write_text(f.content.replace(DEEPSPEED_HOSTFILE, str(node / "deepspeed-hostfile")))
        script = ('. ./node.env; . ./job.env; cd "$E2E_WORK" || exit 1; export TRAINSTACK_TRAINER_PID=$$; '
                  'exec "${LAUNCH_ARGV[@]}"')
        env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "E2E_OUT": str(out), "E2E_WORK": str(work),
               "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "DS_ACCELERATOR": "cpu"}
        procs.append(subprocess.Popen(["bash", "-c", script], cwd=node, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=420)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-4000:]
    return sorted((json.loads(f.read_text()) for f in out.glob("rank-*.json")), key=lambda r: r["rank"])


@pytest.mark.parametrize("command, node_rank_env", [
    ("torchrun allreduce.py --tag t", "GROUP_RANK"),
    ("accelerate launch allreduce.py --tag a", "GROUP_RANK"),
    ("deepspeed allreduce.py --tag d", "CROSS_RANK"),
    ("tune run allreduce.py --config cfg.yaml --tag u", "GROUP_RANK"),  # a custom recipe: python -m allreduce
])
def test_a_two_node_plan_runs_as_two_local_nodes(command, node_rank_env, tmp_path):
    records = launch_two_nodes(command, tmp_path)
    assert [r["rank"] for r in records] == [0, 1, 2, 3], "4 processes: 2 nodes x 2 per node"
    assert {r["world_size"] for r in records} == {4} and {r["sum"] for r in records} == {10.0}
    assert {r["env"]["MASTER_ADDR"] for r in records} == {"127.0.0.10"}, "the rendezvous is node 0's address"
    assert [r["env"][node_rank_env] for r in records] == ["0", "0", "1", "1"], "ranks follow the plan's node order"
    assert [r["env"]["LOCAL_RANK"] for r in records] == ["0", "1", "0", "1"]
    # the script's own arguments; DeepSpeed adds --local_rank=N first (unless --no_local_rank)
    assert {tuple(a for a in r["argv"] if not a.startswith("--local_rank="))[-2:] for r in records} == {
        ("--tag", command.split()[-1])}
