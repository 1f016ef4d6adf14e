"""Render a training node's files from the Plan: its cloud-init user data and its job settings.

Pure and deterministic: the same Plan, rank and options give the same text (no clock, no
randomness), so a preview shows no diff unless the Plan changed. The scripts are static files
under ``templates/``; every value that comes from the Plan or a profile is written, shell-quoted,
to files under ``/etc/trainstack`` which the scripts source (trainstack.bootstrap.files). No profile
value is ever spliced into script text or a comment, so none can break or inject into it
(tests/bootstrap/test_bootstrap_properties.py renders arbitrary text and sources the files).

Three ways onto the node (docs/bootstrap.md, docs/day-two.md):

* **user data** (cloud-init, first boot only; the instances ignore later changes of it): only what
  boots the node: ``node.env`` (what the node keeps for life), the setup script, the units and the
  boot programs (:func:`render_user_data`);
* **the node programs** in the stack bucket, checked by their sha256 (trainstack.bootstrap.programs);
* **the job settings channel** (:data:`CHANNEL_FILES`): one document for all ranks
  (:func:`render_job_settings`) that ``pulumi up`` writes to ``job/settings.json`` in the stack
  bucket and whose SHA-256 it tags on every node; the launcher reads and verifies it at every job
  start. It names the node programs the job runs (``PROGRAMS_SHA256``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Optional

from trainstack.errors import Problem
from trainstack.launchers import check_command
from trainstack.plan import Plan

from .cloud_config import USER_DATA_LIMIT, cloud_config
from .files import CHANNEL_FILES, RANK_FILES, NodeFile, channel_files, node_files, runcmd
from .node import DEEPSPEED_HOSTFILE, JOB_SETTINGS_TAG, Node
from .options import BootstrapOptions

JOB_SETTINGS_KIND = "trainstack-job-settings"
JOB_SETTINGS_SCHEMA = 1
#: stands in for the CPFS export address, known only at deploy time, when only names are checked
_CPFS_PLACEHOLDER = "cpfs-placeholder.invalid:/share"

__all__ = ["CHANNEL_FILES", "DEEPSPEED_HOSTFILE", "JOB_SETTINGS_KIND", "JOB_SETTINGS_TAG", "USER_DATA_LIMIT",
           "JobSettings", "NodeFile", "check_job", "render_files", "render_job_settings", "render_script",
           "render_user_data"]


def check_job(plan: Plan, options: Optional[BootstrapOptions] = None) -> list[Problem]:
    """What the node bootstrap would refuse about job.command, job.env and job.secrets, found
    without rendering (``trainstack validate`` runs it; the render raises the same problems)."""
    node = Node(plan, 0, _CPFS_PLACEHOLDER if plan.storage.cpfs else None, options or BootstrapOptions())
    problems = check_command(plan.job.command, node.topology)
    return problems + node.job_problems(None if problems else node.render_launch())


def render_files(plan: Plan, node_rank: int, cpfs_mount_address: Optional[str] = None,
                 options: Optional[BootstrapOptions] = None) -> list[NodeFile]:
    """Every file node ``node_rank`` ends up with: the user data's, the node programs
    (``NodeFile.program``) and the job settings channel's (``NodeFile.channel``)."""
    return node_files(Node(plan, node_rank, cpfs_mount_address, options or BootstrapOptions()))


@dataclass(frozen=True)
class JobSettings:
    """The job settings document of a plan (``job/settings.json``) and its SHA-256 (the node tag)."""

    document: str
    digest: str


def render_job_settings(plan: Plan, cpfs_mount_address: Optional[str] = None,
                        options: Optional[BootstrapOptions] = None) -> JobSettings:
    """One JSON document for every rank: ``shared`` files (the same on every node) and ``ranks[i]``
    (``job.env``: the launch line of rank i). Deterministic: sorted keys, no clock."""
    opts = options or BootstrapOptions()
    shared: dict[str, str] = {}
    ranks: list[dict[str, str]] = []
    for rank in range(plan.nodes):
        files = {f.name: f.content for f in channel_files(Node(plan, rank, cpfs_mount_address, opts))}
        ranks.append({k: files.pop(k) for k in RANK_FILES})
        if rank == 0:
            shared = files
        elif files != shared:  # a rank-specific file outside RANK_FILES would be a render bug
            raise AssertionError(f"rank {rank}: {sorted(k for k in files if files[k] != shared.get(k))} differ")
    doc = {"kind": JOB_SETTINGS_KIND, "schema_version": JOB_SETTINGS_SCHEMA, "name": plan.name,
           "nodes": plan.nodes, "shared": shared, "ranks": ranks}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return JobSettings(document=text, digest=hashlib.sha256(text.encode("utf-8")).hexdigest())


def render_script(plan: Plan, name: str, node_rank: int = 0, cpfs_mount_address: Optional[str] = None,
                  options: Optional[BootstrapOptions] = None) -> str:
    """One rendered file by name (``node-setup.sh``, ``trainstack-launch.sh``, ``trainstack_spot.py``,
    ``node.env``, ``trainstack-job.service``, ...); KeyError when this plan does not have it."""
    node = Node(plan, node_rank, cpfs_mount_address, options or BootstrapOptions())
    for f in node_files(node, channel=name in CHANNEL_FILES):
        if f.name == name:
            return f.content
    raise KeyError(f"{name!r} is not part of this plan's bootstrap")


def render_user_data(plan: Plan, node_rank: int, cpfs_mount_address: Optional[str] = None,
                     options: Optional[BootstrapOptions] = None) -> str:
    """The complete ``#cloud-config`` document for ECS UserData of node ``node_rank``.

    Only what boots the node: nothing here depends on the job settings, the node count or the CPFS
    address (``cpfs_mount_address`` is accepted for symmetry and only checked), so the instances can
    ignore later changes of it."""
    node = Node(plan, node_rank, cpfs_mount_address, options or BootstrapOptions())
    node.launch  # refuses a job.command that cannot run on this plan, as the channel's render would
    files = [f for f in node_files(node, channel=False) if f.in_user_data]
    return cloud_config(f"trainstack bootstrap: {plan.name}, node {node_rank} (rendered from the Plan at creation; "
                        "the node programs come from the stack bucket, job settings from the job settings channel)",
                        files, runcmd(node))
