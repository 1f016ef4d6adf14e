"""`trainstack up --stack NAME` on the command line: exit codes, what it prints, --json (the Pulumi stack,
ECS and OSS are the fakes of tests/commands/fake_cloud.py)."""

from __future__ import annotations

import json

import pytest

from fake_cloud import FakeStack, FakeWitness, stock_table
from test_up_failover import A10, E, EVERYWHERE, F, base_config
from trainstack import cli
from trainstack.commands import up as up_cmd, up_automation


@pytest.fixture
def cloud(monkeypatch):
    """Install a fake stack (``cloud(stack)``) in place of the Automation API, ECS stock and OSS reads."""
    made: dict = {}

    def install(stack: FakeStack, witness: FakeWitness = None):
        made["stack"] = stack
        monkeypatch.setattr(up_automation, "AutomationDeployer", lambda *a, **kw: stack)
        monkeypatch.setattr(up_cmd, "_stock", lambda plan: stack.stock)
        monkeypatch.setattr(up_cmd, "CloudWitness", lambda region: witness or FakeWitness())
        return stack

    return install


def test_deploys_the_next_zone_and_says_what_it_recorded(cloud, capsys):
    stack = cloud(FakeStack(base_config(), stock_table(EVERYWHERE), run_fails={(A10, E)}))
    assert cli.main(["up", "--stack", "llama3-8b-lora", "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"row 1 {A10} in {E}: no-capacity: Instance llama3-8b-lora-cluster-node-0: OperationDenied.NoStock" in out
    assert f"deployed llama3-8b-lora: {A10} in {F}" in out
    assert f"trainstack:zone={F}" in out and "stacks/Pulumi.llama3-8b-lora.yaml" in out
    assert stack.cfg["trainstack:zone"] == F


def test_json_prints_the_attempts_on_stdout_and_the_progress_on_stderr(cloud, capsys):
    cloud(FakeStack(base_config(), stock_table({A10: {E: "WithoutStock", F: "WithStock"}})))
    assert cli.main(["up", "--stack", "llama3-8b-lora", "--yes", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert [(a["zone"], a["outcome"]) for a in report["attempts"]] == [(E, "no-stock"), (F, "deployed")]
    assert report["deployed"]["zone"] == F and "no-stock" in captured.err


def test_nothing_in_stock_is_exit_3_with_the_attempts_in_json(cloud, capsys):
    cloud(FakeStack(base_config(), stock_table({})))
    assert cli.main(["up", "--stack", "llama3-8b-lora", "--yes", "--json"]) == 3
    data = json.loads(capsys.readouterr().out)
    assert data["exit_code"] == 3 and data["up"]["attempts"] and data["suggestions"]


def test_without_a_terminal_it_needs_yes(cloud, capsys, monkeypatch):
    stack = cloud(FakeStack(base_config(), stock_table(EVERYWHERE)))
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert cli.main(["up", "--stack", "llama3-8b-lora"]) == 2
    assert "pass --yes" in capsys.readouterr().err and stack.calls == []


@pytest.mark.parametrize("argv,needle", [(["up", "--stack", "no-such-stack", "--yes"], "no-such-stack"),
                                         (["up", "--stack", "llama3-8b-lora", "--yes", "--max-attempts", "0"],
                                          "--max-attempts"),
                                         (["up", "--stack", "llama3-8b-lora", "--yes", "--policy-config", "nope.json"],
                                          "nope.json: no such file")])
def test_bad_input_is_exit_2(cloud, capsys, argv, needle):
    cloud(FakeStack(base_config(), stock_table(EVERYWHERE)))
    assert cli.main(argv) == 2
    assert needle in capsys.readouterr().err


def test_up_is_listed_in_the_cli():
    assert "up" in cli.COMMANDS
