"""The attack's shell-payload profiles (issue 13; copies of shared/reference/attack/injection/
in injection/): each is either refused with a clear error or renders node files that, sourced
and run in a sandbox, create no marker. Two of them (a newline in a torchrun topology option
that the old launcher pasted into a comment of job.env) did create their marker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from launch_harness import FAST, launch  # noqa: F401  (the launch fixture)

from trainstack.bootstrap import render_files
from trainstack.errors import TrainstackError
from trainstack.plan import StoragePlan
from trainstack.profile import parse_profile
from trainstack.resolver import resolve

PROFILES = sorted((Path(__file__).parent / "injection").glob("*.yaml"))
MARKS = "/tmp/trainstack-marks"
#: refused before anything is rendered, with the field at fault
REFUSED = {"env_override_node.yaml": "job.env", "code_uri_ext.yaml": "code_uri", "code_uri_git_opt.yaml": "code_uri",
           "code_uri_git_ref_opt.yaml": "code_uri", "code_uri_newline.yaml": "code_uri", "env_values.yaml": "NUL",
           "code_uri_oss_traversal.yaml": "'..'", "code_uri_oss_slash.yaml": "'..'", "name_trailing_nl.yaml": "name",
           "code_uri_subst.yaml": "space",
           # the profile's own rules (issue 13 item 9): URIs and tags hold no control characters
           "dataset_uri_nl.yaml": "dataset_uri", "tags_inj.yaml": "control characters",
           # a topology option that contradicts the plan's one node: refused (the old launcher dropped it
           # and pasted it, newline and all, into a comment of job.env)
           "cmd_dropped_newline.yaml": "contradicts", "cmd_dropped_eq_newline.yaml": "contradicts",
           "cmd_dropped_rdzv.yaml": "contradicts"}


def plan_or_refusal(path: Path, marks: Path):
    doc = yaml.safe_load(path.read_text().replace(MARKS, str(marks)))
    try:
        plan = resolve(parse_profile(doc, file=path.name))
        render_files(plan, 0)
        return plan, None
    except TrainstackError as err:
        return None, "\n".join(err.lines())
    except ValueError as err:  # the renderer's word; the Pulumi program reports it as exit 2
        return None, str(err)


def fake_tools(bin_dir: Path) -> None:
    for tool in ("git", "curl"):  # record, never reach a network
        (bin_dir / tool).write_text(f"#!{sys.executable}\nimport sys\nsys.exit(1)\n")
        (bin_dir / tool).chmod(0o755)


@pytest.mark.parametrize("path", PROFILES, ids=[p.name for p in PROFILES])
def test_an_injection_profile_is_refused_or_runs_no_payload(path, tmp_path, launch):  # noqa: F811
    marks = tmp_path / "marks"
    marks.mkdir()
    plan, refusal = plan_or_refusal(path, marks)
    if path.name in REFUSED:
        assert refusal is not None and REFUSED[path.name] in refusal, refusal
        assert "Traceback" not in refusal
        return
    assert refusal is None, refusal
    plan = plan.model_copy(update={"storage": StoragePlan(checkpoint="essd", checkpoint_path=str(tmp_path / "ckpt"),
                                                          oss=plan.storage.oss)})
    node = tmp_path / "sourced"
    node.mkdir()
    for f in render_files(plan, 0):
        (node / f.name).write_text(f.content)
    script = ". ./node.env; . ./settings.env; [ -f nccl.env ] && . ./nccl.env; . ./job.env; printf '%s\\0' \"${LAUNCH_ARGV[@]}\""
    out = subprocess.run(["bash", "-c", script], cwd=node, capture_output=True, text=True, timeout=30,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    fake_tools(tmp_path / "bin")
    launch(plan)  # the real launch script with a stand-in torchrun: fetch code, run, stop billing
    assert sorted(p.name for p in marks.iterdir()) == []


def test_the_old_reproducers_are_refused_on_one_line_each(tmp_path):
    for name, word in (("cmd_dropped_newline.yaml", "--nnodes"), ("cmd_dropped_rdzv.yaml", "--rdzv-endpoint")):
        plan, refusal = plan_or_refusal(Path(__file__).parent / "injection" / name, tmp_path)
        assert plan is None and refusal.startswith(f"job.command: torchrun {word} contradicts the plan")
        assert len(refusal.splitlines()) == 1, "the given value is shown escaped, never as raw lines"
