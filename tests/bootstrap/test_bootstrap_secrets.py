"""job.secrets: the node reads each value from KMS with its RAM role at job start and hands it
to the trainer's environment only; no rendered file, log line or argument ever holds it."""

from __future__ import annotations

import json
import subprocess
import sys

from plan_factory import single_gpu_lora_plan
from launch_harness import FAST, launch, local_plan  # noqa: F401  (the launch fixture)

from trainstack.bootstrap import render_files, render_user_data
from trainstack.plan import JobPlan, JobSecretPlan

VALUE = "hf_SECRETVALUE0123456789abcdefXYZ"


def secret_plan(tmp_path, **job):
    plan = local_plan(single_gpu_lora_plan, tmp_path, **job)
    return plan.model_copy(update={"job": plan.job.model_copy(update={
        "secrets": {"HF_TOKEN": JobSecretPlan(kms_secret="team/hf-token")}})})


def test_rendered_files_name_the_secret_never_its_value(tmp_path):
    plan = secret_plan(tmp_path)
    job = next(f for f in render_files(plan, 0) if f.name == "job.env")
    assert "JOB_SECRETS=(HF_TOKEN=team/hf-token)" in job.content and job.permissions == "0600"
    assert VALUE not in render_user_data(plan, 0)


def test_the_trainer_gets_the_secret_in_its_environment_and_nothing_logs_it(launch, tmp_path):
    launch.cloud.secrets["team/hf-token"] = VALUE
    plan = secret_plan(tmp_path, command="python train.py --lr 1")
    # the fake torchrun records the trainer's environment; ask it for the secret's variable
    result = launch(plan, FAKE_ENV_KEYS="HF_TOKEN")
    assert result.returncode == 0, result.stderr
    (trainer,) = launch.events()
    assert trainer["extra_env"] == {"HF_TOKEN": VALUE}
    assert VALUE not in result.stderr + result.stdout and "HF_TOKEN" in result.stderr  # the name only
    assert VALUE not in json.dumps(trainer["argv"])
    (call,) = launch.cloud.kms_calls  # signed with the role's STS credentials, checked by Alibaba's signer
    assert (call["Action"], call["Version"], call["SecretName"]) == ("GetSecretValue", "2016-01-20", "team/hf-token")
    assert call["SecurityToken"] == "sts-token/+="
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()
                      and "torchrun.log" not in p.name)
    assert VALUE not in written


def test_a_secret_that_cannot_be_read_stops_the_job_before_the_trainer_with_exit_14(launch, tmp_path):
    result = launch(secret_plan(tmp_path))  # no such secret in the fake KMS
    assert result.returncode == 14, result.stderr
    assert not launch.events() and "cannot read KMS secret team/hf-token for HF_TOKEN" in result.stderr
    assert len(launch.cloud.ecs_calls) == 1, "the node still stops billing"


def test_agent_exec_puts_secrets_in_the_child_environment_only(programs, fake_cloud, monkeypatch):
    fake_cloud.secrets["s1"] = "v1"
    monkeypatch.setenv("TRAINSTACK_METADATA_URL", fake_cloud.url)
    monkeypatch.setenv("TRAINSTACK_KMS_ENDPOINT", fake_cloud.url)
    monkeypatch.setenv("TRAINSTACK_RETRY_SECONDS", "0")
    agent = str(programs.path("trainstack_agent.py"))
    out = subprocess.run([sys.executable, agent, "exec", "--region", "cn-shenzhen", "--secret=A=s1", "--",
                          sys.executable, "-c", "import os; print(os.environ['A'])"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "v1\n" and "v1" not in out.stderr


def test_a_binary_secret_is_decoded_and_one_with_nul_is_refused(programs):
    import base64

    assert programs.launch.secret_value({"SecretData": base64.b64encode(b"tok").decode(), "SecretDataType": "binary"}, "s") == "tok"
    for answer in ({"SecretData": "a\0b"}, {"SecretData": base64.b64encode(b"\xff").decode(), "SecretDataType": "binary"},
                   {}):
        try:
            programs.launch.secret_value(answer, "s")
        except ValueError as exc:
            assert "a\0b" not in str(exc)
        else:
            raise AssertionError(f"accepted {answer}")


def test_job_plan_secrets_default_to_none():
    assert JobPlan(command="python t.py", method="full", precision="bf16").secrets == {}
