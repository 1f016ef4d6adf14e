"""The node programs: what runs on a node besides its setup, and how a node trusts them.

The programs (the setup, from templates/setup/; the launch script, the agent and its modules by
duty, the heartbeat, the budget guard, the spot watcher, alerts, the NCCL check, from templates/programs/)
do not travel in the user data,
which ECS caps at 32 KB: `pulumi up` writes each to the stack bucket at a content-addressed key,
``job/programs/<sha256>/<name>``, with a manifest naming the whole set,
``job/programs/<manifest sha256>/programs.json`` (components/job_settings.py). A key never changes
content and the objects are never deleted by a later `pulumi up`, so every digest a node was
ever given still verifies. A node learns the digest of the set it may run from what it trusts:

* its user data (``BOOT_PROGRAMS_SHA256`` in node.env) at first boot; it carries only the
  :data:`BOOT_PROGRAMS` itself and the boot script (:data:`BOOT_FRAGMENTS`), enough to fetch and
  check the rest, or to stop billing when that fails;
* its job settings (``PROGRAMS_SHA256`` in settings.env, checked against the instance tag) at each
  job start: new programs reach a running node at its next job start, as new settings do.

The set is the same for every plan of a trainstack version (a program a plan does not use is never
started), so its digest changes only with trainstack itself. Pure: the same templates give the same
text, digests and keys.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from trainstack.plan import Plan

from .compact import compact

TEMPLATES = Path(__file__).with_name("templates")
#: Where a node keeps its programs (the launch script's and the setup's ``LIB``).
LIB = "/usr/local/lib/trainstack"
#: The setup program and the boot script (user data), each made of the fragments of templates/setup/
SETUP = "trainstack-setup.sh"
SETUP_FRAGMENTS = ("head-setup.sh", "00-common.sh", "10-data-disk.sh", "11-data-disk.sh", "12-checkpoint-disk.sh",
                   "13-dataset.sh", "20-cpfs.sh", "30-gpu-driver.sh", "40-erdma.sh", "45-mtu.sh", "55-git.sh",
                   "58-python.sh", "60-pytorch.sh", "99-main.sh")
BOOT_FRAGMENTS = ("head-boot.sh", "00-common.sh", "58-python.sh", "65-oss.sh", "70-programs.sh", "98-boot.sh")
#: Every node program (each installed as LIB/<name>).
PROGRAMS = (SETUP, "trainstack-launch.sh", "trainstack_agent.py", "trainstack_metadata.py", "trainstack_cloud.py",
            "trainstack_store.py", "trainstack_programs.py", "trainstack_settings.py", "trainstack_sync.py",
            "trainstack_launch.py", "trainstack_spot.py", "trainstack_heartbeat.py", "trainstack_guard.py",
            "trainstack_events.py", "trainstack_pool.py", "trainstack_alerts.py", "nccl_check.py")
#: What the user data carries as well: what installs the others (trainstack_programs.py) and stops
#: billing when that fails (trainstack_cloud.py), with what they import and nothing else.
BOOT_PROGRAMS = ("trainstack_metadata.py", "trainstack_cloud.py", "trainstack_store.py", "trainstack_programs.py")
MANIFEST = "programs.json"
MANIFEST_KIND = "trainstack-node-programs"
#: Under the stack bucket's read-only job/ prefix (OssPlan.job_prefix)
PROGRAMS_DIR = "programs/"


def _read(path: str) -> str:
    return (TEMPLATES / path).read_text(encoding="utf-8")


def script(fragments: tuple[str, ...]) -> str:
    """A shell script made of setup fragments, as the nodes run it (without its comments)."""
    return compact("script.sh", "".join(_read(f"setup/{f}") for f in fragments))


@functools.lru_cache(maxsize=None)
def program_text(name: str) -> str:
    """A node program as the nodes run it (comments and docstrings stripped: bootstrap/compact.py)."""
    if name not in PROGRAMS:
        raise KeyError(f"{name!r} is not a node program")
    return script(SETUP_FRAGMENTS) if name == SETUP else compact(name, _read(f"programs/{name}"))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ProgramSet:
    """Every program's sha256 and the manifest that names them (its sha256: the set's digest)."""

    programs: tuple[tuple[str, str], ...]
    manifest: str

    @property
    def digest(self) -> str:
        return sha256(self.manifest)


@functools.lru_cache(maxsize=1)
def program_set() -> ProgramSet:
    programs = tuple(sorted((name, sha256(program_text(name))) for name in PROGRAMS))
    doc = {"kind": MANIFEST_KIND, "schema_version": 1, "programs": dict(programs)}
    return ProgramSet(programs, json.dumps(doc, sort_keys=True, separators=(",", ":")))


@dataclass(frozen=True)
class ProgramObject:
    """One object `pulumi up` writes for the programs (a program, or the manifest)."""

    name: str
    sha256: str
    key: str
    content: str
    content_type: str


def programs_prefix(plan: Plan) -> str:
    assert plan.storage.oss is not None, "every ECS plan has its stack bucket"
    return f"{plan.storage.oss.job_prefix}{PROGRAMS_DIR}"


def programs_uri(plan: Plan) -> str:
    """Where a node fetches its programs: ``oss://<stack bucket>/job/programs/``."""
    assert plan.storage.oss is not None
    return f"oss://{plan.storage.oss.bucket}/{programs_prefix(plan)}"


def program_objects(plan: Plan) -> list[ProgramObject]:
    """The programs and their manifest at their content-addressed keys, the manifest last."""
    prefix, programs = programs_prefix(plan), program_set()
    out = [ProgramObject(name, sha, f"{prefix}{sha}/{name}", program_text(name),
                         "text/x-shellscript" if name.endswith(".sh") else "text/x-python")
           for name, sha in programs.programs]
    return out + [ProgramObject(MANIFEST, programs.digest, f"{prefix}{programs.digest}/{MANIFEST}",
                                programs.manifest, "application/json")]
