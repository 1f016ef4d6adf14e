"""Shared test setup: the project root is importable (``trainstack``, ``components``, ``policies``)."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
