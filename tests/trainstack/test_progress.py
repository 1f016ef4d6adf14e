"""Progress on stderr (trainstack/progress.py): shown on a terminal, never in a pipe, with --json,
under pytest or with TRAINSTACK_PROGRESS=off; the line is cleared, so a command's output is the same."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest

from trainstack import progress
from trainstack.cli import main

ROOT = Path(__file__).resolve().parents[2]


class Tty(io.StringIO):
    def __init__(self, tty: bool = True):
        super().__init__()
        self.tty = tty
        self.wrote = threading.Event()

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> int:
        self.wrote.set()
        return super().write(s)


@pytest.fixture
def outside_pytest(monkeypatch):
    monkeypatch.setattr(progress, "under_tests", lambda: False)  # pytest sets its variable again per phase
    monkeypatch.delenv("TRAINSTACK_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)


def test_a_terminal_shows_the_step_and_the_line_is_cleared(outside_pytest):
    tty = Tty()
    with progress.step("diff", stream=tty) as p:
        p.update("diff: planning base a.yaml")
    text = tty.getvalue()
    assert "diff: planning base a.yaml" in text and "\r" in text
    assert text.rstrip(" ").endswith("\r")  # cleared: nothing of the meter is left on the line


def test_a_step_without_calls_of_its_own_ticks(outside_pytest):
    tty = Tty()
    with progress.step("resolve big", stream=tty):
        assert tty.wrote.wait(10), "the ticker refreshes a step that makes no calls"
    assert "resolve big" in tty.getvalue()


def test_counted_steps_show_done_of_total(outside_pytest):
    tty = Tty()
    with progress.step("node-files: writing", total=3, stream=tty) as p:
        for _ in range(3):
            p.advance()
    assert "3/3" in tty.getvalue()


@pytest.mark.parametrize("case", ["pipe", "json", "off", "pytest"])
def test_silent_in_a_pipe_with_json_off_or_under_pytest(outside_pytest, monkeypatch, case):
    stream = Tty(tty=case != "pipe")
    if case == "off":
        monkeypatch.setenv("TRAINSTACK_PROGRESS", "off")
    if case == "pytest":
        monkeypatch.undo()  # the real check: this very test runs under pytest
        monkeypatch.setattr(progress, "DELAY_S", 0.0)
    with progress.step("diff", stream=stream, quiet=case == "json") as p:
        assert not p.enabled and p._bar is None
        p.update("diff: planning head")
        p.advance()
    assert stream.getvalue() == ""


def test_the_cli_shows_progress_on_a_terminal_and_none_with_json(outside_pytest, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    profile = "stacks/profiles/llama3-8b-lora.yaml"
    assert main(["resolve", profile]) == 0
    plain = capsys.readouterr().out
    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    assert main(["resolve", profile]) == 0
    assert capsys.readouterr().out == plain  # stdout unchanged
    assert "resolve llama3-8b-lora" in tty.getvalue()
    tty2 = Tty()
    monkeypatch.setattr("sys.stderr", tty2)
    assert main(["resolve", profile, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["instance_type"] and tty2.getvalue() == ""
