"""The files of one node, as text, and which way each travels (docs/bootstrap.md):

* **user data** (cloud-init, first boot only; the instances ignore later changes of it): what
  boots the node: ``node.env``, the NCCL settings, the setup script, the systemd units and the
  boot programs (:data:`trainstack.bootstrap.programs.BOOT_PROGRAMS`);
* **the stack bucket**: the node programs (``NodeFile.program``), installed by the node and
  checked by their sha256 (trainstack.bootstrap.programs);
* **the job settings channel** (``NodeFile.channel``: ``settings.env``, ``job.env``, the
  hostfiles), read and verified at every job start (:func:`trainstack.bootstrap.render.render_job_settings`).

No profile value is ever spliced into script text or a comment: values go into the env files,
shell-quoted by :mod:`trainstack.launchers.words`, which the scripts source.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Iterable

from trainstack.launchers.words import assignment, bash_array, lit

from .node import DEEPSPEED_HOSTFILE, ENV_NAME, ETC, LAUNCH_ARRAY, SECRETS_ARRAY, Node
from .programs import (
    BOOT_FRAGMENTS, BOOT_PROGRAMS, LIB, MANIFEST, PROGRAMS, TEMPLATES, program_set, program_text, script,
)

#: Files the job settings channel carries (the node writes exactly these names, nothing else).
CHANNEL_FILES = ("settings.env", "job.env", "hostfile", "deepspeed-hostfile")
#: Per-rank channel files; the others are the same on every node.
RANK_FILES = ("job.env",)


@dataclass(frozen=True)
class NodeFile:
    """One file of a node; ``name`` is how render_script finds it."""

    name: str
    path: str
    content: str
    permissions: str = "0644"
    static: bool = False  # script text from templates/, no Plan values inside (travels gz+b64)
    channel: bool = False  # travels through the job settings channel, not user data
    program: bool = False  # a node program: an object in the stack bucket, checked by its sha256
    boot: bool = False  # a node program the user data carries too (the node fetches the others with it)

    @property
    def is_shell(self) -> bool:
        return self.content.startswith(("#!/bin/bash", "# shellcheck shell="))

    @property
    def in_user_data(self) -> bool:
        return not self.channel and (not self.program or self.boot)


@functools.lru_cache(maxsize=None)
def template(name: str) -> str:  # templates never change within a process (like compact's cache)
    return (TEMPLATES / name).read_text(encoding="utf-8")


def _fill(text: str, **values: object) -> str:
    """Replace ``@KEY@`` markers with values validated by this package (never profile text)."""
    for key, value in values.items():
        text = text.replace(f"@{key}@", str(value))
    if leftover := re.findall(r"@[A-Z_]+@", text):
        raise AssertionError(f"unfilled template markers: {leftover}")
    return text


def _env_lines(pairs: Iterable[tuple[str, object]], export: bool = False) -> str:
    return "".join(assignment(k, lit("" if v is None else v), export=export) for k, v in pairs)


def node_env(node: Node) -> str:
    return ("# shellcheck shell=bash disable=SC2034\n"
            f"# trainstack node settings for {node.plan.name}, node {node.rank}, rendered from the Plan at creation.\n"
            "# Sourced by the trainstack scripts. Every value is shell-quoted. Job settings: settings.env.\n"
            + _env_lines(node.node_env_pairs()))


def settings_env(node: Node) -> str:
    return ("# shellcheck shell=bash disable=SC2034\n"
            f"# trainstack job settings for {node.plan.name} (the job settings channel, read at every job "
            "start).\n# Sourced by the trainstack scripts after node.env. Every value is shell-quoted.\n"
            + _env_lines(node.settings_env_pairs()))


def job_env(node: Node) -> str:
    """The trainer's environment and launch command. Sourced only in the subshell that
    starts the trainer (and the NCCL check), after node.env: it cannot change the scripts."""
    launch = node.launch
    text = ("# shellcheck shell=bash disable=SC2034\n"
            f"# trainstack job settings ({launch.tool}): job.env, job.command and the names of job.secrets,\n"
            "# shell-quoted, never evaluated. Secret values are read from KMS at job start, never written.\n")
    user = {**dict(launch.user_env), **node.plan.job.env}
    text += _env_lines(sorted(user.items()), export=True)
    text += "".join(assignment(name, word, export=True) for name, word in launch.env)
    secrets = [lit(f"{name}={ref.kms_secret}") for name, ref in sorted(node.plan.job.secrets.items())]
    return text + bash_array(SECRETS_ARRAY, secrets) + bash_array(LAUNCH_ARRAY, launch.argv)


def units(node: Node) -> list[NodeFile]:
    p, o = node.plan, node.opts
    what = ", ".join(what for _, what in node.setup_steps() if what != "GPU driver")
    specs = [
        ("trainstack-programs.service", {"TIMEOUT": o.setup_timeout_seconds}),
        ("trainstack-setup.service", {"SETUP_WHAT": what, "SETUP_TIMEOUT": o.setup_timeout_seconds}),
        ("trainstack-setup-failed.service", {}),
        ("trainstack-job.service",
         {"NAME": p.name, "RANK": node.rank, "STOP_TIMEOUT": o.checkpoint_grace_seconds + o.kill_after_seconds + 30}),
        ("trainstack-ckpt-sync.service", {}),  # idles unless the job settings put checkpoints on OSS
    ]
    if p.spot:
        specs.append(("trainstack-spot-watcher.service",
                      {"POLL": f"{o.spot_poll_seconds:g}", "SIGNAL": o.checkpoint_signal}))
    specs.append(("trainstack-heartbeat.service", {"SECONDS": o.heartbeat_seconds}))
    return [NodeFile(name, f"/etc/systemd/system/{name}", _fill(template(f"systemd/{name}"), **values))
            for name, values in specs]


def programs() -> list[NodeFile]:
    """Every node program and the installed manifest (LIB/programs.json), as the node holds them."""
    out = [NodeFile(name, f"{LIB}/{name}", program_text(name), static=True, program=True, boot=name in BOOT_PROGRAMS)
           for name in PROGRAMS]
    return out + [NodeFile(MANIFEST, f"{LIB}/{MANIFEST}", program_set().manifest, program=True)]


def channel_files(node: Node) -> list[NodeFile]:
    """The job settings channel's files for this rank (settings.env and job.env may hold
    credentials in CODE_URI and the command line: root only)."""
    hostfile = "".join(f"{ip}\n" for ip in node.ips)
    files = [
        NodeFile("settings.env", f"{ETC}/settings.env", settings_env(node), "0600", channel=True),
        NodeFile("job.env", f"{ETC}/job.env", job_env(node), "0600", channel=True),
        NodeFile("hostfile", f"{ETC}/hostfile", hostfile, channel=True),
    ]
    if node.launch.hostfile is not None:
        files.append(NodeFile("deepspeed-hostfile", DEEPSPEED_HOSTFILE, node.launch.hostfile, channel=True))
    return files


def node_files(node: Node, channel: bool = True) -> list[NodeFile]:
    """Every file of this node; ``channel=False``: all but the job settings channel's (no CPFS
    address needed)."""
    p = node.plan
    files = [NodeFile("node.env", f"{ETC}/node.env", node_env(node), "0600")]
    files += channel_files(node) if channel else []
    if p.network.nccl_env:
        if bad := [k for k in p.network.nccl_env if not ENV_NAME.match(k)]:
            raise ValueError(f"network.nccl_env names are not shell variable names: {bad}")
        nccl = ("# shellcheck shell=sh\n# NCCL settings for this cluster's network, from the Plan.\n"
                + _env_lines(sorted(p.network.nccl_env.items()), export=True))
        files += [NodeFile("nccl.env", f"{ETC}/nccl.env", nccl),  # the launch script's; login shells' below
                  NodeFile("trainstack-nccl.sh", "/etc/profile.d/trainstack-nccl.sh",
                           f"# shellcheck shell=sh source=/dev/null\n. {ETC}/nccl.env\n")]
    files.append(NodeFile("trainstack-boot.sh", "/usr/local/sbin/trainstack-boot", script(BOOT_FRAGMENTS), "0755",
                          static=True))
    return files + programs() + units(node)


def runcmd(node: Node) -> list[list[str]]:
    started = ["trainstack-job.service", "trainstack-ckpt-sync.service"]
    if node.plan.spot:
        started.append("trainstack-spot-watcher.service")
    started.append("trainstack-heartbeat.service")
    return [["systemctl", "daemon-reload"],
            ["systemctl", "enable", "trainstack-programs.service", "trainstack-setup.service", *started],
            ["systemctl", "start", "--no-block", *started]]
