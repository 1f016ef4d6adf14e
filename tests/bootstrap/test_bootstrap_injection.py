"""A profile value must never break or inject into the rendered shell: hostile values come back
from the node's env files as the same literal text, and nothing they contain runs."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from plan_factory import single_gpu_lora_plan

import json

from trainstack.bootstrap import render_script, render_user_data
from trainstack.bootstrap.render import render_job_settings
from trainstack.launchers import LaunchError
from trainstack.plan import DataDiskPlan, JobPlan, OssPlan, StoragePlan

HOSTILE = ['"; rm -rf / #', "$(touch {pwned})", "`touch {pwned}`", "'; touch {pwned}; '", "a\nb",
           "${{IFS}}x", "\\\"'$"]


def hostile_plan(pwned: str):
    values = [h.format(pwned=pwned) for h in HOSTILE]
    command = "python train.py " + " ".join(_shell_word(v) for v in values)
    return single_gpu_lora_plan(
        job=JobPlan(command=command, code_uri=f"oss://bucket/code-{values[1]}.tar.gz", method="lora",
                    precision="bf16", env={f"V{i}": v for i, v in enumerate(values)}),
        storage=StoragePlan(checkpoint="oss", checkpoint_path=f"/mnt/ckpt {values[0]}",
                            data_disk=DataDiskPlan(size_gib=200, mount_path=f"/mnt/data{values[2]}"),
                            oss=OssPlan(bucket="b", internal_endpoint="oss-cn-shenzhen-internal.aliyuncs.com",
                                        prefix=values[3])),
    ), values


def _shell_word(value: str) -> str:
    """How a profile author would quote the value inside job.command."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


def source_and_print(tmp_path, text: str, expressions: list[str]) -> list[str]:
    env_file = tmp_path / "settings.env"
    env_file.write_text(text)
    script = f'source "$1"; for v in {" ".join(expressions)}; do printf "%s\\0" "$v"; done'
    out = subprocess.run(["bash", "-c", script, "-", str(env_file)], capture_output=True, text=True,
                         check=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    return out.stdout.split("\0")[:-1]


def test_hostile_job_values_stay_literal_and_never_run(tmp_path):
    pwned = str(tmp_path / "pwned")
    plan, values = hostile_plan(pwned)
    job = render_script(plan, "job.env")
    assert source_and_print(tmp_path, job, ['"${LAUNCH_ARGV[@]}"'])[-len(values) - 1:] == ["train.py", *values]
    assert source_and_print(tmp_path, job, [f'"$V{i}"' for i in range(len(values))]) == values
    settings = render_script(plan, "settings.env")
    got = source_and_print(tmp_path, settings, ['"$CODE_URI"', '"$CHECKPOINT_DIR"', '"$OSS_CHECKPOINT_URI"'])
    assert got == [f"oss://bucket/code-{values[1]}.tar.gz", f"/mnt/ckpt {values[0]}", f"oss://b/{values[3]}/"]
    assert source_and_print(tmp_path, render_script(plan, "node.env"), ['"$DATA_DISK_MOUNT"']) == \
        [f"/mnt/data{values[2]}"]
    assert not (tmp_path / "pwned").exists()


def test_hostile_values_survive_the_cloud_config_and_job_settings_round_trips(tmp_path):
    plan, _ = hostile_plan(str(tmp_path / "pwned"))
    doc = yaml.safe_load(render_user_data(plan, 0))
    contents = {e["path"]: e["content"] for e in doc["write_files"] if "encoding" not in e}
    assert contents["/etc/trainstack/node.env"] == render_script(plan, "node.env")
    settings = json.loads(render_job_settings(plan).document)  # JSON carries the same bytes
    assert settings["ranks"][0]["job.env"] == render_script(plan, "job.env")
    assert settings["shared"]["settings.env"] == render_script(plan, "settings.env")


def test_a_job_command_with_shell_syntax_is_not_evaluated(tmp_path):
    pwned = tmp_path / "pwned"
    plan = single_gpu_lora_plan(job=JobPlan(command=f"python train.py; touch {pwned} && $(reboot)",
                                            method="lora", precision="bf16"))
    args = source_and_print(tmp_path, render_script(plan, "job.env"), ['"${LAUNCH_ARGV[@]}"'])
    assert args[-5:] == ["train.py;", "touch", str(pwned), "&&", "$(reboot)"]
    assert not pwned.exists()


@pytest.mark.parametrize("env", [{"BAD NAME": "x"}, {"X;reboot": "x"}, {"1X": "x"}])
def test_env_names_that_are_not_shell_names_are_refused(env):
    plan = single_gpu_lora_plan(job=JobPlan(command="python train.py", method="lora", precision="bf16", env=env))
    with pytest.raises(ValueError, match="job.env"):
        render_user_data(plan, 0)


def test_unbalanced_quotes_in_job_command_are_a_clear_error():
    plan = single_gpu_lora_plan(job=JobPlan(command='python train.py "oops', method="lora", precision="bf16"))
    with pytest.raises(LaunchError) as err:
        render_user_data(plan, 0)
    assert "shell quoting" in err.value.problems[0].message and "oops" not in str(err.value.lines())
