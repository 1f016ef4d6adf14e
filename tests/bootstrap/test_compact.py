"""Compacted node scripts (comments and docstrings stripped to fit user data) are still valid."""

import ast
import subprocess

import pytest

from trainstack.bootstrap.compact import compact
from trainstack.bootstrap.programs import TEMPLATES

SCRIPTS = sorted(p for p in TEMPLATES.rglob("*") if p.is_file() and (p.suffix == ".py" or p.suffix == ".sh"))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_a_compacted_script_still_parses_and_is_smaller(path):
    text = path.read_text(encoding="utf-8")
    out = compact(path.name, text)
    assert len(out) <= len(text)
    if path.suffix == ".py":
        ast.parse(out)
    elif text.startswith("#!/bin/bash"):
        subprocess.run(["bash", "-n"], input=out, text=True, check=True)
