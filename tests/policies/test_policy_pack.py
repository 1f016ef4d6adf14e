"""The pack starts with every policy at its default level, importable the way Pulumi runs it."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import yaml

from policies.rules import DEFAULT_ENFORCEMENT

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACK = ROOT / "policies"

# PolicyPack(...) would start a gRPC server and block forever: record its arguments instead.
RECORD_PACK = r"""
import json, runpy, sys
import pulumi_policy

calls = []

class RecordingPolicyPack:
    def __init__(self, *args, **kwargs):
        calls.append((args, kwargs))

pulumi_policy.PolicyPack = RecordingPolicyPack
how, target = sys.argv[1], sys.argv[2]
if how == "path":      # what `pulumi preview --policy-pack policies` does (pulumi.policy.__main__)
    runpy.run_path(target, run_name="__main__")
else:                  # python -m policies, from the repository root
    runpy.run_module(target, run_name="__main__", alter_sys=True)
(args, kwargs), = calls
policies = kwargs["policies"]
print(json.dumps({
    "name": kwargs["name"],
    "pack_level": kwargs["enforcement_level"].value,
    "policies": {p.name: p.enforcement_level.value for p in policies},
    "rules_module": [m for m in ("rules", "policies.rules")
                     if m in sys.modules and sys.modules[m].ALL_POLICIES is policies],
    "trainstack_from": sys.modules["trainstack"].__file__,
}))
"""


def _run(how: str, target: str, cwd: pathlib.Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", RECORD_PACK, how, target], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_pack_main_as_pulumi_runs_it_starts_every_policy_at_its_default_level():
    got = _run("path", str(PACK), cwd=PACK)
    assert got["name"] == "trainstack-guardrails"
    assert got["pack_level"] == "mandatory"
    assert got["policies"] == {name: level.value for name, level in DEFAULT_ENFORCEMENT.items()}
    assert got["rules_module"] == ["rules"]  # imported from inside policies/, not as policies.rules
    assert pathlib.Path(got["trainstack_from"]).resolve() == ROOT / "trainstack" / "__init__.py"


def test_pack_main_runs_as_a_module_from_the_repository_root():
    got = _run("module", "policies", cwd=ROOT)
    assert got["rules_module"] == ["policies.rules"]
    assert got["policies"] == {name: level.value for name, level in DEFAULT_ENFORCEMENT.items()}


def test_rules_and_runner_import_from_inside_the_pack_directory():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("import rules, runner; print(len(rules.ALL_POLICIES), runner.ALL_POLICIES is rules.ALL_POLICIES, "
            "'policies' in __import__('sys').modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=PACK, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(len(DEFAULT_ENFORCEMENT)), "True", "False"]


def test_pack_files_declare_python_runtime_and_install_the_project():
    project = yaml.safe_load((PACK / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    assert project["description"]
    lines = [ln.strip() for ln in (PACK / "requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert "-e .." in lines  # pip resolves it against its working directory, policies/
    assert (PACK / ".." / "trainstack" / "catalog").is_dir()
    pin = next(ln for ln in (ROOT / "requirements.txt").read_text().splitlines() if ln.startswith("pulumi-policy=="))
    assert pin in lines


def test_docs_list_every_policy_with_its_default_level_and_how_to_run_the_pack():
    doc = (ROOT / "docs" / "policies.md").read_text()
    assert "pulumi preview --policy-pack policies" in doc
    assert "--policy-pack-config" in doc
    for name, level in DEFAULT_ENFORCEMENT.items():
        assert re.search(rf"`{re.escape(name)}`[^\n]*\b{level.value}\b", doc), name
