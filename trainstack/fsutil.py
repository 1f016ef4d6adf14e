"""Read the files a user names with bounds: regular files only, size and depth limits, strict JSON.

Every file trainstack reads from the user (profiles, stack files, overlays, saved plans, policy
configs) comes through :func:`read_regular_file`: it refuses FIFOs, devices, sockets and
directories *before* opening them (so ``/dev/zero`` is never read and a FIFO never blocks), opens
with ``O_NONBLOCK`` and re-checks the opened file (a swap between check and open is caught), and
reads at most ``limit`` bytes. :func:`parse_json` is the one JSON reader for what a user hands
trainstack (saved plans, overlays, policy configs, Hugging Face configs, heartbeats, the calibration
overlay): at most ``limit`` bytes, nesting at most ``max_depth`` deep (checked before ``json``
recurses), no NaN/Infinity, no duplicate keys (``json`` would keep the last one silently). Every
failure is an :class:`InputError` naming the file (exit 2).

Writing lives in :mod:`trainstack.outputs`.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Optional, Union

from .errors import InputError, Problem
from .secrets import looks_secret_value

KIB, MIB = 1 << 10, 1 << 20
#: nesting deeper than this is refused before parsing (trainstack's own files stay under 16)
MAX_JSON_DEPTH = 64


def _fail(name: str, msg: str, hint: Optional[str] = None) -> InputError:
    return InputError(f"{name}: {msg}", problems=[Problem(path="", message=msg, file=name)], hint=hint)


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    return ("a directory" if stat.S_ISDIR(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode)
            else "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def read_regular_file(path: Union[str, Path], *, what: str, limit: int, missing_hint: Optional[str] = None) -> bytes:
    """At most ``limit`` bytes of the regular file ``path`` (symlinks followed, then checked)."""
    name = str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise _fail(name, f"{what} file not found", hint=missing_hint) from None
    except NotADirectoryError:
        raise _fail(name, f"{what} file not found (a part of the path is not a directory)") from None
    except (OSError, ValueError) as exc:  # ENAMETOOLONG, ELOOP, EACCES, an embedded NUL
        raise _fail(name, f"cannot read the {what}: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise _fail(name, f"is {file_kind(st.st_mode)}, not a {what} file; trainstack reads only regular files")
    if st.st_size > limit:
        raise _fail(name, f"{st.st_size:,} bytes is too large for a {what} (limit {limit:,})")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _fail(name, f"cannot read the {what}: {exc.strerror or exc}") from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            raise _fail(name, f"changed while it was being opened; it is now {file_kind(opened.st_mode)}")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise _fail(name, f"cannot read the {what}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > limit:
        raise _fail(name, f"grew past {limit:,} bytes while it was read (limit for a {what})")
    return b"".join(chunks)


def decode_text(raw: bytes, name: str, what: str) -> str:
    """UTF-8 text (a leading BOM dropped); binary and other encodings are refused."""
    if b"\x00" in raw:
        raise _fail(name, f"is a binary file, not a {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(name, f"is not UTF-8 text (byte {exc.start}); save the {what} as UTF-8") from None
    return text.removeprefix("\ufeff")


def read_text_file(path: Union[str, Path], *, what: str, limit: int, missing_hint: Optional[str] = None) -> str:
    return decode_text(read_regular_file(path, what=what, limit=limit, missing_hint=missing_hint), str(path), what)


_JSON_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """Bracket nesting of a JSON text, outside strings (regular expressions, then one pass over the
    brackets alone: a 6 MB plan document takes milliseconds, not a character loop's half second)."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _not_finite(token: str) -> Any:
    raise ValueError(f"{token} is not a number standard JSON allows")


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"{token} is out of range for a number")
    return value


def _finite_int(token: str) -> int:
    """An integer every reader can also use as a float (a cost, a size): 1e308 at most."""
    value = int(token)
    try:
        float(value)
    except OverflowError:
        raise ValueError(f"a {len(token.lstrip('-'))}-digit integer is out of range for a number") from None
    return value


class DuplicateKey(ValueError):
    """A JSON object names the same key twice."""

    def __init__(self, key: str):
        shown = repr(key) if len(key) <= 64 and key.isprintable() and not looks_secret_value(key) else "a key"
        super().__init__(f"{'duplicate key ' + shown if shown != 'a key' else 'a key given twice'} (JSON keeps only "
                         "the last one; give each key once)")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def parse_json(text: Union[str, bytes], *, name: str, what: str, max_depth: int = MAX_JSON_DEPTH,
               limit: Optional[int] = None) -> Any:
    """Standard JSON only: at most ``limit`` bytes (when given) and ``max_depth`` deep, no
    NaN/Infinity, no numbers that overflow, no key given twice in one object."""
    if isinstance(text, bytes):
        if limit is not None and len(text) > limit:
            raise _fail(name, f"{len(text):,} bytes is too large for a {what} (limit {limit:,})")
        text = decode_text(text, name, what)
    elif limit is not None and len(text) > limit:  # characters: at least as many bytes
        raise _fail(name, f"{len(text):,} characters is too large for a {what} (limit {limit:,} bytes)")
    if json_depth(text, max_depth) > max_depth:
        raise _fail(name, f"is nested more than {max_depth} levels deep; not a {what}")
    try:
        return json.loads(text, parse_constant=_not_finite, parse_float=_finite_float, parse_int=_finite_int,
                          object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise _fail(name, f"is not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise _fail(name, f"is not a valid {what}: {exc}") from None


def read_json_file(path: Union[str, Path], *, what: str, limit: int, max_depth: int = MAX_JSON_DEPTH) -> Any:
    return parse_json(read_text_file(path, what=what, limit=limit), name=str(path), what=what, max_depth=max_depth)


def json_or_none(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``text`` parsed if it is bounded, standard JSON, else None: for strings inside a document
    that may hold JSON (a RAM policy in a saved plan), which stay plain text when they do not."""
    try:
        return parse_json(text, name="", what="JSON value", max_depth=max_depth)
    except InputError:
        return None
