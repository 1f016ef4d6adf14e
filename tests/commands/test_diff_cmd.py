"""Issue 36 item 2: `diff` names the side that cannot be planned (base or head), its file, the
infeasible reason and its suggestions, in text and JSON; both sides are tried, so both are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainstack.cli import main

ROOT = Path(__file__).resolve().parents[2]
FEASIBLE = "stacks/profiles/llama3-8b-lora.yaml"
INFEASIBLE = "tests/data/pcie_exception/l20-lora.yaml"  # 8 x L20 on PCIe: refused without the exception


@pytest.fixture(autouse=True)
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize("base, head", [(FEASIBLE, INFEASIBLE), (INFEASIBLE, FEASIBLE), (INFEASIBLE, INFEASIBLE)],
                         ids=["head", "base", "both"])
def test_the_json_error_names_each_infeasible_side_with_its_file_reason_and_suggestions(capsys, base, head):
    assert main(["diff", base, head, "--format", "json"]) == 3
    doc = json.loads(capsys.readouterr().out)
    expected = [which for which, arg in (("base", base), ("head", head)) if arg == INFEASIBLE]
    assert [s["side"] for s in doc["sides"]] == expected and doc["side"] == expected[0]
    assert doc["file"] == INFEASIBLE and doc["exit_code"] == 3
    for side in doc["sides"]:
        assert side["file"] == side["label"] == INFEASIBLE
        assert side["reason"].startswith("no feasible placement for l20-lora")
        assert "multi-gpu-without-nvlink" in side["reason_codes"]
        assert any("allowed_types" in s for s in side["suggestions"])
    assert doc["error"].startswith("neither side" if len(expected) == 2 else f"{expected[0]} {INFEASIBLE} cannot")


def test_the_text_error_says_which_side_on_stderr(capsys):
    assert main(["diff", FEASIBLE, INFEASIBLE]) == 3
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    first = err.splitlines()[0]
    assert first == (f"trainstack: head {INFEASIBLE} cannot be planned: no feasible placement for l20-lora in "
                     "cn-shenzhen: 2 candidates have no known price")
    assert "what would make it feasible:" in err and "ebmgn8is" in err


def test_a_stack_side_names_its_stack_file(capsys, tmp_path):
    from trainstack.commands.diff import SideInfeasible
    from trainstack.errors import InfeasibleError

    e = SideInfeasible.side("base", "demo", "stacks/Pulumi.demo.yaml", InfeasibleError("no feasible placement"))
    assert e.message == "base demo (stacks/Pulumi.demo.yaml) cannot be planned: no feasible placement"
    assert e.exit_code == 3 and e.to_dict()["file"] == "stacks/Pulumi.demo.yaml"
