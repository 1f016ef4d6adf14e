"""Where a node gets its code and its CPFS mount from, classified once at render time.

Deciding here (not in the node's shell) keeps the shell simple and lets a bad value fail
the render with a clear message instead of a node failing twenty minutes into its boot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

_ARCHIVES = (".tar.gz", ".tgz", ".tar", ".zip")
#: a git ref git accepts for --branch, without a leading '-' (git check-ref-format, simplified)
_GIT_REF = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/+-]{0,254}$")
_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+$")
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
_EXPORT_PATH = re.compile(r"^/[A-Za-z0-9._/-]*$")


@dataclass(frozen=True)
class CodeSource:
    kind: str  # none | git | oss-archive | oss-dir | oss-file | url-archive
    uri: str = ""
    ref: str = ""  # git branch or tag (``URL#ref``)
    archive: str = ""  # local file name whose suffix tells the extractor the format

    @property
    def uses_oss(self) -> bool:
        return self.kind.startswith("oss-")


def _archive_name(path: str) -> str:
    low = path.lower()
    return next((f"code{ext}" for ext in _ARCHIVES if low.endswith(ext)), "")


def shown_uri(uri: str) -> str:
    """``uri`` fit for a log line: ``user:password@`` replaced (an https git URL may carry a token)."""
    parts = urlsplit(uri)
    if parts.scheme and "@" in parts.netloc:
        return uri.replace(parts.netloc, "***@" + parts.netloc.rsplit("@", 1)[1], 1)
    return uri


def _check_git(base: str, ref: str, uri: str) -> None:
    scheme = urlsplit(base).scheme
    if not (scheme in ("https", "http", "ssh", "git", "file") or (not scheme and _SCP_LIKE.match(base))) \
            or base.startswith("-") or "::" in base:
        raise ValueError(f"job.code_uri {uri!r}: a git URL must be https://, ssh://, git://, file:// or "
                         "user@host:path (a transport such as ext:: runs commands; a leading '-' is an option)")
    if ref and not _GIT_REF.match(ref):
        raise ValueError(f"job.code_uri {uri!r}: the git ref after '#' must be a branch or tag name")


def classify_code_uri(uri: Optional[str]) -> CodeSource:
    """oss://bucket/x.tar.gz | oss://bucket/dir/ | oss://bucket/train.py | git URL[#ref] |
    https://host/x.tar.gz | None."""
    if not uri or not uri.strip():
        return CodeSource("none")
    uri = uri.strip()
    if any(ord(c) < 32 or ord(c) == 127 for c in uri):
        raise ValueError(f"job.code_uri {uri!r} contains control characters (a newline, a tab ...)")
    if not uri.startswith("oss://") and " " in uri:
        raise ValueError(f"job.code_uri {uri!r} contains a space; a URL writes it as %20")
    if uri.startswith("oss://"):
        if not urlsplit(uri).netloc:
            raise ValueError(f"job.code_uri {uri!r} names no bucket")
        if ".." in urlsplit(uri).path.split("/"):
            raise ValueError(f"job.code_uri {uri!r}: an object key cannot contain '..'")
        if uri.endswith("/"):
            return CodeSource("oss-dir", uri)
        archive = _archive_name(uri)
        return CodeSource("oss-archive", uri, archive=archive) if archive else CodeSource("oss-file", uri)
    base, _, ref = uri.partition("#")
    if base.startswith("git+"):
        _check_git(base[4:], ref, uri)
        return CodeSource("git", base[4:], ref)
    scheme = urlsplit(base).scheme
    if base.startswith("git@") or scheme in ("ssh", "git") or base.rstrip("/").endswith(".git"):
        _check_git(base, ref, uri)
        return CodeSource("git", base, ref)
    if scheme in ("http", "https"):
        archive = _archive_name(urlsplit(base).path)
        if archive:
            return CodeSource("url-archive", uri, archive=archive)
        _check_git(base, ref, uri)
        return CodeSource("git", base, ref)
    raise ValueError(f"job.code_uri {uri!r}: use oss://bucket/path, a git URL or an https:// archive")


def cpfs_source(address: str) -> str:
    """The NFS source ``host:/path`` of a CPFS protocol-service export; a bare mount target
    domain means the export of ``/``, which CPFS shows as ``host:/share``."""
    host, sep, path = address.strip().partition(":")
    path = path if sep else "/share"
    if not _HOST.match(host) or not _EXPORT_PATH.match(path):
        raise ValueError(f"cpfs_mount_address {address!r} is not `<mount target domain>[:/export/path]`")
    return f"{host}:{path}"
