"""Files trainstack writes appear whole or not at all, and write errors are input errors."""

import os

import pytest

from trainstack.cli import main
from trainstack.errors import InputError
from trainstack.outputs import atomic_write_text


def test_atomic_write_replaces_whole_file_with_shareable_mode(tmp_path):
    f = tmp_path / "sub" / "plan.json"
    atomic_write_text(f, "one")
    atomic_write_text(f, "two")
    assert f.read_text() == "two" and oct(os.stat(f).st_mode & 0o777) == "0o644"
    assert [p.name for p in f.parent.iterdir()] == ["plan.json"], "no temporary file left behind"


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    f = tmp_path / "plan.json"
    f.write_text("old")

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(InputError, match="No space left"):
        atomic_write_text(f, "new")
    assert f.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["plan.json"]


@pytest.mark.parametrize("make_target", [lambda d: d, lambda d: d / "file.txt" / "x.json"])
def test_out_to_a_directory_or_under_a_file_exits_2(tmp_path, capsys, make_target):
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(InputError):
        atomic_write_text(make_target(tmp_path), "data")
    assert main(["schema", "--out", str(make_target(tmp_path))]) == 2
    assert "Traceback" not in capsys.readouterr().err
