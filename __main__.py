"""Pulumi entry point: stack config -> profile -> Plan -> TrainingStack -> exports.

All the work is in components/program.py (importable and tested); this file only turns a user
mistake into a clean Pulumi error instead of a traceback.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pulumi  # noqa: E402

from components.program import run_program  # noqa: E402
from trainstack.errors import TrainstackError  # noqa: E402

try:
    run_program()
except TrainstackError as err:
    lines = err.lines()
    if err.problems:
        lines.insert(0, err.message)
    raise pulumi.RunError("\n".join(lines)) from None
