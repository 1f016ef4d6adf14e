"""The ``#cloud-config`` document ECS UserData carries: ``write_files`` and ``runcmd``.

The plan-specific files (node.env, the NCCL settings, the systemd units) stay readable; the static
ones (the boot script and the boot programs) travel as one deterministic gzip'd tar (mtime 0, owner
root), which the first runcmd unpacks: one gzip stream packs them 1.7 KB smaller than one per
file. ECS accepts at most :data:`USER_DATA_LIMIT` bytes before Base64 encoding
(data/service_limits.yaml); the render refuses a document over it (the rule book renders every
plan's, so `plan` and `validate` refuse it too).
"""

from __future__ import annotations

import base64
import functools
import gzip
import io
import tarfile

import yaml

from trainstack.catalog.limits import service_limits

from .files import NodeFile
from .programs import LIB

USER_DATA_LIMIT = int(service_limits().number("ecs.user_data.max_bytes"))
#: where the static files' archive lands (root only), unpacked over / by the first runcmd
BOOT_ARCHIVE = f"{LIB}/boot.tar.gz"


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # libyaml when present: 6x faster
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


@functools.lru_cache(maxsize=16)
def _archive(members: tuple[tuple[str, str, str], ...]) -> str:
    """base64 of the tar.gz of (path, mode, text): packed once per process (every node of every
    plan carries the same static files)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path, mode, text in members:
            data = text.encode("utf-8")
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime, info.uname, info.gname = len(data), int(mode, 8), 0, "root", "root"
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(gzip.compress(buf.getvalue(), compresslevel=9, mtime=0)).decode("ascii")


def cloud_config(title: str, files: list[NodeFile], runcmd: list[list[str]]) -> str:
    """The document, refused (ValueError) over ECS's limit."""
    static = tuple((f.path, f.permissions, f.content) for f in files if f.static)
    entries = [{"path": f.path, "permissions": f.permissions, "content": f.content} for f in files if not f.static]
    if static:
        entries.append({"path": BOOT_ARCHIVE, "permissions": "0600", "encoding": "b64", "content": _archive(static)})
        runcmd = [["tar", "-xzf", BOOT_ARCHIVE, "-C", "/"], *runcmd]
    doc = {"write_files": entries, "runcmd": runcmd}
    text = (f"#cloud-config\n# {title}\n"
            + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=1_000_000, allow_unicode=True))
    if len(text.encode("utf-8")) > USER_DATA_LIMIT:
        raise ValueError(f"user data is {len(text.encode('utf-8'))} bytes; ECS accepts {USER_DATA_LIMIT}: the node's "
                         "own settings (node.env, network.nccl_env) are too long")
    return text
