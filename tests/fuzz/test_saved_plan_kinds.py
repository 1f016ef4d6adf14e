"""Every part of a saved plan with a value of another JSON kind: `diff` refuses it or renders, never crashes.

The random mutations of ``test_fuzz_inputs`` found a crash twice in parts nobody had listed (the
fallback order's rows, a billed line's unpriced reason). This sweep takes the class instead of samples:
each distinct location of three real plans (an on-demand node, a self-healing spot pool, a DLC job;
list positions folded to their first), its value swapped for a scalar and for a container of another kind (a number also for an integer
no float holds).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path

import pytest

from hang_guard import time_limit
from trainstack.cli import main

ROOT = Path(__file__).resolve().parents[2]
STACKS = ["llama3-8b-lora", "llama3-70b-spot-heal", "qwen-7b-dlc"]


def _locations(doc, prefix=()):
    """One path per location of the document (a list's items share a location: its first stands for all)."""
    seen = set()

    def walk(node, path):
        key = tuple("*" if isinstance(p, int) else p for p in path)
        if path and key in seen:
            return
        if path:
            seen.add(key)
            yield path
        if isinstance(node, dict):
            for k, v in node.items():
                yield from walk(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from walk(v, path + (i,))

    yield from walk(doc, prefix)


def _other_kinds(value) -> list:
    """A scalar and a container of other JSON kinds than ``value`` (a renderer formats the one, indexes the other)."""
    scalar = 7 if isinstance(value, str) else " "
    container = {"a": 1} if isinstance(value, list) else [1]
    huge = [10**400] if isinstance(value, (int, float)) and not isinstance(value, bool) else []  # beyond a float
    return [scalar, container, *huge]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("kinds")
    docs = {}
    with contextlib.chdir(ROOT):
        for stack in STACKS:
            out = d / f"{stack}.json"
            assert main(["plan", "--stack", stack, "--format", "json", "--out", str(out)]) == 0
            docs[stack] = out
    return docs


def _diff(base: Path, head: Path, fmt: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_limit(), contextlib.chdir(ROOT):
        code = main(["diff", str(base), str(head), "--format", fmt])
    return code, err.getvalue()


@pytest.mark.parametrize("stack", STACKS)
def test_every_location_with_a_value_of_another_kind(saved, tmp_path, stack):
    base_path = saved[stack]
    base = json.loads(base_path.read_text())
    head = tmp_path / "head.json"
    crashes, counted = [], 0
    for path in _locations(base):
        doc = copy.deepcopy(base)
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        for value in _other_kinds(parent[path[-1]]):
            parent[path[-1]] = value
            head.write_text(json.dumps(doc))
            counted += 1
            try:  # markdown: the JSON format prints the same diff document, unformatted
                code, err = _diff(base_path, head, "markdown")
            except Exception as e:  # noqa: BLE001 - the finding is the crash itself
                crashes.append((path, value, repr(e)[:160]))
                continue
            if code not in {0, 2, 4} or "Traceback" in err:
                crashes.append((path, value, f"exit {code}"))
    assert counted > 500  # the three plans hold several hundred locations each
    assert not crashes, crashes[:10]
