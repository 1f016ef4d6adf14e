"""One way out for everything trainstack writes: ``--out`` files and standard output.

``write_file`` (every ``--out``, ``catalog refresh`` overlays, the CI comment):

* refuses a target that is not a regular file: a directory, FIFO, socket, character or block
  device (``/dev/null``, ``/dev/full``, a copy made with ``mknod``) is never replaced by a file;
* refuses a symlink unless the caller passes ``follow_symlink`` (``--out-follow-symlink``): then
  the link stays and the file it points to is replaced, under the same rules;
* refuses a read-only file (no write bit, or not writable by this user) instead of replacing it
  through the writable directory;
* writes a temporary file in the same directory, ``fsync``\\ s it, renames it over the target and
  ``fsync``\\ s the directory; on any failure (``ENOSPC``, ``EFBIG``, ``EIO``, a full quota) the
  temporary file is removed and the old file is left byte for byte: the error is exit 2.

``guarded_stdout`` wraps standard output for a command: a failed write or flush (``plan > file`` on
a full disk, ``> /dev/full``) becomes an :class:`OutputError` (exit 2) instead of a traceback or a
silent exit 0 with a truncated file. A closed pipe (``| head``) stays a quiet success.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import IO, Iterator, Optional, Union

from .errors import InputError, Problem
from .fsutil import file_kind


class OutputError(InputError):
    """Output could not be written (exit 2); the old file, if any, is unchanged."""

    #: True when standard output itself failed (nothing more can be written there)
    on_stdout = False


def _fail(where: str, msg: str, option: str = "--out", hint: Optional[str] = None) -> OutputError:
    return OutputError(f"cannot write {where}: {msg}", hint=hint,
                       problems=[Problem(path=option, message=f"cannot write: {msg}", file=where)])


def _reason(exc: OSError) -> str:
    text = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"{text} (the old file, if any, is unchanged)"
    return text


def atomic_write_text(path: Union[str, Path], text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` atomically, the new file with ``mode`` (see :func:`write_file`)."""
    write_file(path, text, mode=mode)


def check_target(path: Union[str, Path], follow_symlink: bool = False, option: str = "--out") -> Path:
    """The file to replace for ``path``, or an OutputError saying why it must not be replaced."""
    where = str(path)
    target = Path(path)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return target
    except (OSError, ValueError) as exc:
        raise _fail(where, getattr(exc, "strerror", None) or str(exc), option) from None
    if stat.S_ISLNK(st.st_mode):
        if not follow_symlink:
            raise _fail(where, "is a symbolic link; trainstack does not replace links", option,
                        hint=f"pass {option}-follow-symlink to replace the file it points to, or choose another path")
        resolved = Path(os.path.realpath(target))
        if resolved == target or os.path.islink(resolved):
            raise _fail(where, "is a symbolic link that does not resolve (a loop?)", option)
        if not os.path.lexists(resolved):
            raise _fail(where, "is a symbolic link to a file that does not exist; trainstack replaces an "
                               "existing file through a link, it does not create one", option)
        return check_target(resolved, False, option)
    if not stat.S_ISREG(st.st_mode):
        raise _fail(where, f"is {file_kind(st.st_mode)}; trainstack only replaces regular files", option)
    if not st.st_mode & 0o222 or not os.access(target, os.W_OK):
        raise _fail(where, "is read-only; trainstack does not replace read-only files", option,
                    hint="make it writable (chmod u+w) or choose another path")
    return target


def write_file(path: Union[str, Path], text: str, *, mode: Optional[int] = None, follow_symlink: bool = False,
               option: str = "--out") -> None:
    """Replace ``path`` with ``text`` atomically; see the module docstring for what is refused.

    ``mode``: the new file's permissions (default: the old file's, else 0644; ``mkstemp`` would
    make 0600, but plans and overlays are meant to be shared and committed)."""
    where = str(path)
    target = check_target(path, follow_symlink, option)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except OSError:
            mode = 0o644
    data = text.encode("utf-8")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _fail(where, _reason(exc), option) from None
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _fail(where, _reason(exc), option) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # durability of the rename; not all file systems allow it
        dfd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


class _GuardedStream:
    """A text stream whose write errors are OutputErrors (broken pipes stay BrokenPipeError)."""

    def __init__(self, inner: IO[str], label: str):
        self._inner = inner
        self._label = label

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            err = _fail(self._label, _reason(exc), "stdout",
                        hint="free some space or write elsewhere; the output is incomplete")
            err.on_stdout = True
            raise err from None

    def _fd(self) -> Optional[int]:
        try:
            return self._inner.fileno()
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            return None

    def write(self, s: str) -> int:
        fd = self._fd()
        if fd is None:  # an in-memory stream (tests, redirect_stdout)
            return self._guard(self._inner.write, s)
        # a real file: write through os.write so a short write followed by an error (EFBIG,
        # ENOSPC) is seen; Python's buffered layer can drop the rest of a short write silently
        self._guard(self._inner.flush)
        data = s.encode(getattr(self._inner, "encoding", None) or "utf-8",
                        getattr(self._inner, "errors", None) or "strict")
        view = memoryview(data)
        while view:
            view = view[self._guard(os.write, fd, view):]
        return len(s)

    def flush(self) -> None:
        self._guard(self._inner.flush)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """Within the block, ``sys.stdout`` write/flush failures raise OutputError; flushed on exit."""
    original = sys.stdout
    sys.stdout = _GuardedStream(original, "standard output")  # type: ignore[assignment]
    try:
        yield
        sys.stdout.flush()
    finally:
        sys.stdout = original


def silence_broken_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush is quiet."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def add_out_argument(parser, help_text: str = "write to this file (atomically) instead of stdout") -> None:
    """``--out FILE`` and ``--out-follow-symlink`` for a command."""
    parser.add_argument("--out", metavar="FILE", help=help_text)
    parser.add_argument("--out-follow-symlink", action="store_true",
                        help="when --out is a symbolic link, replace the file it points to (the link stays)")


def check_out_argument(args) -> None:
    """Refuse a bad ``--out`` before the work that produces the output (a plan takes seconds)."""
    out = getattr(args, "out", None)
    if out:
        check_target(out, bool(getattr(args, "out_follow_symlink", False)))


def emit(args, text: str) -> None:
    """``text`` to ``args.out`` (see :func:`write_file`) or to standard output."""
    out = getattr(args, "out", None)
    if out:
        write_file(out, text, follow_symlink=bool(getattr(args, "out_follow_symlink", False)))
    else:
        sys.stdout.write(text)
