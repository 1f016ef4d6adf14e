"""Stub commands for tests that run the rendered node scripts in bash: each a tiny script on PATH."""

from __future__ import annotations

from pathlib import Path


def stub_commands(bin_dir: Path, stubs: dict[str, str]) -> Path:
    """``bin_dir`` (made if missing) holding one executable bash script per ``name: body``; returns it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir
