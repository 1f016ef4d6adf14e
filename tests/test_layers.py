"""The layering of docs/DESIGN.md holds: pure core <- cloud adapters <- components <- preview and CLI.

import-linter checks the contracts in pyproject.toml over every import (function-level ones too);
grimp (its graph library) finds import circles; and every module of the package must belong to a
layer, so a new module cannot slip past the contracts.
"""

from __future__ import annotations

import pathlib
import sys
import tomllib

import grimp
import pytest
from importlinter import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
#: the outer layers of the trainstack package (the core is the first contract's source list)
OUTER = {"trainstack.cloud", "trainstack.refresh", "trainstack.preview", "trainstack.commands", "trainstack.cli",
         "trainstack.__main__", "trainstack.status"}


@pytest.fixture(scope="module")
def graph():
    sys.path.insert(0, str(ROOT))
    return grimp.build_graph("trainstack", "components", "policies", include_external_packages=True,
                             exclude_type_checking_imports=True)  # annotations create no runtime circle


def test_the_layer_contracts_hold():
    assert cli.lint_imports(config_filename=str(ROOT / "pyproject.toml")) == 0


def test_every_module_of_the_package_is_in_a_layer(graph):
    core = set(CONTRACTS[0]["source_modules"])
    tops = {".".join(m.split(".")[:2]) for m in graph.modules if m.startswith("trainstack.")}
    assert tops - core - OUTER == set(), "new modules must be listed in a layer (pyproject.toml)"
    assert core & OUTER == set()


def _circles(graph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), among the project's modules."""
    mine = sorted(m for m in graph.modules if m.split(".")[0] in ("trainstack", "components", "policies"))
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v)):
            if w.split(".")[0] not in ("trainstack", "components", "policies"):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for m in mine:
        if m not in index:
            visit(m)
    return out


def test_no_import_circles(graph):
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    g = grimp.ImportGraph()
    for m in ("trainstack.a", "trainstack.b", "trainstack.c"):
        g.add_module(m)
    g.add_import(importer="trainstack.a", imported="trainstack.b")
    g.add_import(importer="trainstack.b", imported="trainstack.a")
    g.add_import(importer="trainstack.c", imported="trainstack.a")
    assert _circles(g) == [["trainstack.a", "trainstack.b"]]
