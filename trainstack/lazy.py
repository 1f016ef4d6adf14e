"""One way to import a slow third-party module late: Pulumi, pulumi-alicloud, pulumi-policy and the
Alibaba Cloud SDKs.

Every ``trainstack`` run imports all the command modules to build its parser, and most commands
need neither Pulumi nor an SDK; importing them costs 1-4 s each (``python -X importtime``). So a
module that needs one binds a :class:`LazyModule` at module level and uses its attributes in the
functions that need it: the import happens at the first attribute read, once, and the module's
imports stay in one place at its top, where readers and import-linter see them.

The idea is SkyPilot's ``LazyImport`` (github.com/skypilot-org/skypilot, sky/adaptors/common.py at
commit 076ef01ce93f10fe7359d5d4c1469a4be9ecfa2f): a proxy holding the module name, importing it with
``importlib.import_module`` at the first attribute read and caching it, and an optional message for
a missing package. Unlike it, an attribute the module lacks is looked up as a real submodule and
otherwise raises AttributeError (never a proxy for a name that does not exist), and a missing
package raises ImportError at that first read, where the caller's own error handling already is.
Stdlib only: the core may import this module.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any, Optional

__all__ = ["LazyModule"]


class LazyModule:
    """A module imported at its first attribute read (``pulumi = LazyModule("pulumi")``)."""

    __slots__ = ("_name", "_missing", "_module", "_lock")

    def __init__(self, name: str, missing: Optional[str] = None) -> None:
        """``missing``: what to tell the user when the package is not installed (the ImportError's
        message; the original error is its cause)."""
        self._name = name
        self._missing = missing
        self._module: Optional[ModuleType] = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    @property
    def loaded(self) -> bool:
        """Whether this proxy has imported its module yet."""
        return self._module is not None

    def load(self) -> ModuleType:
        """The module, imported now if it was not yet."""
        module = self._module
        if module is None:
            with self._lock:  # importlib locks per module too; this keeps the cache write single
                if self._module is None:
                    try:
                        self._module = importlib.import_module(self._name)
                    except ImportError as exc:
                        if self._missing is None:
                            raise
                        raise ImportError(self._missing, name=self._name) from exc
                module = self._module
        return module

    def __getattr__(self, attr: str) -> Any:
        if attr in LazyModule.__slots__ or (attr.startswith("__") and attr.endswith("__")):
            raise AttributeError(attr)  # copy, pickle and inspect probe these: never import for them
        module = self.load()
        try:
            return getattr(module, attr)
        except AttributeError:
            pass
        try:  # a submodule its package does not import itself (pulumi.runtime.mocks, say)
            return importlib.import_module(f"{self._name}.{attr}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{self._name}.{attr}":
                raise  # the submodule exists and fails to import: that error, not a missing name
        raise AttributeError(f"module {self._name!r} has no attribute {attr!r}")

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r} ({'loaded' if self.loaded else 'not loaded'})>"
