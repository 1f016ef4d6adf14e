"""Write files so a reader never sees half of one: temporary file, fsync, rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Union

from .errors import InputError, Problem


def atomic_write_text(path: Union[str, Path], text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` atomically (same directory, then ``os.replace``).

    ``mkstemp`` creates 0600 files; plans and catalog overlays are meant to be shared and
    committed, so the final file gets ``mode`` (default 0644)."""
    target = Path(path)
    try:
        if target.is_dir():
            raise IsADirectoryError(21, "is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}",
                         problems=[Problem(path="--out", message=f"cannot write: {exc.strerror or exc}",
                                           file=str(path))]) from None
    try:
        os.chmod(tmp, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
