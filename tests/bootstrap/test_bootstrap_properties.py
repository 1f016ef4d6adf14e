"""The one quoting path, proven on arbitrary text: whatever a profile puts in a field that
reaches the node (job.command's words, job.env values, secret names, code_uri, checkpoint path,
OSS prefix, data disk mount), sourcing the rendered node.env and job.env in a sandboxed bash
gives back exactly that text and runs nothing. Text no shell can carry (NUL) is refused."""

from __future__ import annotations

import json

import os
import shlex
import subprocess

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_factory import single_gpu_lora_plan

from trainstack.bootstrap.render import render_job_settings
from trainstack.bootstrap import render_files, render_user_data
from trainstack.launchers import LaunchError
from trainstack.plan import DataDiskPlan, JobPlan, JobSecretPlan, OssPlan, StoragePlan

EXAMPLES = int(os.environ.get("TRAINSTACK_FUZZ_EXAMPLES", "40"))
#: shell metacharacters, quotes, newlines, unicode: everything but NUL (tested on its own)
PAYLOAD_PARTS = ["$(touch {m})", "`touch {m}`", "'; touch {m}; '", '"; touch {m} #', "\ntouch {m}\n", "${{IFS}}",
                 "\\", "'", '"', "\r\n", " ", "é漢字🙂", "$HOME", "!!", "*", "~", "#", "=", ";", "&&", "|", "<", ">"]
TEXT = st.lists(st.one_of(st.sampled_from(PAYLOAD_PARTS), st.text(st.characters(
    blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)), min_size=1, max_size=6).map("".join)
URI_TEXT = TEXT.map(lambda t: "".join(c for c in t if ord(c) >= 32 and ord(c) != 127 and c not in "/."))
SECRET_NAME = st.text(st.sampled_from("abcXYZ019_/+=.@-"), min_size=1, max_size=20)


def plan_with(words, env_value, uri_text, path_text, secret):
    return single_gpu_lora_plan(
        job=JobPlan(command="python train.py " + " ".join(shlex.quote(w) for w in words), method="lora",
                    precision="bf16", env={"MY_VALUE": env_value}, code_uri=f"oss://bucket/{uri_text}.tar.gz",
                    secrets={"MY_SECRET": JobSecretPlan(kms_secret=secret)}),
        storage=StoragePlan(checkpoint="oss", checkpoint_path=f"/mnt/ckpt{path_text}",
                            data_disk=DataDiskPlan(size_gib=200, mount_path=f"/mnt/data{path_text}"),
                            oss=OssPlan(bucket="b", internal_endpoint="oss-cn-shenzhen-internal.aliyuncs.com",
                                        prefix=f"p{path_text}/")))


def sourced(directory, files, expressions):
    for f in files:
        (directory / f.name).write_text(f.content, encoding="utf-8")
    script = (". ./node.env; . ./settings.env; . ./job.env; for v in " + " ".join(expressions) + '; do printf "%s\\0" "$v"; done')
    out = subprocess.run(["bash", "-c", script], cwd=directory, capture_output=True, timeout=30,
                         env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
    assert out.returncode == 0, out.stderr
    return out.stdout.decode("utf-8").split("\0")[:-1]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(TEXT, min_size=1, max_size=4), env_value=TEXT, uri_text=URI_TEXT, path_text=TEXT,
       secret=SECRET_NAME)
def test_every_field_that_reaches_the_node_comes_back_literally_and_runs_nothing(tmp_path_factory, words, env_value,
                                                                                  uri_text, path_text, secret):
    box = tmp_path_factory.mktemp("box")
    marker = box / "marker"
    fmt = lambda t: t.replace("{m}", str(marker))  # noqa: E731
    words, env_value, path_text = [fmt(w) for w in words], fmt(env_value), fmt(path_text)
    plan = plan_with(words, env_value, uri_text, path_text, secret)
    files = render_files(plan, 0)
    got = sourced(box, files, ['"${LAUNCH_ARGV[@]}"', '"$MY_VALUE"', '"${JOB_SECRETS[@]}"', '"$CODE_URI"',
                               '"$CHECKPOINT_DIR"', '"$DATA_DISK_MOUNT"', '"$OSS_CHECKPOINT_URI"'])
    argv_tail = got[:-6][-len(words) - 1:]
    assert argv_tail == ["train.py", *words]
    assert got[-6:] == [env_value, f"MY_SECRET={secret}", f"oss://bucket/{uri_text}.tar.gz", f"/mnt/ckpt{path_text}",
                        f"/mnt/data{path_text}", f"oss://b/p{path_text}/"]
    assert not marker.exists()
    doc = yaml.safe_load(render_user_data(plan, 0))  # and the cloud-config and the channel carry the same bytes
    plain = {e["path"]: e["content"] for e in doc["write_files"] if "encoding" not in e}
    assert plain["/etc/trainstack/node.env"] == next(f.content for f in files if f.name == "node.env")
    channel = json.loads(render_job_settings(plan).document)
    assert channel["ranks"][0]["job.env"] == next(f.content for f in files if f.name == "job.env")


@pytest.mark.parametrize("field", ["command", "env"])
def test_text_no_shell_can_carry_is_refused_not_mangled(field):
    job = {"command": "python train.py 'a\0b'"} if field == "command" else {"env": {"X": "a\0b"}}
    plan = single_gpu_lora_plan(job=JobPlan(**{"command": "python train.py", **job}, method="lora", precision="bf16"))
    with pytest.raises((LaunchError, ValueError)) as err:
        render_files(plan, 0)
    assert "NUL" in str(getattr(err.value, "lines", lambda: [str(err.value)])())
