"""Shared test setup: the project root is importable (``trainstack``, ``components``, ``policies``)."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import os  # noqa: E402

# A calibration overlay a developer recorded locally (stacks/calibration.json) must not change what
# the tests see; tests that use one set TRAINSTACK_CALIBRATION themselves.
os.environ["TRAINSTACK_CALIBRATION"] = "off"
