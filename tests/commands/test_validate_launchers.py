"""`validate` and `plan` accept 2-node profiles for every launcher and reject exactly the same
job.command, job.env and job.secrets problems with the same message (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainstack import cli

TWO_NODES = """
name: launch-check
region: cn-shenzhen
model: {preset: llama-3-8b}
training: {method: full, precision: bf16-mixed, zero_stage: 3, tokens: 1.0e8}
job: {command: "python train.py"}
resources: {target: ecs, gpus: 16, gpu_models: [A100-80G], spot: never}
storage: {dataset_gib: 50, checkpoint: oss}
"""


def profile(tmp_path: Path, **job) -> str:
    doc = yaml.safe_load(TWO_NODES)
    doc["job"].update(job)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def stderr_of(capsys, *argv) -> tuple[int, str]:
    rc = cli.main(list(argv))
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("command", [
    "torchrun train.py", "accelerate launch --use_deepspeed train.py", "deepspeed train.py --deepspeed ds.json",
    "llamafactory-cli train examples/train_full/llama3_full_sft.yaml", "swift sft --model Qwen/Qwen2.5-7B",
    "tune run full_finetune_distributed --config llama3/8B_full",
])
def test_two_node_profiles_validate_for_every_launcher(tmp_path, capsys, command):
    rc, err = stderr_of(capsys, "validate", profile(tmp_path, command=command))
    assert rc == 0, err


@pytest.mark.parametrize("job, fragment", [
    ({"command": "torchrun --nnodes 3 train.py"}, "the plan runs 2 node(s)"),
    ({"env": {"TRAINSTACK_RUN": "/", "NNODES": "3"}}, "NNODES is set by trainstack itself"),
    ({"secrets": {"MASTER_ADDR": {"kms_secret": "x"}}}, "MASTER_ADDR is set by trainstack itself"),
])
def test_validate_and_plan_refuse_alike(tmp_path, capsys, job, fragment):
    path = profile(tmp_path, **job)
    rc_v, err_v = stderr_of(capsys, "validate", path)
    rc_p, err_p = stderr_of(capsys, "plan", path)
    assert (rc_v, rc_p) == (2, 2) and fragment in err_v
    assert err_v == err_p


def test_a_two_node_plan_with_secrets_never_shows_a_value(tmp_path, capsys):
    rc = cli.main(["plan", profile(tmp_path, command="accelerate launch train.py",
                                   secrets={"HF_TOKEN": {"kms_secret": "team/hf-token"}}), "--format", "json"])
    out = capsys.readouterr().out
    assert rc in (0, 4) and "kms:GetSecretValue" in out and "acs:kms:cn-shenzhen:*:secret/team/hf-token" in out


@pytest.mark.parametrize("resolvable", [True, False])
def test_dlc_refuses_job_secrets_with_the_way_out(tmp_path, capsys, resolvable):
    doc = yaml.safe_load((Path(__file__).parents[2] / "stacks/profiles/qwen-7b-dlc.yaml").read_text())
    doc["job"]["secrets"] = {"HF_TOKEN": {"kms_secret": "hf"}}
    if not resolvable:
        doc["resources"]["gpus"] = 64  # beyond public resources: validate still sees the DLC target
    path = tmp_path / "dlc.yaml"
    path.write_text(yaml.safe_dump(doc))
    rc, err = stderr_of(capsys, "validate", str(path))
    assert rc == 2 and "job.secrets works on ECS nodes only" in err
    if resolvable:
        assert stderr_of(capsys, "plan", str(path)) == (2, err)
