"""Render a training node's files from the Plan: its cloud-init user data and its job settings.

Pure and deterministic: the same Plan, rank and options give the same text (no clock, no
randomness), so a preview shows no diff unless the Plan changed. The scripts are static
files under ``templates/``; every value that comes from the Plan or a profile is written,
shell-quoted by the one quoting path of :mod:`trainstack.launchers.words`, to files under
``/etc/trainstack`` which the scripts source. No profile value is ever spliced into script text
or a comment, so none can break or inject into it
(tests/bootstrap/test_bootstrap_properties.py renders arbitrary text and sources the files).

Two ways onto the node (docs/bootstrap.md, docs/day-two.md):

* **user data** (cloud-init, first boot only; the instances ignore later changes of it):
  the scripts, the units and ``node.env``, which holds only what a node keeps for life (its
  name, rank, region, driver versions, disks, the job settings channel's location);
* **the job settings channel** (:data:`CHANNEL_FILES`: ``settings.env``, ``job.env``, ``hostfile``,
  ``deepspeed-hostfile``): one document for all ranks (:func:`render_job_settings`) that
  ``pulumi up`` writes to ``job/settings.json`` in the stack bucket and whose SHA-256 it tags on
  every node; the launcher reads and verifies it at every job start.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Optional
from urllib.parse import urlsplit

import yaml

from trainstack.catalog.limits import service_limits
from trainstack.errors import Problem
from trainstack.launchers import Launch, LaunchError, render_launch, topology_from_plan
from trainstack.launchers.command import parse as parse_launcher
from trainstack.launchers.words import assignment, bash_array, lit
from trainstack.plan import Plan

from .compact import compact
from .heartbeat import (
    NCCL_CHECK, NCCL_CHECK_KEY, needs_nccl_check, program_sha256, program_uri, status_uri,
)
from .heartbeat import nproc_per_node as _nproc_per_node
from .locations import classify_code_uri, cpfs_source, shown_uri
from .options import BootstrapOptions
from .reserved import reserved_problems

TEMPLATES = Path(__file__).with_name("templates")
#: ECS accepts at most this much user data before Base64 encoding (data/service_limits.yaml)
USER_DATA_LIMIT = int(service_limits().number("ecs.user_data.max_bytes"))
#: a hostfile longer than this (about 45 nodes) travels gz+b64: 512 nodes take 1.4 KB, not 5.4 KB
HOSTFILE_PACK_OVER = 512
ERDMA_INSTALLER_URL = "http://mirrors.cloud.aliyuncs.com/erdma/erdma_installer-{version}.tar.gz"
OSS_VENV = "/opt/trainstack/oss-venv"
#: The hostfile and MASTER_ADDR of a self-healing pool's single node (its IP is known only at boot)
POOL_NODE_ADDRESS = "127.0.0.1"
ETC = "/etc/trainstack"
DEEPSPEED_HOSTFILE = f"{ETC}/deepspeed-hostfile"
#: the arrays job.env defines for the launch script
LAUNCH_ARRAY, SECRETS_ARRAY = "LAUNCH_ARGV", "JOB_SECRETS"
#: stands in for the CPFS export address, known only at deploy time, when only names are checked
_CPFS_PLACEHOLDER = "cpfs-placeholder.invalid:/share"
#: Files the job settings channel carries (the node writes exactly these names, nothing else).
CHANNEL_FILES = ("settings.env", "job.env", "hostfile", "deepspeed-hostfile")
#: Per-rank channel files; the others are the same on every node.
RANK_FILES = ("job.env",)
#: The instance tag that carries the SHA-256 of the job settings document (the node trusts it: only
#: the deployer can tag instances; the node role may read tags, never write them).
JOB_SETTINGS_TAG = "trainstack:job-settings"
JOB_SETTINGS_KIND = "trainstack-job-settings"
JOB_SETTINGS_SCHEMA = 1

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class NodeFile:
    """One file cloud-init writes on the node; ``name`` is how render_script finds it."""

    name: str
    path: str
    content: str
    permissions: str = "0644"
    static: bool = False  # script text from templates/, no Plan values inside
    packed: bool = False  # travels gz+b64 although it holds Plan values (a long hostfile)
    channel: bool = False  # travels through the job settings channel, not user data

    @property
    def is_shell(self) -> bool:
        return self.content.startswith(("#!/bin/bash", "# shellcheck shell="))


@functools.lru_cache(maxsize=None)
def _template(name: str) -> str:  # templates never change within a process (like compact's cache)
    return (TEMPLATES / name).read_text(encoding="utf-8")


def _static(name: str, path: str, permissions: str = "0755") -> NodeFile:
    return NodeFile(name, path, compact(name, _template(name)), permissions, static=True)


def _fill(text: str, **values: object) -> str:
    """Replace ``@KEY@`` markers with values validated by this module (never profile text)."""
    for key, value in values.items():
        text = text.replace(f"@{key}@", str(value))
    if leftover := re.findall(r"@[A-Z_]+@", text):
        raise AssertionError(f"unfilled template markers: {leftover}")
    return text


def _env_lines(pairs: Iterable[tuple[str, object]], export: bool = False) -> str:
    return "".join(assignment(k, lit("" if v is None else v), export=export) for k, v in pairs)


def _flag(value: bool) -> int:
    return 1 if value else 0


@dataclass(frozen=True)
class _Step:
    fragment: str
    function: str
    what: str


class _Node:
    """Everything one node's files are made of, validated once."""

    def __init__(self, plan: Plan, rank: int, cpfs_address: Optional[str], opts: BootstrapOptions):
        if plan.target != "ecs":
            raise ValueError(f"the node bootstrap is for ECS nodes; this plan targets {plan.target!r}")
        if not 0 <= rank < plan.nodes:
            raise ValueError(f"node_rank {rank} is outside 0..{plan.nodes - 1}")
        if not _NAME.fullmatch(plan.name):
            raise ValueError(f"plan name {plan.name!r} is not DNS-safe")
        if bad := [k for k in (*plan.job.env, *plan.job.secrets) if not _ENV_NAME.fullmatch(k)]:
            raise ValueError(f"job.env names are not shell variable names: {bad}")
        storage = plan.storage
        if storage.oss is None:
            raise ValueError("an ECS plan needs its stack bucket (the job settings channel lives there)")
        self.pool_node = plan.spot_pool is not None and not (plan.elastic and rank == 0)
        if self.pool_node:
            # a self-healing pool node is replaced by ESS with a new private IP, and ESS health checks
            # replace a stopped node: it is never stopped at job end (it runs until `pulumi destroy`;
            # docs/self-healing.md). A 1-node job rendezvous on loopback; a multi-node one through
            # torchrun elastic on node 0 (the anchor, a plain node outside the pool).
            opts = replace(opts, stop_on="never", poweroff_fallback=False)
        self.plan, self.rank, self.opts = plan, rank, opts
        self.code = classify_code_uri(plan.job.code_uri)
        self.cpfs = cpfs_source(cpfs_address) if storage.cpfs and cpfs_address else None
        if plan.elastic:  # only node 0's address is known: ESS picks the others' (the hostfile names node 0)
            self.ips = plan.node_private_ips()[:1]
        else:
            self.ips = [POOL_NODE_ADDRESS] if plan.spot_pool is not None else plan.node_private_ips()
        self.nproc = _nproc_per_node(plan)
        self.oss_checkpoints = storage.checkpoint == "oss"
        # every pool node of a multi-node plan has the same files (rank 1's): one name, one status prefix
        # per instance (the launch script appends the instance id)
        self.node_name = plan.pool_node_name() if (plan.elastic and rank > 0) else plan.node_names()[rank]
        self.status_uri = status_uri(plan, self.node_name)
        self.topology = topology_from_plan(plan, opts.master_port, opts.rdzv_timeout_seconds, hosts=tuple(self.ips))

    def render_launch(self) -> Launch:
        return render_launch(self.plan.job.command, self.topology, self.rank, deepspeed_hostfile=DEEPSPEED_HOSTFILE,
                             gradient_accumulation_steps=self.plan.job.gradient_accumulation_steps)

    @functools.cached_property
    def launch(self) -> Launch:
        """This node's launch of job.command (LaunchError: it cannot work on this plan)."""
        launch = self.render_launch()
        if problems := self.job_problems(launch):
            raise LaunchError(problems)
        return launch

    def job_problems(self, launch: Optional[Launch] = None) -> list[Problem]:
        """job.env, job.secrets and the command's NAME=value words that would override a
        variable of trainstack's own node files, its launchers or the shell."""
        names = {"job.env": list(self.plan.job.env), "job.secrets": list(self.plan.job.secrets)}
        if launch is not None:
            names["job.command"] = [k for k, _ in launch.user_env]
        return reserved_problems(names, self.node_env_names())

    def node_env_names(self) -> set[str]:
        pairs = self.node_env_pairs() + self.settings_env_pairs(check=False)
        return {name for name, _ in pairs} | {LAUNCH_ARRAY, SECRETS_ARRAY}

    def steps(self) -> list[_Step]:
        """What setup does at every boot. Everything a later job-settings change may need (git, an NFS
        client, the OSS SDK) is installed on every node, so a running node can follow the change."""
        p, steps = self.plan, []
        if p.storage.data_disk:
            steps.append(_Step("10-data-disk.sh 11-data-disk.sh", "setup_data_disk", "data disk"))
        if p.storage.checkpoint_disk:
            steps.append(_Step("10-data-disk.sh 12-checkpoint-disk.sh", "setup_checkpoint_disk", "checkpoint disk"))
        steps.append(_Step("20-cpfs.sh", "setup_nfs_client", "NFS client"))
        steps.append(_Step("30-gpu-driver.sh", "setup_gpu_driver", "GPU driver"))
        if p.network.rdma == "erdma":
            steps.append(_Step("40-erdma.sh", "setup_erdma", "eRDMA"))
        if p.network.mtu != 1500:
            steps.append(_Step("45-mtu.sh", "setup_mtu", f"MTU {p.network.mtu}"))
        steps.append(_Step("55-git.sh", "setup_git", "git"))
        steps.append(_Step("60-python.sh", "setup_python", "PyTorch"))
        steps.append(_Step("65-oss.sh", "setup_oss", "OSS SDK"))
        return steps

    def node_env_pairs(self) -> list[tuple[str, object]]:
        """``node.env``: what the node keeps for its whole life (user data, first boot only)."""
        p, o, s = self.plan, self.opts, self.plan.storage
        oss = s.oss
        assert oss is not None
        pairs: list[tuple[str, object]] = [
            ("NAME", p.name), ("REGION", p.region), ("NODE_RANK", self.rank),
            ("GPUS_PER_NODE", p.gpus_per_node), ("MASTER_PORT", o.master_port),
            ("RDMA", p.network.rdma), ("REQUIRE_RDMA", _flag(o.require_rdma)),
            ("RDZV_TIMEOUT_SECONDS", o.rdzv_timeout_seconds),
            ("NCCL_CHECK_TIMEOUT_SECONDS", o.nccl_check_timeout_seconds),
            ("OSS_ENDPOINT", oss.internal_endpoint), ("STACK_BUCKET", oss.bucket),
            ("JOB_SETTINGS_URI", f"oss://{oss.bucket}/{oss.job_settings_key}"),
            ("JOB_SETTINGS_TAG", JOB_SETTINGS_TAG), ("INSTALL_REQUIREMENTS", _flag(o.install_requirements)),
            ("CHECKPOINT_SIGNAL", o.checkpoint_signal), ("CHECKPOINT_GRACE_SECONDS", o.checkpoint_grace_seconds),
            ("KILL_AFTER_SECONDS", o.kill_after_seconds), ("CKPT_SYNC_SECONDS", o.ckpt_sync_seconds),
            ("STOP_ON", o.stop_on), ("POWEROFF_FALLBACK", _flag(o.poweroff_fallback)),
            ("VENV", "/opt/trainstack/venv"), ("TORCH_SPEC", o.torch_spec),
            ("PIP_INDEX_URL", o.pip_index_url), ("PIP_TRUSTED_HOST", urlsplit(o.pip_index_url).hostname),
            ("AUTO_INSTALL_DRIVER", _flag(p.image.auto_install_driver)),
            ("AUTO_INSTALL_SCRIPT", o.auto_install_script), ("DRIVER_VERSION", o.driver_version),
            ("CUDA_VERSION", o.cuda_version), ("CUDNN_VERSION", o.cudnn_version),
            ("DRIVER_WAIT_SECONDS", o.driver_wait_seconds), ("DATA_DISK_WAIT_SECONDS", o.data_disk_wait_seconds),
        ]
        for prefix, disk in (("DATA_DISK", s.data_disk), ("CHECKPOINT_DISK", s.checkpoint_disk)):
            if disk:  # found by its exact size at first boot, by its label ever after (it may have grown)
                pairs += [(f"{prefix}_GIB", disk.size_gib), (f"{prefix}_MOUNT", disk.mount_path),
                          (f"{prefix}_LABEL", disk.label)]
        if p.network.rdma == "erdma":
            pairs += [("ERDMA_VERSION", o.erdma_version),
                      ("ERDMA_INSTALLER_URL", ERDMA_INSTALLER_URL.format(version=o.erdma_version))]
        if p.network.mtu != 1500:
            pairs.append(("MTU", p.network.mtu))
        pairs += [("OSS_VENV", OSS_VENV), ("OSS_SDK_SPEC", o.oss_sdk_spec)]
        if p.elastic and self.rank > 0:  # pool nodes share these files: each instance reports under its own id
            pairs.append(("STATUS_PER_INSTANCE", 1))
        return pairs + self.status_env_pairs()

    def status_env_pairs(self) -> list[tuple[str, object]]:
        """What the heartbeat needs for the node's life (docs/status.md): its name and type, where its
        status goes, the program it runs. The budget guard's price and limits change with the
        profile and the catalog: they are job settings (:meth:`guard_env_pairs`)."""
        p = self.plan
        return [
            ("NODE_NAME", self.node_name), ("INSTANCE_TYPE", p.instance_type), ("GPU_MODEL", p.gpu_model),
            ("STATUS_URI", self.status_uri), ("HEARTBEAT_SECONDS", self.opts.heartbeat_seconds),
            ("HEARTBEAT_PROGRAM_URI", program_uri(p)), ("HEARTBEAT_SHA256", program_sha256()),
        ] + ([("NCCL_CHECK_URI", program_uri(p, NCCL_CHECK_KEY)), ("NCCL_CHECK_SHA256", program_sha256(NCCL_CHECK))]
             if needs_nccl_check(p) else [])

    def guard_env_pairs(self) -> list[tuple[str, object]]:
        """The budget guard's inputs (settings.env; the heartbeat takes them at each job start): the
        plan's hourly price (instance hours x price is the spend) and the limits. With
        CHECKPOINT_GRACE_SECONDS as the time to save a checkpoint until the trainer reports one."""
        p = self.plan
        node_hourly = round(p.hourly_cost_cny / p.nodes, 4) if p.hourly_cost_cny is not None else ""
        price = "spot price estimate" if p.spot else "on-demand list price"
        return [
            ("NODE_HOURLY_CNY", node_hourly),
            ("PRICE_SOURCE", f"{price} of {p.instance_type} in {p.region}, catalog {p.catalog_date or 'undated'}"),
            ("MAX_TOTAL_COST_CNY", "" if p.job.max_total_cost_cny is None else p.job.max_total_cost_cny),
            ("DEADLINE_HOURS", "" if p.job.deadline_hours is None else p.job.deadline_hours),
        ]

    def settings_env_pairs(self, check: bool = True) -> list[tuple[str, object]]:
        """``settings.env``: the job's topology and settings (job settings channel, every job start).
        ``check``: refuse a CPFS plan without its mount address (off when only names are needed)."""
        p, s = self.plan, self.plan.storage
        if s.cpfs and not self.cpfs and check:
            raise ValueError("the plan mounts CPFS: pass cpfs_mount_address (the protocol mount target)")
        region_endpoint = f"oss-{p.region}-internal.aliyuncs.com"  # VPC-internal: no egress needed
        oss_uri = ""
        if self.oss_checkpoints and s.oss:
            prefix = s.oss.prefix if s.oss.prefix.endswith("/") else s.oss.prefix + "/"
            oss_uri = f"oss://{s.oss.bucket}/{prefix.lstrip('/')}"
        return [
            ("NNODES", p.nodes), ("NPROC_PER_NODE", self.nproc), ("MASTER_ADDR", self.ips[0]),
            *([("ELASTIC", 1)] if p.elastic else []),
            ("LAUNCHER", self.plan_launcher()),
            ("CHECKPOINT_KIND", s.checkpoint), ("CHECKPOINT_DIR", s.checkpoint_path), ("OSS_CHECKPOINT_URI", oss_uri),
            ("CODE_KIND", self.code.kind), ("CODE_URI", self.code.uri), ("CODE_REF", self.code.ref),
            ("CODE_URI_SHOWN", shown_uri(self.code.uri)), ("CODE_ARCHIVE", self.code.archive),
            ("CODE_OSS_ENDPOINT", region_endpoint),
            ("MAX_RUNTIME_SECONDS",
             math.ceil(p.job.max_runtime_hours * 3600) if p.job.max_runtime_hours else ""),
            ("CPFS_SOURCE", self.cpfs or ""), ("CPFS_MOUNT", s.cpfs.mount_path if s.cpfs else ""),
        ] + self.guard_env_pairs()

    def plan_launcher(self) -> str:
        parsed = parse_launcher(self.plan.job.command)
        return "unknown" if isinstance(parsed, list) else parsed.tool  # unknown: a render refuses it

    def node_env(self) -> str:
        p, pairs = self.plan, self.node_env_pairs()
        return ("# shellcheck shell=bash disable=SC2034\n"
                f"# trainstack node settings for {p.name}, node {self.rank}, rendered from the Plan at creation.\n"
                "# Sourced by the trainstack scripts. Every value is shell-quoted. Job settings: settings.env.\n"
                + _env_lines(pairs))

    def settings_env(self) -> str:
        return ("# shellcheck shell=bash disable=SC2034\n"
                f"# trainstack job settings for {self.plan.name} (the job settings channel, read at every job "
                "start).\n# Sourced by the trainstack scripts after node.env. Every value is shell-quoted.\n"
                + _env_lines(self.settings_env_pairs()))

    def job_env(self) -> str:
        """The trainer's environment and launch command. Sourced only in the subshell that
        starts the trainer (and the NCCL check), after node.env: it cannot change the scripts."""
        launch = self.launch
        text = ("# shellcheck shell=bash disable=SC2034\n"
                f"# trainstack job settings ({launch.tool}): job.env, job.command and the names of job.secrets,\n"
                "# shell-quoted, never evaluated. Secret values are read from KMS at job start, never written.\n")
        user = {**dict(launch.user_env), **self.plan.job.env}
        text += _env_lines(sorted(user.items()), export=True)
        text += "".join(assignment(name, word, export=True) for name, word in launch.env)
        secrets = [lit(f"{name}={ref.kms_secret}") for name, ref in sorted(self.plan.job.secrets.items())]
        return text + bash_array(SECRETS_ARRAY, secrets) + bash_array(LAUNCH_ARRAY, launch.argv)

    def node_setup(self) -> str:
        steps = self.steps()
        fragments = dict.fromkeys(f for s in steps for f in s.fragment.split())  # each once, in order
        body = "".join(_template(f"setup/{f}") for f in fragments)
        main = _fill(_template("setup/99-main.sh"), STEPS="\n".join(f"  {s.function}" for s in steps))
        return _template("setup/00-common.sh") + body + main

    def units(self) -> list[NodeFile]:
        p, o = self.plan, self.opts
        what = ", ".join(s.what for s in self.steps() if s.what != "GPU driver")
        units = [
            ("trainstack-setup.service",
             {"SETUP_WHAT": what, "SETUP_TIMEOUT": o.setup_timeout_seconds}),
            ("trainstack-setup-failed.service", {}),
            ("trainstack-job.service",
             {"NAME": p.name, "RANK": self.rank,
              "STOP_TIMEOUT": o.checkpoint_grace_seconds + o.kill_after_seconds + 30}),
            ("trainstack-ckpt-sync.service", {}),  # idles unless the job settings put checkpoints on OSS
        ]
        if p.spot:
            units.append(("trainstack-spot-watcher.service",
                          {"POLL": f"{o.spot_poll_seconds:g}", "SIGNAL": o.checkpoint_signal}))
        units.append(("trainstack-heartbeat.service", {"SECONDS": o.heartbeat_seconds}))
        return [NodeFile(name, f"/etc/systemd/system/{name}", _fill(_template(f"systemd/{name}"), **values))
                for name, values in units]

    def files(self, channel: bool = True) -> list[NodeFile]:
        """Every file of this node; ``channel=False``: only the user data's (no CPFS address needed)."""
        p = self.plan
        files = [NodeFile("node.env", f"{ETC}/node.env", self.node_env(), "0600")]
        files += self.channel_files() if channel else []
        if p.network.nccl_env:
            bad = [k for k in p.network.nccl_env if not _ENV_NAME.match(k)]
            if bad:
                raise ValueError(f"network.nccl_env names are not shell variable names: {bad}")
            nccl = ("# shellcheck shell=sh\n# NCCL settings for this cluster's network, from the Plan.\n"
                    + _env_lines(sorted(p.network.nccl_env.items()), export=True))
            files += [NodeFile("nccl.env", "/etc/trainstack/nccl.env", nccl),
                      NodeFile("trainstack-nccl.sh", "/etc/profile.d/trainstack-nccl.sh", nccl)]
        files += [
            NodeFile("node-setup.sh", "/usr/local/sbin/trainstack-node-setup", self.node_setup(), "0755",
                     static=True),
            _static("trainstack-launch.sh", "/usr/local/bin/trainstack-launch"),
            _static("trainstack_agent.py", "/usr/local/lib/trainstack/trainstack_agent.py"),
        ]
        if p.spot:
            files.append(_static("spot-watcher.py", "/usr/local/lib/trainstack/spot-watcher.py"))
        return files + self.units()

    def channel_files(self) -> list[NodeFile]:
        """The job settings channel's files for this rank (settings.env and job.env may hold
        credentials in CODE_URI and the command line: root only)."""
        hostfile = "".join(f"{ip}\n" for ip in self.ips)
        files = [
            NodeFile("settings.env", f"{ETC}/settings.env", self.settings_env(), "0600", channel=True),
            NodeFile("job.env", f"{ETC}/job.env", self.job_env(), "0600", channel=True),
            NodeFile("hostfile", f"{ETC}/hostfile", hostfile, channel=True),
        ]
        if self.launch.hostfile is not None:
            files.append(NodeFile("deepspeed-hostfile", DEEPSPEED_HOSTFILE, self.launch.hostfile, channel=True))
        return files

    def runcmd(self) -> list[list[str]]:
        started = ["trainstack-job.service", "trainstack-ckpt-sync.service"]
        if self.plan.spot:
            started.append("trainstack-spot-watcher.service")
        started.append("trainstack-heartbeat.service")
        return [["systemctl", "daemon-reload"],
                ["systemctl", "enable", "trainstack-setup.service", *started],
                ["systemctl", "start", "--no-block", *started]]


def check_job(plan: Plan, options: Optional[BootstrapOptions] = None) -> list[Problem]:
    """What the node bootstrap would refuse about job.command, job.env and job.secrets, found
    without rendering (``trainstack validate`` runs it; the render raises the same problems)."""
    from trainstack.launchers import check_command

    node = _Node(plan, 0, _CPFS_PLACEHOLDER if plan.storage.cpfs else None, options or BootstrapOptions())
    problems = check_command(plan.job.command, node.topology)
    return problems + node.job_problems(None if problems else node.render_launch())


def render_files(plan: Plan, node_rank: int, cpfs_mount_address: Optional[str] = None,
                 options: Optional[BootstrapOptions] = None) -> list[NodeFile]:
    """Every file node ``node_rank`` ends up with, in write order: the user data's and the job
    settings channel's (``NodeFile.channel``)."""
    return _Node(plan, node_rank, cpfs_mount_address, options or BootstrapOptions()).files()


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
        files = {f.name: f.content for f in _Node(plan, rank, cpfs_mount_address, opts).channel_files()}
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
    """One rendered file by name (``node-setup.sh``, ``trainstack-launch.sh``, ``spot-watcher.py``,
    ``node.env``, ``trainstack-job.service``, ...); KeyError when this plan does not have it."""
    node = _Node(plan, node_rank, cpfs_mount_address, options or BootstrapOptions())
    for f in node.files(channel=name in CHANNEL_FILES):
        if f.name == name:
            return f.content
    raise KeyError(f"{name!r} is not part of this plan's bootstrap")


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # libyaml when present: 6x faster
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def _write_file(f: NodeFile) -> dict[str, str]:
    """A cloud-init write_files entry. The static scripts travel gzip+base64 (mtime 0, so the
    bytes stay deterministic) to fit ECS's 32 KB, and so does the hostfile of a large cluster
    (one line per node); the other plan-specific settings stay readable."""
    entry = {"path": f.path, "permissions": f.permissions}  # owner: cloud-init's default, root:root
    if f.static or f.packed:
        return {**entry, "encoding": "gz+b64", "content": _gz_b64(f.content)}
    return {**entry, "content": f.content}


@functools.lru_cache(maxsize=64)
def _gz_b64(content: str) -> str:
    """Packed once per process: every node of a cluster carries the same static scripts."""
    return base64.b64encode(gzip.compress(content.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


def render_user_data(plan: Plan, node_rank: int, cpfs_mount_address: Optional[str] = None,
                     options: Optional[BootstrapOptions] = None) -> str:
    """The complete ``#cloud-config`` document for ECS UserData of node ``node_rank``.

    Only what a node keeps for life: nothing here depends on the job settings, the node count or the
    CPFS address (``cpfs_mount_address`` is accepted for symmetry and only checked), so the
    instances can ignore later changes of it."""
    node = _Node(plan, node_rank, cpfs_mount_address, options or BootstrapOptions())
    node.launch  # refuses a job.command that cannot run on this plan, as the channel's render would
    doc = {"write_files": [_write_file(f) for f in node.files(channel=False)], "runcmd": node.runcmd()}
    text = (f"#cloud-config\n# trainstack bootstrap: {plan.name}, node {node_rank} "
            "(rendered from the Plan at creation; job settings come from the job settings channel)\n"
            + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=1_000_000, allow_unicode=True))
    if len(text.encode("utf-8")) > USER_DATA_LIMIT:
        raise ValueError(f"user data is {len(text.encode('utf-8'))} bytes; ECS accepts {USER_DATA_LIMIT}: shorten "
                         "job.env and job.command (put settings in a config file shipped with job.code_uri)")
    return text
