"""LazyModule answers every attribute read exactly as the real module (or its submodule) would,
imports at the first read and only once, and fails the way a plain import fails."""

from __future__ import annotations

import copy
import importlib
import itertools
import sys
import threading
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainstack.lazy import LazyModule

_names = itertools.count()


def _package(root, attrs, imported_subs, other_subs, broken_subs=()):
    """A package on sys.path: ``attrs`` defined in its __init__, ``imported_subs`` imported by it,
    ``other_subs`` only present as files, ``broken_subs`` raising at import. Each module counts
    its imports in ``loads``."""
    name = f"lazy_probe_{next(_names)}_{uuid.uuid4().hex[:8]}"
    pkg = root / name
    pkg.mkdir()
    lines = ["loads = globals().get('loads', 0) + 1"]
    lines += [f"{a} = {a!r}" for a in attrs]
    lines += [f"from . import {s}" for s in imported_subs]
    (pkg / "__init__.py").write_text("\n".join(lines) + "\n")
    for s in (*imported_subs, *other_subs):
        (pkg / f"{s}.py").write_text(f"WHO = {s!r}\n")
    for s in broken_subs:
        (pkg / f"{s}.py").write_text("import lazy_probe_no_such_dependency\n")
    return name


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return tmp_path


def test_nothing_is_imported_until_an_attribute_is_read(root):
    name = _package(root, ["x"], [], [])
    lazy = LazyModule(name)
    assert name not in sys.modules and not lazy.loaded
    assert "not loaded" in repr(lazy)
    assert lazy.x == "x"
    assert lazy.loaded and lazy.load() is sys.modules[name]
    assert lazy.loads == 1


def test_probes_for_special_names_import_nothing(root):
    name = _package(root, ["x"], [], [])
    lazy = LazyModule(name)
    assert not hasattr(lazy, "__wrapped__")
    copy.copy(lazy)
    assert name not in sys.modules


ident = st.sampled_from(["alpha", "beta", "gamma", "delta", "eps", "zeta"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(attrs=st.sets(ident), imported=st.sets(ident), others=st.sets(ident), asked=st.lists(ident, min_size=1, max_size=6))
def test_every_read_answers_as_the_real_module_does(root, attrs, imported, others, asked):
    imported -= attrs
    others -= attrs | imported
    name = _package(root, sorted(attrs), sorted(imported), sorted(others))
    lazy = LazyModule(name)
    for attr in asked:
        real = importlib.import_module(name)
        if hasattr(real, attr):
            expected = getattr(real, attr)
        elif attr in others:
            expected = importlib.import_module(f"{name}.{attr}")
        else:
            with pytest.raises(AttributeError, match=attr):
                getattr(lazy, attr)
            continue
        assert getattr(lazy, attr) is expected
    assert sys.modules[name].loads == 1


def test_a_submodule_that_fails_to_import_raises_its_own_error(root):
    name = _package(root, [], [], [], broken_subs=["bad"])
    with pytest.raises(ModuleNotFoundError, match="lazy_probe_no_such_dependency"):
        LazyModule(name).bad


@pytest.mark.parametrize("missing", [None, "install it: pip install -r requirements.txt"])
def test_a_missing_package_fails_at_the_first_read(missing):
    lazy = LazyModule(f"lazy_probe_absent_{uuid.uuid4().hex}", missing)
    with pytest.raises(ImportError) as caught:
        lazy.anything
    if missing is None:
        assert isinstance(caught.value, ModuleNotFoundError) and caught.value.__cause__ is None
    else:
        assert str(caught.value) == missing and isinstance(caught.value.__cause__, ModuleNotFoundError)
    assert not lazy.loaded


def test_many_threads_import_once(root):
    name = _package(root, ["x"], [], [])
    lazy = LazyModule(name)
    barrier = threading.Barrier(8)
    seen = []

    def read():
        barrier.wait()
        seen.append(lazy.x)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == ["x"] * 8 and lazy.loads == 1
