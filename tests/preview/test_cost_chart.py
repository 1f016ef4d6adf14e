"""The cost-against-hours chart (Mermaid xychart-beta) in the markdown plan and `resolve --format markdown`.

No Mermaid parser runs here (mermaid-cli needs a browser); :func:`parse` is a strict reading of the
rules of mermaid's own grammar the chart relies on (mermaid-js/mermaid@df032c9,
packages/mermaid/src/diagrams/xychart/parser/xychart.jison): statement shapes, quoted strings
``"[^"]*"`` with no escape, no leading backtick (a markdown string), no ``%%`` (a comment), numbers as
NUMBER_WITH_DECIMAL, and every bar series as long as the x-axis band. The same outputs were parsed by
that grammar through jison during development (docs/commands.md, "Cost against hours")."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainstack.cli import main
from trainstack.preview.cost_chart import CHOSEN_MARK, MAX_POINTS, cost_chart, frontier, label

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"[+-]?(?:\d+(?:\.\d+)?|\.\d+)"
STRING = r'"([^"`%\n][^"\n]*|)"'


def parse(block: str) -> dict:
    """The chart's statements, checked against the grammar rules (AssertionError when one is broken)."""
    lines = block.splitlines()
    assert lines[0] == "xychart-beta", lines[0]
    out: dict = {"bars": []}
    for line in lines[1:]:
        assert "%%" not in line and "\t" not in line, line
        if m := re.fullmatch(rf"    title {STRING}", line):
            out["title"] = m.group(1)
        elif m := re.fullmatch(rf'    x-axis {STRING} \[((?:{STRING}, )*{STRING})\]', line):
            out["band"] = re.findall(r'"([^"]*)"', m.group(2))
            assert all(not s.startswith("`") and "%%" not in s for s in out["band"])
        elif m := re.fullmatch(rf"    y-axis {STRING} ({NUMBER}) --> ({NUMBER})", line):
            out["y"] = (float(m.group(2)), float(m.group(3)))
        elif m := re.fullmatch(rf"    bar \[((?:{NUMBER}, )*{NUMBER})\]", line):
            out["bars"].append([float(x) for x in m.group(1).split(", ")])
        else:
            raise AssertionError(f"not a statement of the grammar: {line!r}")
    assert out["bars"] and all(len(b) == len(out["band"]) for b in out["bars"])
    assert out["y"][0] <= min(min(b) for b in out["bars"]) and max(out["bars"][0]) <= out["y"][1]
    return out


def block_of(lines: list[str]) -> str:
    text = "\n".join(lines)
    m = re.search(r"```mermaid\n(.*?)\n```", text, re.S)
    assert m, text
    return m.group(1)


names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)
maybe = st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False), st.just(math.inf))


@st.composite
def candidates(draw) -> list[dict]:
    n = draw(st.integers(1, 40))
    out = []
    for i in range(n):
        out.append({"target": "ecs", "instance_type": draw(st.one_of(st.none(), names)), "nodes": i + 1,
                    "gpus_per_node": draw(st.sampled_from([1, 8])), "gpu_model": draw(names),
                    "spot": draw(st.booleans()), "estimated_hours": draw(maybe), "total_cost_cny": draw(maybe),
                    "feasible": draw(st.booleans()) or i == 0})
    return out


@settings(max_examples=300, deadline=None)
@given(cands=candidates(), pick=st.integers(0, 39))
def test_any_candidates_give_a_chart_of_the_grammar_with_the_chosen_marked(cands, pick):
    chosen = cands[pick % len(cands)] if cands[pick % len(cands)]["feasible"] else cands[0]
    lines = cost_chart(cands, chosen)
    charted = [c for c in cands if c["feasible"] and all(
        isinstance(c[k], float) and math.isfinite(c[k]) for k in ("estimated_hours", "total_cost_cny"))]
    if not charted:
        assert "```mermaid" not in "\n".join(lines)
        return
    chart = parse(block_of(lines))
    assert len(chart["band"]) <= MAX_POINTS
    hours = [float(re.search(r"(\d+\.\d)h$", s).group(1)) for s in chart["band"]]
    assert hours == sorted(hours)  # fastest first
    marked = [i for i, s in enumerate(chart["band"]) if s.startswith(CHOSEN_MARK)]
    chosen_charted = chosen in charted
    assert len(marked) == (1 if chosen_charted else 0)
    if chosen_charted:  # the second series holds only the chosen bar
        (i,) = marked
        assert len(chart["bars"]) == 2 and chart["bars"][1][i] == chart["bars"][0][i]
        assert all(v == 0 for j, v in enumerate(chart["bars"][1]) if j != i)
    left_out = [c for c in cands if c["feasible"] and c not in charted]
    note = "\n".join(lines)
    assert ("Not charted:" in note) == bool(left_out)


def test_a_label_keeps_within_the_string_rules():
    for bad in ('a"b', "`md", "50%% off", "<b>x</b>", "#quot;", "&amp;", "line\nbreak"):
        safe = label(bad)
        assert re.fullmatch(r"[^\"`%\n<>#&]+", safe), safe


def test_the_frontier_keeps_only_candidates_no_other_beats_on_both():
    pts = [{"estimated_hours": h, "total_cost_cny": c} for h, c in [(1, 10), (2, 5), (3, 7), (4, 1), (2, 12)]]
    assert [(p["estimated_hours"], p["total_cost_cny"]) for p in frontier(pts)] == [(1, 10), (2, 5), (4, 1)]


def test_the_markdown_plan_and_resolve_all_carry_the_chart(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["plan", "--stack", "llama3-70b-full", "--format", "markdown"]) == 0
    plan_md = capsys.readouterr().out
    assert "### Cost against hours" in plan_md
    chart = parse(block_of(plan_md.split("### Cost against hours", 1)[1].splitlines()))
    assert sum(s.startswith(CHOSEN_MARK) for s in chart["band"]) == 1
    assert main(["resolve", "stacks/profiles/llama3-70b-full.yaml", "--all", "--format", "markdown"]) == 0
    resolve_md = capsys.readouterr().out
    chart = parse(block_of(resolve_md.splitlines()))
    assert any(s.startswith(f"{CHOSEN_MARK} 3 x ebmgn7ex.32xlarge") for s in chart["band"])
    assert "| * | ecs | ecs.ebmgn7ex.32xlarge |" in resolve_md
    assert main(["resolve", "stacks/profiles/llama3-70b-full.yaml", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["instance_type"] == "ecs.ebmgn7ex.32xlarge"


def test_a_plan_without_tokens_says_why_nothing_is_charted(capsys, monkeypatch, tmp_path):
    import yaml

    monkeypatch.chdir(ROOT)
    doc = yaml.safe_load((ROOT / "stacks/profiles/llama3-8b-lora.yaml").read_text())
    doc["training"].pop("tokens")
    doc["resources"].pop("deadline_hours", None)
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    assert main(["resolve", str(tmp_path / "p.yaml"), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "No chart: no feasible candidate has both hours and a total cost." in out
    assert "(no hours or total cost)" in out
