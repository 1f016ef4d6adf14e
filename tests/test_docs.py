"""The README stays one page and the docs stay true to the code.

The README is the first page (at most 250 lines: pitch, the two set-up commands, the command
table, exit codes, one worked example, links); reference material lives in docs/, which
docs/README.md indexes. Links, anchors and the paths the pages name must resolve; the profile
reference must name every field and preset the code accepts; and the outputs the pages show (the
worked example's plan, the status and calibrate examples) must be what the code prints. After an
intended change to those outputs, regenerate them with
``UPDATE_GOLDEN=1 .venv/bin/python -m pytest -n 0 tests/test_docs.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from plan_factory import profile_for, resolved

from trainstack import cli
from trainstack import errors
from trainstack.models import presets
from trainstack.status import InstanceObservation, build_view, parse_heartbeat, prediction_for
from trainstack.status.render import render_text

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
TODAY = "2026-01-15"  # pins the prices' age in the documented plan (as the preview goldens do)

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def prose_lines(md: str) -> list[str]:
    """The lines outside fenced code blocks and HTML comments."""
    out, fenced, comment = [], False, False
    for line in md.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        if comment or line.lstrip().startswith("<!--"):
            comment = "-->" not in line
            continue
        out.append(line)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation out, spaces to hyphens."""
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    h = h.replace("`", "").replace("*", "").lower()
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def anchors(md: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose_lines(md):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(md: str) -> list[str]:
    found = []
    for line in prose_lines(md):
        found += LINK.findall(CODE_SPAN.sub("", line))
    return found


def section(md: str, heading: str) -> str:
    """The text under a level-2 heading, up to the next one."""
    start = md.index(f"\n## {heading}")
    end = md.find("\n## ", start + 1)
    return md[start:end if end > 0 else None]


def between(md: str, name: str) -> str:
    start, end = f"<!-- {name}:start -->\n", f"<!-- {name}:end -->"
    return md.split(start, 1)[1].split(end, 1)[0]


def replace_between(path: Path, name: str, body: str) -> None:
    md = text(path)
    start, end = f"<!-- {name}:start -->\n", f"<!-- {name}:end -->"
    head, rest = md.split(start, 1)
    path.write_text(head + start + body + end + rest.split(end, 1)[1], encoding="utf-8")


# ---- the README is one page -------------------------------------------------------------------

def test_the_readme_is_one_page():
    assert len(text(README).splitlines()) <= 250


def test_the_first_thing_after_the_pitch_is_make_plan_and_make_test():
    md = text(README)
    first_block = md.split("```", 2)[1]
    commands = [ln.split("#")[0].strip() for ln in first_block.splitlines()[1:] if ln.strip()]
    assert commands == ["make plan", "make test"]
    assert md.index("```") < md.index("\n## Commands")


def _commands() -> list[str]:
    """Every command the CLI has, read from its own parser (catalog's actions included)."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    names = []
    for name, command in sub.choices.items():
        names.append(name)
        for action in command._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                names += [f"{name} {a}" for a in action.choices if a != "show"]  # show = the default
    return names


def table_commands(md: str) -> list[str]:
    """The command each ``| `trainstack ...` |`` row names: its words before the first argument."""
    names = []
    for row in md.splitlines():
        if row.startswith("| `trainstack "):
            words = row.split("`")[1].split()[1:]
            names.append(" ".join(w for w in words[:2] if re.fullmatch(r"[a-z][a-z-]*", w)) if len(words) > 1
                         and re.fullmatch(r"[a-z][a-z-]*", words[1]) else words[0])
    return names


@pytest.mark.parametrize("page", [README, DOCS / "commands.md"], ids=lambda p: p.name)
def test_the_command_tables_list_every_cli_command_once(page):
    assert sorted(table_commands(text(page))) == sorted(_commands())


def test_the_readme_states_every_exit_code():
    codes = section(text(README), "Exit codes")
    meaning = {errors.EXIT_OK: "ok", errors.EXIT_BAD_INPUT: "bad input", errors.EXIT_INFEASIBLE: "infeasible",
               errors.EXIT_POLICY: "mandatory policy", errors.EXIT_CLOUD_API: "cloud API or credentials"}
    for code, words in meaning.items():
        assert re.search(rf"\*\*{code}\*\* (a )?{words}", codes), (code, words)


# ---- links, anchors, the index, the paths the pages name ------------------------------------

@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    md = text(page)
    for target in links(md):
        if re.match(r"^[a-z]+:", target):  # https:, mailto: - not checked offline
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: {target}: no such file"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(text(dest)), f"{page.name}: {target}: no such heading"


def test_the_docs_index_lists_every_page():
    index = text(DOCS / "README.md")
    listed = {Path(t.partition("#")[0]).name for t in links(index)}
    missing = [p.name for p in PAGES if p.name != "README.md" and p.name not in listed]
    assert missing == []


def test_the_readme_links_the_docs_index():
    assert "(docs/README.md)" in text(README)


#: paths the pages name that are not files of this checkout, by design
ELSEWHERE = {"stacks/calibration.json",  # written by `trainstack calibrate`
             "trainstack/catalog/data/overlays",  # written by `trainstack catalog refresh`
             "policies/venv",  # made by Pulumi when it runs the pack
             "policies/config.json",  # the team's policy config, when a repository has one
             "tests/test_optimizer_dryruns.py"}  # SkyPilot's, a style anchor in DESIGN.md
REPO_PATH = re.compile(r"^(?:trainstack|components|policies|tests|benchmarks|tools|stacks|docs|\.github)/[\w./-]+$")


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_paths_a_page_names_exist(page):
    missing = []
    for span in CODE_SPAN.findall(text(page)):
        path = span.split(":")[0].rstrip("/.")  # `file.py:123` names a line of the file
        placeholder = any(re.fullmatch(r"[A-Z]+", part) and part != "README" for part in re.split(r"[/.]", path))
        if REPO_PATH.match(path) and not placeholder and not re.search(r"<|\*|\.\.\.", path) \
                and path not in ELSEWHERE:
            if not (ROOT / path).exists():
                missing.append(span)
    assert missing == []


PY_FILES = {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py") if ".venv" not in p.parts}


def _module_exists(span: str) -> bool:
    """`engine.py`, `placement/engine.py` or `trainstack.cloud.ecs`: a file or module of this checkout."""
    if span.endswith(".py"):
        return any(f == span or f.endswith("/" + span) for f in PY_FILES)
    parts = span.split(".")
    return any((ROOT / Path(*parts[:n])).with_suffix(".py").exists() or (ROOT / Path(*parts[:n]) / "__init__.py").exists()
               for n in range(len(parts), 0, -1) if n >= 2 or len(parts) == 1)


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_modules_a_page_names_exist(page):
    dotted = [s for s in CODE_SPAN.findall(text(page)) if re.fullmatch(r"(trainstack|components|policies)(\.\w+)+", s)]
    assert [s for s in dotted if not _module_exists(s)] == []


def test_the_files_the_design_names_exist():
    """Module names in DESIGN.md (`engine.py`, `placement/engine.py`), other projects' style anchors aside."""
    design = text(DOCS / "DESIGN.md").split("\n## Style anchors", 1)[0]
    named = [s for s in CODE_SPAN.findall(design) if re.fullmatch(r"[\w/]+\.py", s)]
    assert len(named) > 50 and [s for s in named if not _module_exists(s)] == []


def test_the_design_places_every_module():
    """Every package and module of trainstack/, components/ and policies/ appears in DESIGN.md."""
    md = text(DOCS / "DESIGN.md")
    design = " ".join(CODE_SPAN.findall(md) + re.findall(r"```.*?```", md, flags=re.S))  # code, not prose
    modules = [p for d in ("trainstack", "components", "policies") for p in (ROOT / d).iterdir()
               if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()]
    names = {p.stem if p.suffix == ".py" else p.name for p in modules} - {"__main__"}
    assert sorted(n for n in names if not re.search(rf"\b{re.escape(n)}\b", design)) == []


# ---- the profile reference covers what the code accepts ---------------------------------------

def _schema_fields() -> set[str]:
    schema = json.loads(text(ROOT / "profile.schema.json"))
    fields = set(schema["properties"])
    for definition in schema.get("$defs", {}).values():
        fields |= set(definition.get("properties", {}))
    return fields


def test_the_profile_reference_names_every_field():
    page = text(DOCS / "profile.md")
    missing = sorted(f for f in _schema_fields() if not re.search(rf"\b{re.escape(f)}\b", page))
    assert missing == []


def test_the_profile_reference_lists_every_preset():
    page = text(DOCS / "profile.md")
    canonical = {p.name for p in presets().values()}
    assert sorted(n for n in canonical if f"`{n}`" not in page) == []


# ---- the README's worked example is what the code prints ---------------------------------------

def test_the_worked_example_profile_is_the_sample_profile():
    block = between(text(README), "worked-example-profile").strip("`\n").split("\n", 1)[1]
    sample = [ln.split("#")[0].rstrip() for ln in text(ROOT / "stacks/profiles/llama3-8b-lora.yaml").splitlines()]
    sample = [ln for ln in sample if ln.strip()]
    shown = [ln for ln in block.splitlines() if ln.strip()]
    at = 0
    for line in shown:  # trimmed, not changed: every shown line is the sample's, in its order
        assert line in sample[at:], line
        at = sample.index(line, at) + 1


def plan_excerpt(out: str) -> str:
    """The blocks of `plan` text the README shows: the headline, summary, verdicts, topology."""
    keep = ("trainstack plan:", "Summary", "Policies:", "Topology")
    blocks = [b for b in out.strip("\n").split("\n\n") if b.startswith(keep)]
    return "\n\n".join(blocks) + "\n"


def test_the_worked_example_plan_is_what_make_plan_prints(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRAINSTACK_TODAY", TODAY)
    assert cli.main(["plan", "--stack", "llama3-8b-lora"]) == 0
    out = capsys.readouterr().out
    body = f"```text\n{plan_excerpt(out)}```\n"
    if UPDATE:
        replace_between(README, "worked-example-plan", body)
    assert between(text(README), "worked-example-plan") == body
    said = text(README).split("What it says:", 1)[1].split("\n\n", 1)[0]
    for number in re.findall(r"\d+\.\d+", said):
        assert number in out, number


def test_the_cost_page_shows_the_70b_samples_cost_table(capsys, monkeypatch):
    """docs/cost.md's table is what `plan --format markdown` prints for the 70B sample (issue 31)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRAINSTACK_TODAY", TODAY)
    assert cli.main(["plan", "--stack", "llama3-70b-full", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    table = out.split("### Cost (CNY)\n\n", 1)[1].split("\n\n<details>", 1)[0].split("\n\n### ", 1)[0]
    body = table.rstrip("\n") + "\n"
    assert body.startswith("| Resource | Size | Hourly | Run | Monthly |") and "**total (all-in)**" in body
    if UPDATE:
        replace_between(DOCS / "cost.md", "cost-70b", body)
    assert between(text(DOCS / "cost.md"), "cost-70b") == body


# ---- the status and calibrate examples are what the code prints -------------------------------

HEARTBEATS = ROOT / "tests" / "data" / "heartbeats"
NOW = 1_750_000_000.0 + 30  # 30 s after the recorded runs' last beat (tests/status/test_view.py)
INSTANCE_ID = "i-wz9f3kq2m1x8c7"


def console_blocks(md: str, command: str) -> list[str]:
    """The output under each ``$ COMMAND ...`` line of the page's console blocks."""
    found = []
    for block in re.findall(r"```console\n(.*?)```", md, flags=re.S):
        first, _, rest = block.partition("\n")
        if first.startswith(f"$ {command}"):
            found.append(rest)
    return found


def status_text(stack: str, heartbeat: str, **instance) -> str:
    profile, plan = profile_for(stack), resolved(stack)
    beat = parse_heartbeat((HEARTBEATS / heartbeat).read_bytes(), heartbeat)
    node = InstanceObservation(instance_id=INSTANCE_ID, name=plan.node_names()[0], node_rank=0, spot=plan.spot,
                               instance_type=plan.instance_type, started_at=NOW - 7200,
                               **{"status": "Running", **instance})
    view = build_view(profile, plan, prediction_for(profile, plan), heartbeats=[beat], instances=[node], now=NOW)
    return render_text(view)


def check_console(page: Path, command: str, out: str) -> None:
    md = text(page)
    (shown,) = console_blocks(md, command)
    if UPDATE:
        page.write_text(md.replace(shown, out), encoding="utf-8")
        shown = out
    assert shown == out


@pytest.mark.parametrize("stack, heartbeat, instance", [
    ("llama3-8b-lora", "llama3-8b-lora-node-0.json", {}),
    ("qwen-7b-spot", "qwen-7b-spot-stopped.json", {"status": "Stopped", "stopped_mode": "StopCharging"}),
])
def test_the_status_examples_are_what_status_prints(stack, heartbeat, instance):
    out = status_text(stack, heartbeat, **instance)
    check_console(DOCS / "status.md", f"trainstack status --stack {stack}", out if out.endswith("\n") else out + "\n")


def test_the_calibrate_example_is_what_calibrate_prints(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    overlay = tmp_path / "calibration.json"
    monkeypatch.setenv("TRAINSTACK_CALIBRATION", str(overlay))
    assert cli.main(["calibrate", "--stack", "llama3-8b-lora",
                     "--heartbeat", str(HEARTBEATS / "llama3-8b-lora-node-0.json")]) == 0
    out = capsys.readouterr().out.replace(str(overlay), "stacks/calibration.json")
    check_console(DOCS / "status.md", "trainstack calibrate --stack llama3-8b-lora", out)
