"""Bounded input: non-regular files refused without reading or blocking, size and depth limits
before parsing, aliases expanded within a budget, only plain YAML types, strict JSON."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from trainstack.errors import InputError
from trainstack.fsutil import parse_json, read_regular_file
from trainstack.profile import load_profile
from trainstack.profile.yamlfile import parse_yaml_text

ROOT = Path(__file__).resolve().parents[2]
BOMB = (ROOT / "tests" / "data" / "attack" / "files" / "p__bl.yaml")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "p.yaml"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(InputError, match="named pipe"):
        load_profile(fifo)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_are_refused_unread(device):
    with pytest.raises(InputError, match="character device"):
        load_profile(device)


def test_a_symlink_to_a_device_is_refused(tmp_path):
    link = tmp_path / "p.yaml"
    link.symlink_to("/dev/zero")
    with pytest.raises(InputError, match="character device"):
        load_profile(link)


def test_too_long_names_loops_and_size_are_clean_errors(tmp_path):
    with pytest.raises(InputError, match="File name too long"):
        load_profile("/tmp/" + "a" * 300 + ".yaml")
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(InputError, match="cannot read"):
        load_profile(tmp_path / "a")
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: 1\n" * 300_000)
    with pytest.raises(InputError, match="too large"):
        load_profile(big)
    with pytest.raises(InputError, match="too large"):
        read_regular_file(big, what="x", limit=10)


def test_a_profile_in_an_unreadable_directory_is_a_clean_error(tmp_path, capsys):
    from trainstack.cli import main

    d = tmp_path / "locked"
    d.mkdir()
    (d / "p.yaml").write_text("name: a\n")
    d.chmod(0)
    root = os.geteuid() == 0
    try:
        if root:  # root reads anything: act as nobody for the permission check
            os.setegid(65534)
            os.seteuid(65534)
        code = main(["validate", str(d / "p.yaml")])
    finally:
        if root:
            os.seteuid(0)
            os.setegid(0)
        d.chmod(0o755)
    err = capsys.readouterr().err
    assert code == 2 and "Permission denied" in err and "Traceback" not in err, err


def test_the_378_byte_alias_bomb_fails_fast():
    start = time.monotonic()
    with pytest.raises(InputError, match="expands to more than"):
        load_profile(BOMB)
    assert BOMB.stat().st_size == 378 and time.monotonic() - start < 2


@pytest.mark.parametrize("text, needle", [
    ("a: &a [*a]\n", "refers to the value that contains it"),
    ("a: " + "[" * 200 + "]" * 200 + "\n", "nested more than"),
    ("? [a, b]\n: c\n", "single value"),
    ("a: {[x]: 1}\n", "single value"),
    ("a: !!binary aGVsbG8=\n", "!!binary"),
    ("a: !!set {x}\n", "!!set"),
    ("a: !!python/object:os.system x\n", "not supported"),
    ('a: "\\ud800"\n', "lone surrogate"),
    ('a: "x\\0y"\n', "NUL"),
    ("\x1b", "control character"),
    ("a: 1\na: 2\n", "duplicate key 'a'"),
])
def test_yaml_outside_the_plain_types_is_refused(text, needle):
    with pytest.raises(InputError, match=needle):
        parse_yaml_text(text, "f.yaml")


def test_unquoted_dates_stay_strings_and_merges_work():
    doc = parse_yaml_text("when: 2025-01-31T18:00:00Z\nday: 2025-01-31\nb: &b {x: 1}\nc: {<<: *b, y: 2}\n", "f")
    assert doc == {"when": "2025-01-31T18:00:00Z", "day": "2025-01-31", "b": {"x": 1}, "c": {"x": 1, "y": 2}}


@pytest.mark.parametrize("text, needle", [
    ('{"a": NaN}', "NaN"), ('{"a": Infinity}', "Infinity"), ('{"a": 1e999}', "out of range"),
    ('{"a": ' + "9" * 400 + "}", "400-digit integer is out of range"),  # every reader may use it as a float
    ('{"a": -' + "9" * 309 + "}", "309-digit integer is out of range"), ('{"a": ' + "9" * 5000 + "}", "f.json"),
    ("[" * 100 + "]" * 100, "nested more than"), ('{"a": ', "not valid JSON at line 1"),
])
def test_json_is_standard_and_shallow(text, needle):
    with pytest.raises(InputError, match=needle):
        parse_json(text, name="f.json", what="saved plan")


def test_the_largest_integers_a_float_holds_still_parse():
    assert parse_json('{"a": ' + "9" * 308 + "}", name="f.json", what="saved plan")["a"] == int("9" * 308)


def test_non_utf8_and_binary_files_are_refused(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_bytes(b"name: \x93x\x94\n")
    with pytest.raises(InputError, match="not UTF-8"):
        load_profile(f)
    f.write_bytes(b"name: a\x00\n")
    with pytest.raises(InputError, match="binary"):
        load_profile(f)
