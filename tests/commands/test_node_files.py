"""`trainstack node-files` writes what a node receives, exactly as rendered, with its modes."""

from __future__ import annotations

import stat
import subprocess

from trainstack import cli
from trainstack.bootstrap import render_files
from trainstack.commands.node_files import CPFS_PLACEHOLDER


def test_a_stack_nodes_files_are_written_at_their_node_paths_with_their_modes(tmp_path, capsys):
    out = tmp_path / "node1"
    assert cli.main(["node-files", "--stack", "llama3-70b-full", "--rank", "1", "--out", str(out)]) == 0
    job = out / "etc/trainstack/job.env"
    assert stat.S_IMODE(job.stat().st_mode) == 0o600 and stat.S_IMODE((out / "etc/trainstack/node.env").stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "usr/local/sbin/trainstack-boot").stat().st_mode) == 0o755
    assert "--node-rank 1" in job.read_text() and (out / "user-data.yaml").read_text().startswith("#cloud-config")
    for script in ("usr/local/sbin/trainstack-boot", "usr/local/lib/trainstack/trainstack-setup.sh",
                   "usr/local/lib/trainstack/trainstack-launch.sh"):
        assert subprocess.run(["bash", "-n", str(out / script)]).returncode == 0
    import argparse

    from trainstack.commands.node_files import _plan

    # the plan as the program completes it (the stack bucket's deploy-time name: test_node_files_names.py)
    plan = _plan(argparse.Namespace(profile=None, stack="llama3-70b-full", account_id=None))
    expected = {f.path: f.content for f in render_files(plan, 1, cpfs_mount_address=CPFS_PLACEHOLDER)}
    assert {p: (out / p.lstrip("/")).read_text() for p in expected} == expected


def test_nothing_is_overwritten_and_a_dlc_plan_writes_the_pods_command(tmp_path, capsys):
    out = tmp_path / "d"
    out.mkdir()
    (out / "mine").write_text("keep")
    assert cli.main(["node-files", "--stack", "llama3-8b-lora", "--out", str(out)]) == 2
    assert (out / "mine").read_text() == "keep" and sorted(p.name for p in out.iterdir()) == ["mine"]
    dlc = tmp_path / "dlc"
    assert cli.main(["node-files", "--stack", "qwen-7b-dlc", "--out", str(dlc)]) == 0
    assert '--node-rank "${RANK:-0}"' in (dlc / "pai-dlc/user-command.sh").read_text()
    assert cli.main(["node-files", "--stack", "llama3-8b-lora", "--rank", "5", "--out", str(tmp_path / "x")]) == 2
    assert "nodes 0..0" in capsys.readouterr().err


def test_a_self_healing_pool_node_gets_the_pools_files_whatever_rank_is_asked(tmp_path, capsys):
    """Issue 23: nodes 1.. of a multi-node self-healing plan boot one scaling configuration's files."""
    from pathlib import Path

    import yaml

    repo = Path(__file__).resolve().parents[2]
    profile = yaml.safe_load((repo / "stacks/profiles/llama3-70b-full.yaml").read_text())
    profile["resources"].update(spot="allow", self_healing=True, gpus=24, max_hourly_cost=600)
    f = tmp_path / "heal.yaml"
    f.write_text(yaml.safe_dump(profile))
    outs = []
    for rank in (1, 2):
        out = tmp_path / f"rank{rank}"
        assert cli.main(["node-files", str(f), "--rank", str(rank), "--out", str(out)]) == 0
        assert "self-healing pool node" in capsys.readouterr().out
        outs.append({p.relative_to(out): p.read_text() for p in out.rglob("*") if p.is_file()})
    assert outs[0] == outs[1]
    job = outs[0][Path("etc/trainstack/job.env")]
    assert "--rdzv-backend c10d" in job and "is_host=false" in job and "--node-rank" not in job
