"""One rule book: `validate` and `plan` agree on every profile of a stored corpus.

Whatever `plan` rejects as bad input (exit 2), `validate` rejects with the same problems (field
path and message); a profile `validate` accepts never fails `plan` with exit 2. The corpus: the
sample stacks' profiles, the preview fixtures, the shell-payload profiles of the attack
(tests/bootstrap/injection) and profiles that break one plan-level rule each (tests/data/rule_book).
"""

from __future__ import annotations

import json
import pathlib

import pytest

from trainstack.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = sorted([*ROOT.glob("stacks/profiles/*.yaml"), *ROOT.glob("tests/preview/fixtures/*.yaml"),
                 *ROOT.glob("tests/bootstrap/injection/*.yaml"), *ROOT.glob("tests/data/rule_book/*.yaml")])
PLAN_LEVEL = sorted(ROOT.glob("tests/data/rule_book/*.yaml"))


def _run(capsys, argv: list[str]) -> tuple[int, set[tuple[str, str]]]:
    rc = main(argv)
    out = capsys.readouterr().out
    problems: set[tuple[str, str]] = set()
    if rc == 2:
        doc = json.loads(out)
        problems = {(p["path"], p["message"]) for p in doc.get("problems", [])} or {("", doc["error"])}
    return rc, problems


@pytest.mark.parametrize("profile", CORPUS, ids=lambda p: str(p.relative_to(ROOT)))
def test_validate_and_plan_agree(profile, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    rel = str(profile.relative_to(ROOT))
    rc_validate, validate_problems = _run(capsys, ["validate", rel, "--json"])
    rc_plan, plan_problems = _run(capsys, ["plan", rel, "--format", "json"])
    assert rc_validate in (0, 2) and rc_plan in (0, 2, 3, 4)
    assert (rc_validate == 2) == (rc_plan == 2), (rc_validate, rc_plan, validate_problems, plan_problems)
    assert validate_problems == plan_problems


@pytest.mark.parametrize("profile", PLAN_LEVEL, ids=lambda p: p.name)
def test_plan_level_rules_are_caught_by_validate(profile, capsys):
    rc, problems = _run(capsys, ["validate", str(profile), "--json"])
    assert rc == 2 and problems, "each of these profiles breaks a rule only the resolved plan shows"
