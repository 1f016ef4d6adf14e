"""The CLI's process-level settings: the cyclic collector is paused for one-shot commands and given
back exactly as it was to an in-process caller (tests, a notebook), whatever the command did."""

from __future__ import annotations

import gc

import pytest

from trainstack import cli


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_one_shot_command_runs_without_the_collector_and_gives_it_back(collector_on, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr("trainstack.commands.schema.run", lambda args: seen.append(gc.isenabled()) or 0)
    assert "schema" not in cli.PAUSED_COLLECTOR
    assert cli.main(["schema"]) == 0
    assert seen == [True]  # not paused: the collector is back before the command runs


def test_paused_command_runs_without_the_collector_and_restores_it(collector_on, monkeypatch):
    seen = []
    monkeypatch.setattr("trainstack.commands.plan.run", lambda args: seen.append(gc.isenabled()) or 0)
    assert cli.main(["plan", "x.yaml"]) == 0
    assert seen == [False] and gc.isenabled()


def test_a_failing_command_restores_the_collector(collector_on, tmp_path):
    assert cli.main(["validate", str(tmp_path / "missing.yaml")]) == 2
    assert gc.isenabled()


def test_collector_paused_restores_a_disabled_collector_as_disabled():
    was = gc.isenabled()
    gc.disable()
    try:
        with cli.collector_paused() as resume:
            resume()
            assert not gc.isenabled()  # it was off before: resuming leaves it off
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


def test_collector_paused_freezes_only_when_the_process_ends(collector_on):
    before = gc.get_freeze_count()
    with cli.collector_paused(process_ends=False):
        assert not gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == before
    try:
        with cli.collector_paused(process_ends=True):
            keep = [object() for _ in range(10)]
        assert gc.isenabled() and gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
    del keep
