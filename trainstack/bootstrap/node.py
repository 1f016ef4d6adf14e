"""One node's inputs, validated once: what its files say, as (name, value) pairs.

Everything a node's files are made of comes from here (trainstack.bootstrap.files writes them):
``node.env`` (what the node keeps for life: user data, first boot only), ``settings.env`` (the job
settings channel, every job start), the launch of job.command. Every value from the Plan or a
profile is shell-quoted by the one quoting path of :mod:`trainstack.launchers.words` when written;
this module only decides the values.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import replace
from typing import Optional
from urllib.parse import urlsplit

from trainstack.errors import Problem
from trainstack.launchers import Launch, LaunchError, render_launch, topology_from_plan
from trainstack.launchers.command import parse as parse_launcher
from trainstack.plan import Plan

from .alerts import alerts_env_pairs
from .heartbeat import nproc_per_node, status_uri
from ..tags import SCALE_RULE_TAG
from .locations import classify_code_uri, cpfs_source, shown_uri
from .options import BootstrapOptions
from .programs import program_set, programs_uri
from .reserved import LAUNCH_ARRAY, SECRETS_ARRAY, reserved_problems  # noqa: F401 (files.py)


#: node 0's run record under its status prefix; the settings generations under job/ (trainstack_pool.py)
RUN_RECORD = "run.json"
GENERATIONS_DIR = "settings/"

ERDMA_INSTALLER_URL = "http://mirrors.cloud.aliyuncs.com/erdma/erdma_installer-{version}.tar.gz"
OSS_VENV = "/opt/trainstack/oss-venv"
#: The hostfile and MASTER_ADDR of a self-healing pool's single node (its IP is known only at boot)
POOL_NODE_ADDRESS = "127.0.0.1"
ETC = "/etc/trainstack"
DEEPSPEED_HOSTFILE = f"{ETC}/deepspeed-hostfile"
#: The instance tag that carries the SHA-256 of the job settings document (the node trusts it: only
#: the deployer can tag instances; the node role may read tags, never write them).
JOB_SETTINGS_TAG = "trainstack:job-settings"

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _flag(value: bool) -> int:
    return 1 if value else 0


class Node:
    """Everything one node's files are made of, validated once."""

    def __init__(self, plan: Plan, rank: int, cpfs_address: Optional[str], opts: BootstrapOptions):
        if plan.target != "ecs":
            raise ValueError(f"the node bootstrap is for ECS nodes; this plan targets {plan.target!r}")
        if not 0 <= rank < plan.nodes:
            raise ValueError(f"node_rank {rank} is outside 0..{plan.nodes - 1}")
        if not _NAME.fullmatch(plan.name):
            raise ValueError(f"plan name {plan.name!r} is not DNS-safe")
        if bad := [k for k in (*plan.job.env, *plan.job.secrets) if not ENV_NAME.fullmatch(k)]:
            raise ValueError(f"job.env names are not shell variable names: {bad}")
        storage = plan.storage
        if storage.oss is None:
            raise ValueError("an ECS plan needs its stack bucket (the job settings channel lives there)")
        self.pool_node = plan.spot_pool is not None and not (plan.elastic and rank == 0)
        if self.pool_node:
            # a self-healing pool node is replaced by ESS with a new private IP, and ESS health checks
            # replace a stopped node: it never stops or powers off itself; where stop_on says the job's end
            # stops billing, it executes the pool's scale-to-0 rule instead (trainstack-launch stop_cluster;
            # docs/self-healing.md). A 1-node job rendezvous on loopback; a multi-node one through torchrun
            # elastic on node 0 (the anchor, a plain node outside the pool).
            opts = replace(opts, poweroff_fallback=False)
        self.plan, self.rank, self.opts = plan, rank, opts
        self.code = classify_code_uri(plan.job.code_uri)
        self.cpfs = cpfs_source(cpfs_address) if storage.cpfs and cpfs_address else None
        if plan.elastic:  # only node 0's address is known: ESS picks the others' (the hostfile names node 0)
            self.ips = plan.node_private_ips()[:1]
        else:
            self.ips = [POOL_NODE_ADDRESS] if plan.spot_pool is not None else plan.node_private_ips()
        self.nproc = nproc_per_node(plan)
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
        """job.env, job.secrets and the command's NAME=value words that would override what trainstack
        exports to the trainer (launcher topology, TRAINSTACK_*, the launch arrays) or the shell's."""
        names = {"job.env": list(self.plan.job.env), "job.secrets": list(self.plan.job.secrets)}
        if launch is not None:
            names["job.command"] = [k for k, _ in launch.user_env]
        return reserved_problems(names)

    def setup_steps(self) -> list[tuple[str, str]]:
        """(function, what) of each step of the setup at every boot (``SETUP_STEPS``), after the node
        programs (trainstack-programs.service, with the OSS SDK). Everything a later job-settings change
        may need (git, an NFS client) is installed on every node, so a running node can follow it."""
        p = self.plan
        return [*([("setup_data_disk", "data disk")] if p.storage.data_disk else []),
                *([("setup_dataset_copy", "dataset copy (background)")] if p.storage.dataset_dir else []),
                *([("setup_checkpoint_disk", "checkpoint disk")] if p.storage.checkpoint_disk else []),
                ("setup_nfs_client", "NFS client"), ("setup_gpu_driver", "GPU driver"),
                *([("setup_erdma", "eRDMA")] if p.network.rdma == "erdma" else []),
                *([("setup_mtu", f"MTU {p.network.mtu}")] if p.network.mtu != 1500 else []),
                ("setup_git", "git"), ("setup_python", "PyTorch")]

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
        if p.image.provides:  # only then: a stack without a prepared image gets no new node.env line
            pairs.append(("IMAGE_PROVIDES", " ".join(p.image.provides)))
        for prefix, disk in (("DATA_DISK", s.data_disk), ("CHECKPOINT_DISK", s.checkpoint_disk)):
            if disk:  # found by its exact size at first boot, by its label ever after (it may have grown)
                pairs += [(f"{prefix}_GIB", disk.size_gib), (f"{prefix}_MOUNT", disk.mount_path),
                          (f"{prefix}_LABEL", disk.label)]
        if s.dataset_dir:  # only then: a stack that streams its dataset gets no new node.env line
            pairs += [("DATASET_SYNC_URI", s.dataset_uri), ("DATASET_DIR", s.dataset_dir)]
        if p.network.rdma == "erdma":
            pairs += [("ERDMA_VERSION", o.erdma_version),
                      ("ERDMA_INSTALLER_URL", ERDMA_INSTALLER_URL.format(version=o.erdma_version))]
        if p.network.mtu != 1500:
            pairs.append(("MTU", p.network.mtu))
        pairs += [("OSS_VENV", OSS_VENV), ("OSS_SDK_SPEC", o.oss_sdk_spec)]
        # the node programs: where they are, and the set this node was created with (trainstack.bootstrap.programs)
        pairs += [("PROGRAMS_URI", programs_uri(p)), ("BOOT_PROGRAMS_SHA256", program_set().digest),
                  ("SETUP_STEPS", " ".join(function for function, _ in self.setup_steps()))]
        if p.elastic and self.rank > 0:  # pool nodes share these files: each instance reports under its own id
            pairs.append(("STATUS_PER_INSTANCE", 1))
        return pairs + self.pool_env_pairs() + self.status_env_pairs()

    def pool_env_pairs(self) -> list[tuple[str, object]]:
        """A self-healing node's part in the cluster's state machine (trainstack_pool.py): its role
        (``single``: a 1-node pool; ``anchor``: node 0; ``pool``), the scale-to-0 rule's tag, and on a
        multi-node plan the run record, node 0's and the pool's status places and the generations."""
        p = self.plan
        if p.spot_pool is None:
            return []
        role = "single" if not p.elastic else "anchor" if self.rank == 0 else "pool"
        pairs: list[tuple[str, object]] = [("POOL_ROLE", role), ("SCALE_RULE_TAG", SCALE_RULE_TAG)]
        if p.elastic:
            oss = p.storage.oss
            assert oss is not None
            node0 = status_uri(p, p.node_names()[0])
            pairs += [("RUN_URI", f"{node0}{RUN_RECORD}"), ("NODE0_STATUS_URI", node0),
                      ("POOL_STATUS_URI", status_uri(p, p.pool_node_name())),
                      ("GENERATIONS_URI", f"oss://{oss.bucket}/{oss.job_prefix}{GENERATIONS_DIR}"),
                      ("NODE0_LOSS_SECONDS", p.spot_pool.join_timeout_seconds), ("POOL_SEATS", p.nodes - 1)]
        return pairs

    def status_env_pairs(self) -> list[tuple[str, object]]:
        """What the heartbeat needs for the node's life (docs/status.md): its name and type, where its
        status goes. The budget guard's price and limits change with the profile and the catalog:
        they are job settings (:meth:`guard_env_pairs`)."""
        p = self.plan
        return [("NODE_NAME", self.node_name), ("INSTANCE_TYPE", p.instance_type), ("GPU_MODEL", p.gpu_model),
                ("STATUS_URI", self.status_uri), ("HEARTBEAT_SECONDS", self.opts.heartbeat_seconds)]

    def guard_env_pairs(self) -> list[tuple[str, object]]:
        """The budget guard's inputs (settings.env; the heartbeat takes them at each job start): each
        node's share of the plan's all-in hourly price (nodes, disks, CPFS, bucket, NAT: instance hours x
        share is the spend, the figure ``max_total_cost`` was checked against) and the limits. With
        CHECKPOINT_GRACE_SECONDS as the time to save a checkpoint until the trainer reports one."""
        p = self.plan
        node_hourly = round(p.hourly_cost_cny / p.nodes, 4) if p.hourly_cost_cny is not None else ""
        price = "spot price estimate" if p.spot else "on-demand list price"
        return [
            ("NODE_HOURLY_CNY", node_hourly),
            ("PRICE_SOURCE", f"all-in share per node: {price} of {p.instance_type} in {p.region} with the plan's "
                             f"storage and network, catalog {p.catalog_date or 'undated'}"),
            ("MAX_TOTAL_COST_CNY", "" if p.job.max_total_cost_cny is None else p.job.max_total_cost_cny),
            ("DEADLINE_HOURS", "" if p.job.deadline_hours is None else p.job.deadline_hours),
        ]

    def settings_env_pairs(self, check: bool = True) -> list[tuple[str, object]]:
        """``settings.env``: the job's topology and settings (job settings channel, every job start),
        and the node programs it runs (their set's sha256: trainstack.bootstrap.programs).
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
            ("PROGRAMS_SHA256", program_set().digest),
        ] + self.guard_env_pairs() + alerts_env_pairs(p)

    def plan_launcher(self) -> str:
        parsed = parse_launcher(self.plan.job.command)
        return "unknown" if isinstance(parsed, list) else parsed.tool  # unknown: a render refuses it

