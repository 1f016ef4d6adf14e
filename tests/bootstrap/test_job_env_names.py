"""job.env may use the launch script's and the node files' names (issue 36 item 4): RUN, STATE, WORKDIR,
LIB, DEADLINE, ETC, TORCHRUN, REGION, STOP_ON, CHECKPOINT_DIR, ... reach the trainer unchanged and cannot
change what the launch script runs; only what trainstack exports to the trainer (launcher topology,
TRAINSTACK_*, the launch arrays) and the shell's variables stay reserved, one list for the bootstrap and
the launchers' README env forms."""

from __future__ import annotations

import re

import pytest

from launch_harness import launch, local_plan  # noqa: F401  (the launch fixture)
from plan_factory import single_gpu_lora_plan, spot_plan

from trainstack.bootstrap.node import Node
from trainstack.bootstrap.options import BootstrapOptions
from trainstack.bootstrap.programs import TEMPLATES
from trainstack.bootstrap.reserved import is_reserved
from trainstack.launchers import RESERVED_ENV, TOPOLOGY_ENV
from trainstack.plan import JobSecretPlan

VALUE = "hf_SECRETVALUE0123456789abcdefXYZ"
ISSUE = ("RUN", "STATE", "WORKDIR", "LIB", "DEADLINE", "ETC", "TORCHRUN")


def formerly_reserved() -> list[str]:
    """What issue 13 reserved and issue 36 frees: the launch script's assigned upper-case names and the
    node files' (node.env, settings.env) of a spot plan, minus what stays reserved."""
    text = (TEMPLATES / "programs" / "trainstack-launch.sh").read_text()
    # issue 13's reading of the script: NAME=value alone on its line (or an array), and export NAME=...
    assigned = set(re.findall(r"^\s*(?:export\s+)?([A-Z][A-Z0-9_]*)=(?:\(.*|\"[^\"]*\"|'[^']*'|[^\s'\"]*)\s*(?:[;#].*)?$",
                              text, re.M))
    for group in re.findall(r"\bexport\s+((?:[A-Z][A-Z0-9_]*=\S*\s*\\?\s*)+)", text):
        assigned |= set(re.findall(r"([A-Z][A-Z0-9_]*)=", group))
    node = Node(spot_plan(), 0, None, BootstrapOptions())
    files = {n for n, _ in node.node_env_pairs() + node.settings_env_pairs(check=False)}
    return sorted(n for n in assigned | files if not is_reserved(n))


def test_the_issues_names_and_the_node_files_names_are_free():
    free = formerly_reserved()
    assert set(ISSUE) <= set(free) and {"REGION", "STOP_ON", "CHECKPOINT_DIR", "PIDFILE", "VENV"} <= set(free)
    assert len(free) > 60


@pytest.mark.parametrize("name", ["NNODES", "NODE_RANK", "NPROC_PER_NODE", "MASTER_ADDR", "MASTER_PORT",
                                  "WORLD_SIZE", "RANK", "LOCAL_RANK", "FORCE_TORCHRUN", "PET_NNODES",
                                  "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "TRAINSTACK_CHECKPOINT_DIR",
                                  "TRAINSTACK_AGENT", "LAUNCH_ARGV", "JOB_SECRETS", "PATH", "BASH_ENV", "IFS",
                                  "LD_PRELOAD"])
def test_what_trainstack_exports_or_the_shell_reads_stays_reserved(name):
    assert is_reserved(name)


def test_the_launchers_readme_env_forms_use_the_same_list():
    """The hardening branch's README forms (FORCE_TORCHRUN=1, NPROC_PER_NODE=8 ...) are names the
    launchers export and the bootstrap reserves; checked once trainstack/launchers/env_forms.py exists."""
    assert all(is_reserved(n) for n in RESERVED_ENV) and set(TOPOLOGY_ENV) <= RESERVED_ENV
    forms = pytest.importorskip("trainstack.launchers.env_forms")
    assert set(forms.FORMS) <= RESERVED_ENV and all(is_reserved(n) for n in forms.FORMS)


def test_a_job_env_of_every_freed_name_reaches_the_trainer_and_changes_nothing(launch, tmp_path):
    names = formerly_reserved()
    env = {n: f"job-value-of-{n.lower()}" for n in names}
    plan = local_plan(spot_plan, tmp_path, command="python train.py", env=env)  # 2 GPUs: the NCCL check runs
    plan = plan.model_copy(update={"job": plan.job.model_copy(update={
        "secrets": {"HF_TOKEN": JobSecretPlan(kms_secret="team/hf-token")}})})
    launch.cloud.secrets["team/hf-token"] = VALUE
    result = launch(plan, FAKE_ENV_KEYS=",".join(names + ["HF_TOKEN"]))
    assert result.returncode == 0, result.stderr
    check, trainer = launch.events()
    assert check["event"] == "nccl_check" and trainer["event"] == "trainer"
    assert check["argv"][-1] == str(tmp_path / "node" / "nccl_check.py"), "the script's own LIB and TORCHRUN"
    assert check["extra_env"] == {**env, "HF_TOKEN": None}, "the job's variables reach the check as given"
    assert trainer["extra_env"] == {**env, "HF_TOKEN": VALUE}, "and the trainer, with the secret from KMS"
    assert trainer["cwd"] == str(tmp_path / "work") and trainer["env"]["TRAINSTACK_CHECKPOINT_DIR"] == str(
        tmp_path / "ckpt")
    assert (launch.state / "job-finished").read_text() == "0\n", "the script's own STATE"
    assert len(launch.cloud.ecs_calls) == 1 and launch.cloud.kms_calls[-1]["SecretName"] == "team/hf-token"
    assert not any("job-value-of" in line for line in result.stderr.splitlines() if "trainstack-launch" in line)


def test_validate_accepts_them_and_still_refuses_the_topology(tmp_path):
    from trainstack.bootstrap import render_files

    free = local_plan(single_gpu_lora_plan, tmp_path, env={n: "x" for n in ISSUE + ("REGION", "STOP_ON")})
    assert render_files(free, 0)  # no LaunchError: nothing reserved
    from trainstack.launchers import LaunchError

    for name in ("NNODES", "TRAINSTACK_RUN", "PATH"):
        with pytest.raises(LaunchError) as err:
            render_files(local_plan(single_gpu_lora_plan, tmp_path, env={name: "x"}), 0)
        assert f"job.env.{name}" in str(err.value.problems[0].path)
