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


def classify_code_uri(uri: Optional[str]) -> CodeSource:
    """oss://bucket/x.tar.gz | oss://bucket/dir/ | oss://bucket/train.py | git URL[#ref] |
    https://host/x.tar.gz | None."""
    if not uri or not uri.strip():
        return CodeSource("none")
    uri = uri.strip()
    if uri.startswith("oss://"):
        if not urlsplit(uri).netloc:
            raise ValueError(f"job.code_uri {uri!r} names no bucket")
        if uri.endswith("/"):
            return CodeSource("oss-dir", uri)
        archive = _archive_name(uri)
        return CodeSource("oss-archive", uri, archive=archive) if archive else CodeSource("oss-file", uri)
    base, _, ref = uri.partition("#")
    if base.startswith("git+"):
        return CodeSource("git", base[4:], ref)
    scheme = urlsplit(base).scheme
    if base.startswith("git@") or scheme in ("ssh", "git") or base.rstrip("/").endswith(".git"):
        return CodeSource("git", base, ref)
    if scheme in ("http", "https"):
        archive = _archive_name(urlsplit(base).path)
        return CodeSource("url-archive", uri, archive=archive) if archive else CodeSource("git", base, ref)
    raise ValueError(f"job.code_uri {uri!r}: use oss://bucket/path, a git URL or an https:// archive")


def cpfs_source(address: str) -> str:
    """The NFS source ``host:/path`` of a CPFS protocol-service export; a bare mount target
    domain means the export of ``/``, which CPFS shows as ``host:/share``."""
    host, sep, path = address.strip().partition(":")
    path = path if sep else "/share"
    if not _HOST.match(host) or not _EXPORT_PATH.match(path):
        raise ValueError(f"cpfs_mount_address {address!r} is not `<mount target domain>[:/export/path]`")
    return f"{host}:{path}"
