"""The layering of docs/DESIGN.md holds, and the import graph has no circle.

import-linter checks the contracts in pyproject.toml over every import (function-level and
TYPE_CHECKING ones too): one ``layers`` contract orders the packages top to bottom, and three
``forbidden`` ones keep Pulumi and the cloud SDKs out of the layers that need none. Every top-level
module of trainstack must be named in the layers contract, so a new one cannot slip past it. The
circle test reads the same graph, with two things a plain import graph leaves out: imports made only
for type checkers, and the package ``__init__`` files an import runs.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys
import tomllib

import grimp
import pytest
from importlinter import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
PROJECT = ("trainstack", "components", "policies")


def _layers() -> list[list[str]]:
    """The layers contract's layers, top first, each as its sibling modules."""
    (contract,) = [c for c in CONTRACTS if c["type"] == "layers"]
    return [[m.strip() for m in layer.replace(":", "|").split("|")] for layer in contract["layers"]]


@pytest.fixture(scope="module")
def graph():
    sys.path.insert(0, str(ROOT))
    # no cache: a cached graph can miss a file that was just moved
    return grimp.build_graph(*PROJECT, include_external_packages=True, exclude_type_checking_imports=False,
                             cache_dir=None)


def test_the_layer_contracts_hold():
    assert cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0


def test_every_top_level_module_is_in_exactly_one_layer(graph):
    named = [m for layer in _layers() for m in layer]
    assert len(named) == len(set(named)), "a module is named in two layers"
    tops = {".".join(m.split(".")[:2]) for m in graph.modules if m.startswith("trainstack.")}
    assert tops - set(named) == set(), "new modules must be placed in the layers contract (pyproject.toml)"
    assert {"components", "policies"} <= set(named)
    assert set(named) - tops - {"components", "policies"} == set(), "the layers contract names a module that is gone"


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def run_edges(graph) -> dict[str, set[str]]:
    """What importing each project module runs: what it imports, and each package ``__init__`` above
    an imported module (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first), except
    the packages the importer sits in itself, which are already running when it runs."""
    mine = {m for m in graph.modules if m.split(".")[0] in PROJECT}
    edges: dict[str, set[str]] = {}
    for m in mine:
        own = set(_ancestors(m))
        out: set[str] = set()
        for w in graph.find_modules_directly_imported_by(m):
            if w in mine:
                out.add(w)
                out.update(a for a in _ancestors(w) if a not in own and a != m)
        edges[m] = out - {m}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    group.append(x)
                    if x == v:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return sorted(out)


def loop_through(edges: dict[str, set[str]], group: list[str]) -> list[str]:
    """One loop inside a circle, from its first module back to it (breadth first, so a short one)."""
    inside, start = set(group), group[0]
    seen = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges[v] & inside):
            if w == start:
                return seen[v] + [start]
            if w not in seen:
                seen[w] = seen[v] + [w]
                queue.append(w)
    return group  # pragma: no cover - a strongly connected group always has a loop


def test_no_import_circles_counting_type_checking_imports_and_package_inits(graph):
    edges = run_edges(graph)
    found = circles(edges)
    assert found == [], "import circles (break each by moving the shared piece down a layer):\n" + "\n".join(
        f"  {len(g)} modules: " + " -> ".join(loop_through(edges, g)) for g in found)


def _graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    g = grimp.ImportGraph()
    for a, b in imports:
        g.add_module(a)
        g.add_module(b)
        g.add_import(importer=a, imported=b)
    return g


def test_the_circle_finder_finds_a_circle():
    g = _graph(("trainstack.a", "trainstack.b"), ("trainstack.b", "trainstack.a"), ("trainstack.c", "trainstack.a"))
    assert circles(run_edges(g)) == [["trainstack.a", "trainstack.b"]]


def test_a_circle_through_a_package_init_is_found():
    # x imports q.y, which runs q/__init__, which imports q.z, which imports x
    g = _graph(("trainstack.x", "trainstack.q.y"), ("trainstack.q", "trainstack.q.z"), ("trainstack.q.z", "trainstack.x"))
    edges = run_edges(g)
    assert circles(edges) == [["trainstack.q", "trainstack.q.z", "trainstack.x"]]
    assert loop_through(edges, circles(edges)[0]) == ["trainstack.q", "trainstack.q.z", "trainstack.x", "trainstack.q"]


def test_a_package_init_that_hands_on_its_own_modules_is_no_circle():
    g = _graph(("trainstack.q", "trainstack.q.z"), ("trainstack.q.z", "trainstack.q.w"), ("trainstack.x", "trainstack.q"))
    assert circles(run_edges(g)) == []


def test_a_module_that_imports_its_own_package_init_closes_a_circle():
    g = _graph(("trainstack.q", "trainstack.q.z"), ("trainstack.q.z", "trainstack.q"))
    assert circles(run_edges(g)) == [["trainstack.q", "trainstack.q.z"]]


#: third-party packages that cost seconds to import and that most commands never need
SLOW = ("pulumi", "pulumi_alicloud", "pulumi_policy", "alibabacloud_", "darabonba", "google.protobuf", "grpc")


def test_building_the_command_line_imports_no_pulumi_and_no_sdk():
    """Every run imports all the command modules (to build the parser): they must reach Pulumi and the
    SDKs only through trainstack.lazy or inside the functions that call them."""
    code = ("import sys, trainstack.cli as c; c.build_parser(); "
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith(%r))))" % (SLOW,))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split() == []


def _lazy_bindings(tree: ast.Module) -> dict[str, str]:
    """``{name: module}`` of each ``name = LazyModule("module")`` at module level (or in an if/else)."""
    found = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "LazyModule" and len(node.targets) == 1):
            found[node.targets[0].id] = node.value.args[0].value
    return found


def _type_checking_bindings(tree: ast.Module) -> dict[str, str]:
    """``{name: module}`` that the module's ``if TYPE_CHECKING:`` imports bind."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.Import):
                    found.update({a.asname or a.name: a.name for a in imp.names})
                elif isinstance(imp, ast.ImportFrom):
                    found.update({a.asname or a.name: f"{imp.module}.{a.name}" for a in imp.names})
    return found


def test_every_lazy_module_is_also_a_type_checking_import():
    """A LazyModule names its module in a string, which import-linter cannot see; the same name bound
    by an ``if TYPE_CHECKING:`` import puts the edge in the graph the contracts check (and gives type
    checkers the real module)."""
    unpaired = []
    for path in sorted(p for top in PROJECT for p in (ROOT / top).rglob("*.py")):
        text = path.read_text()
        if "LazyModule(" not in text or path.name == "lazy.py":
            continue
        tree = ast.parse(text)
        checked = _type_checking_bindings(tree)
        unpaired += [f"{path.relative_to(ROOT)}: {name} = LazyModule({module!r})"
                     for name, module in _lazy_bindings(tree).items() if checked.get(name) != module]
    assert unpaired == []


#: modules whose code runs inside Pulumi's dynamic-provider process, pickled by module path: left as
#: they are (their imports happen in that process)
PROVIDER_MODULES = ("components/cpfs_export.py", "components/queue_pairs.py", "components/ess_")


def function_level_imports(path: pathlib.Path) -> list[tuple[int, bool]]:
    """(line, carries a reason) of each import inside a function: a reason is a comment on the import's
    first line or on the line right above the run of imports it belongs to."""
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    found: list[tuple[int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                first = child.lineno
                while first >= 2 and re.match(r"\s+(from \S+ )?import ", lines[first - 2]):
                    first -= 1  # a run of one-line imports shares the comment above it
                found.append((child.lineno, "#" in lines[child.lineno - 1] or lines[first - 2].strip().startswith("#")))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def test_every_import_left_inside_a_function_says_why():
    """Imports live at the top of a module; one left in a function (a module kept out of the CLI's start,
    one only some plans need) says why in a comment, so the graph stays visible."""
    silent = []
    for top in PROJECT:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "templates" in path.parts or rel.startswith(PROVIDER_MODULES):
                continue  # node programs run on the nodes, not in this package
            silent += [f"{rel}:{line}" for line, ok in function_level_imports(path) if not ok]
    assert silent == [], "a function-level import without a reason comment (or move it to the top):\n" + "\n".join(silent)


def test_the_reason_finder_reads_comments_above_a_run_of_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import os\n\n\ndef f():\n    # a reason\n    import json\n    import sys\n\n    import re\n"
                   "    import math  # its own reason\n    return os\n")
    assert function_level_imports(src) == [(6, True), (7, True), (9, False), (10, True)]
