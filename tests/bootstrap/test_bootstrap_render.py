"""What the bootstrap renders for each kind of plan (content per plan, determinism, format): the user
data (node.env and the scripts: first boot only) and the job settings channel (settings.env, job.env,
hostfile: one document for every rank, read at every job start)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import re
import subprocess
import tarfile

import pytest
import yaml
from plan_factory import dlc_plan, multi_node_erdma_plan, single_gpu_lora_plan, spot_plan

from trainstack.bootstrap.programs import LIB, PROGRAMS
from trainstack.bootstrap import (
    USER_DATA_LIMIT, BootstrapOptions, render_files, render_script, render_user_data,
)
from trainstack.bootstrap.cloud_config import BOOT_ARCHIVE
from trainstack.bootstrap.render import CHANNEL_FILES, JOB_SETTINGS_KIND, render_job_settings
from trainstack.plan import JobPlan, StoragePlan

CPFS = "cpfs-0a1b2c.cn-shenzhen.cpfs.aliyuncs.com"


def env_of(text: str) -> dict[str, str]:
    """The variables a rendered env file defines, as bash sees them after sourcing it."""
    out = subprocess.run(["bash", "-c", 'set -a; source /dev/stdin; set +a; env -0'], input=text,
                         capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"}).stdout
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


def written_files(user_data: str) -> dict[str, str]:
    """path -> content of every file the user data writes: each write_files entry as cloud-init
    decodes it, and what the first runcmd unpacks from the boot archive (which is then not listed)."""
    doc = yaml.safe_load(user_data)
    out = {}
    for entry in doc["write_files"]:
        content = entry["content"]
        if entry.get("encoding") == "b64" and entry["path"] == BOOT_ARCHIVE:
            assert doc["runcmd"][0] == ["tar", "-xzf", BOOT_ARCHIVE, "-C", "/"]
            with tarfile.open(fileobj=io.BytesIO(base64.b64decode(content)), mode="r:gz") as tar:
                for member in tar.getmembers():
                    assert member.isfile() and (member.uid, member.gid, member.mtime) == (0, 0, 0), member.name
                    out["/" + member.name] = tar.extractfile(member).read().decode()
            continue
        out[entry["path"]] = content
    return out


def test_single_gpu_plan_has_no_rdma_and_no_nccl_check():
    plan = single_gpu_lora_plan()
    user_data = render_user_data(plan, 0)
    files = written_files(user_data)
    everything = "\n".join(files.values()).lower()
    assert "erdma" not in everything and "nccl_ib" not in everything
    assert "/etc/trainstack/nccl.env" not in files and "/usr/local/lib/trainstack/nccl_check.py" not in files
    env = env_of(files["/etc/trainstack/node.env"])
    assert env["NODE_RANK"] == "0" and "NNODES" not in env and "MASTER_ADDR" not in env
    assert env["RDMA"] == "none" and "MTU" not in env and "ERDMA_INSTALLER_URL" not in env
    settings = env_of(render_script(plan, "settings.env"))
    assert (settings["NNODES"], settings["NPROC_PER_NODE"]) == ("1", "1")
    assert "/etc/trainstack/hostfile" not in files and render_script(plan, "hostfile") == "10.0.0.10\n"
    assert env["SETUP_STEPS"].split() == ["setup_data_disk", "setup_nfs_client", "setup_gpu_driver", "setup_git",
                                          "setup_python"]


def test_multi_node_erdma_plan_installs_erdma_sets_nccl_env_mtu_and_hostfile():
    plan = multi_node_erdma_plan(nodes=4)
    files = written_files(render_user_data(plan, 2))
    env = env_of(files["/etc/trainstack/node.env"])
    assert env["ERDMA_INSTALLER_URL"] == "http://mirrors.cloud.aliyuncs.com/erdma/erdma_installer-1.4.5.tar.gz"
    # ebmgn7ex: no sourced jumbo-frame support, so the eRDMA MTU without jumbo frames [ERDMA-GPU]
    assert env["MTU"] == "1400" and env["RDMA"] == "erdma" and not plan.network.jumbo_frames
    assert env["NODE_RANK"] == "2" and env["MASTER_PORT"] == "29500"
    settings = env_of(render_script(plan, "settings.env", 2, CPFS))
    assert (settings["NNODES"], settings["NPROC_PER_NODE"], settings["MASTER_ADDR"]) == ("4", "8", "10.0.0.10")
    assert render_script(plan, "hostfile", 2, CPFS).splitlines() == ["10.0.0.10", "10.0.0.11", "10.0.0.12",
                                                                     "10.0.0.13"]
    assert env["SETUP_STEPS"].split() == ["setup_data_disk", "setup_nfs_client", "setup_gpu_driver", "setup_erdma",
                                          "setup_mtu", "setup_git", "setup_python"]
    setup = render_script(plan, "trainstack-setup.sh", 2)  # a node program: the steps node.env names
    assert "./install.sh --batch" in setup and "ibv_devices" in setup and 'for step in $SETUP_STEPS' in setup
    nccl = env_of(files["/etc/trainstack/nccl.env"])
    assert nccl["NCCL_IB_HCA"] == "erdma" and nccl["NCCL_IB_GID_INDEX"] == "1"
    assert {k: nccl[k] for k in plan.network.nccl_env} == plan.network.nccl_env
    assert files["/etc/profile.d/trainstack-nccl.sh"].endswith(". /etc/trainstack/nccl.env\n"), "login shells get them"
    # the NCCL check is a node program: in the stack bucket, not in the user data
    assert f"{LIB}/nccl_check.py" not in files and "nccl_check.py" in PROGRAMS
    assert not {"NCCL_CHECK_URI", "NCCL_CHECK_SHA256", "HEARTBEAT_PROGRAM_URI", "HEARTBEAT_SHA256"} & set(env)


def test_every_rank_agrees_on_the_rendezvous_master():
    plan = multi_node_erdma_plan(nodes=3)
    masters = {env_of(render_script(plan, "settings.env", rank, CPFS))["MASTER_ADDR"] for rank in range(3)}
    assert masters == {plan.node_private_ips()[0]}


def test_mtu_is_left_alone_unless_the_plan_asks_for_jumbo_frames():
    plan = multi_node_erdma_plan()
    plain = plan.model_copy(update={"network": plan.network.model_copy(update={"mtu": 1500})})
    assert "MTU" not in env_of(render_script(plain, "node.env", 0, CPFS))
    assert "setup_mtu" not in env_of(render_script(plain, "node.env", 0, CPFS))["SETUP_STEPS"]


def test_cpfs_is_mounted_from_the_protocol_mount_target_named_by_the_job_settings():
    plan = multi_node_erdma_plan()
    env = env_of(render_script(plan, "settings.env", 0, CPFS))
    assert env["CPFS_SOURCE"] == f"{CPFS}:/share" and env["CPFS_MOUNT"] == "/mnt/cpfs"
    env = env_of(render_script(plan, "settings.env", 0, f"{CPFS}:/share/job1/"))
    assert env["CPFS_SOURCE"] == f"{CPFS}:/share/job1/"
    assert CPFS not in render_user_data(plan, 0)  # the address never reaches user data
    with pytest.raises(ValueError, match="cpfs_mount_address"):
        render_job_settings(plan)
    with pytest.raises(ValueError, match="cpfs_mount_address"):
        render_job_settings(plan, cpfs_mount_address="host; reboot")
    launch = render_script(plan, "trainstack-launch.sh")
    assert "mount_cpfs ||" in launch and 'mount -t nfs -o "$CPFS_OPTIONS" "$CPFS_SOURCE"' in launch


def test_spot_plan_runs_the_watcher_and_on_demand_plans_do_not():
    user_data = yaml.safe_load(render_user_data(spot_plan(), 0))
    assert "/etc/systemd/system/trainstack-spot-watcher.service" in written_files(render_user_data(spot_plan(), 0))
    assert "Requires=trainstack-programs.service" in render_script(spot_plan(), "trainstack-spot-watcher.service")
    assert ["systemctl", "start", "--no-block", "trainstack-job.service", "trainstack-ckpt-sync.service",
            "trainstack-spot-watcher.service", "trainstack-heartbeat.service"] in user_data["runcmd"]
    unit = render_script(spot_plan(), "trainstack-spot-watcher.service")
    assert "TRAINSTACK_SPOT_POLL_SECONDS=5" in unit and "TRAINSTACK_CHECKPOINT_SIGNAL=USR1" in unit
    for plan, kw in ((single_gpu_lora_plan(), {}), (multi_node_erdma_plan(), {"cpfs_mount_address": CPFS})):
        text = render_user_data(plan, 0, **kw)
        assert "spot-watcher" not in text and "spot" not in " ".join(map(str, yaml.safe_load(text)["runcmd"]))


def test_every_node_runs_the_sync_service_which_follows_the_job_settings():
    """Checkpoints may move to OSS (or away) with a later profile change: the sync service runs on
    every node and reads the current settings each round (OSS_CHECKPOINT_URI empty: it idles)."""
    env = env_of(render_script(single_gpu_lora_plan(), "settings.env"))
    assert env["OSS_CHECKPOINT_URI"] == f"oss://{single_gpu_lora_plan().storage.oss.bucket}/checkpoints/"
    assert env_of(render_script(single_gpu_lora_plan(), "node.env"))["OSS_ENDPOINT"] == \
        "oss-cn-shenzhen-internal.aliyuncs.com"
    assert "  setup_oss\n" in render_script(single_gpu_lora_plan(), "trainstack-boot.sh")
    assert env_of(render_script(multi_node_erdma_plan(), "settings.env", 0, CPFS))["OSS_CHECKPOINT_URI"] == ""
    names = {f.name for f in render_files(multi_node_erdma_plan(), 0, CPFS)}
    assert "trainstack-ckpt-sync.service" in names
    unit = render_script(single_gpu_lora_plan(), "trainstack-ckpt-sync.service")
    assert f"ExecStart=/bin/bash {LIB}/trainstack-launch.sh --ckpt-sync" in unit
    assert "load_settings || true" in render_script(single_gpu_lora_plan(), "trainstack-launch.sh")


def urls_in(text: str) -> set[str]:
    return set(re.findall(r"https?://[^\s\"')]+", text))


def test_oss_needs_no_internet_egress():
    """The default sample keeps code and checkpoints on OSS and has no NAT: everything a node
    fetches comes from inside the VPC (PyPI mirror, internal OSS endpoint, metadata, ECS VPC API)."""
    plan = single_gpu_lora_plan(job=JobPlan(command="python train.py", method="lora", precision="bf16",
                                            code_uri="oss://code-bucket/jobs/code.tar.gz"))
    files = {f.path: f.content for f in render_files(plan, 0)}  # user data, node programs, job settings
    assert written_files(render_user_data(plan, 0)).items() <= files.items()
    everything = "\n".join(files.values())
    assert "ossutil" not in everything and "alicdn" not in everything and "gosspublic" not in everything
    assert urls_in(everything) == {"http://mirrors.cloud.aliyuncs.com/pypi/simple/", "http://100.100.100.200",
                                   "https://ecs-vpc.%s.aliyuncs.com", "https://kms-vpc.%s.aliyuncs.com",
                                   "https://ess-vpc.%s.aliyuncs.com"}  # the pool's scale-to-0 (trainstack_pool.py)
    env = env_of(files["/etc/trainstack/node.env"])
    assert env["OSS_SDK_SPEC"] == "alibabacloud-oss-v2==1.4.1"
    assert env["OSS_VENV"] == "/opt/trainstack/oss-venv"
    assert env["PIP_INDEX_URL"] == "http://mirrors.cloud.aliyuncs.com/pypi/simple/"
    settings = env_of(files["/etc/trainstack/settings.env"])
    assert settings["CODE_OSS_ENDPOINT"] == env["OSS_ENDPOINT"] == "oss-cn-shenzhen-internal.aliyuncs.com"
    assert settings["CODE_URI"] == "oss://code-bucket/jobs/code.tar.gz"
    assert settings["OSS_CHECKPOINT_URI"] == f"oss://{single_gpu_lora_plan().storage.oss.bucket}/checkpoints/"
    assert env["JOB_SETTINGS_URI"] == f"oss://{plan.storage.oss.bucket}/job/settings.json"
    boot = files["/usr/local/sbin/trainstack-boot"]  # the OSS SDK before the programs, which need it
    assert boot.index("  setup_oss\n") < boot.index("  setup_programs\n")
    assert '"$OSS_VENV/bin/pip" install --quiet --index-url "$PIP_INDEX_URL"' in boot
    assert "OSS SDK" in files["/etc/systemd/system/trainstack-programs.service"]


def test_every_node_installs_the_oss_sdk_the_job_settings_channel_and_the_heartbeat_need():
    plan = single_gpu_lora_plan(profile={"storage": {"checkpoint": "essd"}, "job": {"code_uri": None}})
    names = {f.name for f in render_files(plan, 0)}
    assert "trainstack-heartbeat.service" in names
    env = env_of(render_script(plan, "node.env"))
    assert env["OSS_SDK_SPEC"] == "alibabacloud-oss-v2==1.4.1"
    assert "  setup_oss\n" in render_script(plan, "trainstack-boot.sh")
    assert "OSS_CHECKPOINT_URI" not in env
    assert env["STATUS_URI"] == f"oss://{plan.storage.oss.bucket}/status/{plan.name}-node-0/"
    assert env["DATA_DISK_WAIT_SECONDS"] == "900"
    assert (env["DATA_DISK_LABEL"], env["CHECKPOINT_DISK_LABEL"]) == ("trainstack-data", "trainstack-ckpt")
    assert env["CHECKPOINT_DISK_MOUNT"] == "/mnt/checkpoints" == plan.storage.checkpoint_path
    options = BootstrapOptions(data_disk_wait_seconds=60, oss_sdk_spec="alibabacloud-oss-v2==1.5.0")
    assert env_of(render_script(plan, "node.env", options=options))["DATA_DISK_WAIT_SECONDS"] == "60"
    assert env_of(render_script(single_gpu_lora_plan(), "node.env", options=options))["OSS_SDK_SPEC"] == \
        "alibabacloud-oss-v2==1.5.0"


def test_driver_auto_install_follows_the_image_plan():
    plan = single_gpu_lora_plan()
    assert env_of(render_script(plan, "node.env"))["AUTO_INSTALL_DRIVER"] == "1"
    baked = plan.model_copy(update={"image": plan.image.model_copy(update={"auto_install_driver": False})})
    env = env_of(render_script(baked, "node.env"))
    assert env["AUTO_INSTALL_DRIVER"] == "0"
    setup = render_script(plan, "trainstack-setup.sh")
    assert "ALL INSTALL OK" in setup and "/root/auto_install/auto_install.log" in setup
    assert "/opsx/ecs/linux/binary/script/" in setup and "nvidia-smi" in setup


def test_job_settings_and_max_runtime():
    plan = single_gpu_lora_plan(job=JobPlan(command="torchrun --nproc-per-node 1 --max-restarts 3 train.py --lr 1e-4",
                                            method="lora", precision="bf16", max_runtime_hours=1.5,
                                            env={"HF_HOME": "/mnt/data/hf"}))
    env = env_of(render_script(plan, "settings.env"))
    assert env["MAX_RUNTIME_SECONDS"] == str(math.ceil(1.5 * 3600)) and env["LAUNCHER"] == "torchrun"
    job = render_script(plan, "job.env")
    assert ("LAUNCH_ARGV=(torchrun --nnodes 1 --nproc-per-node 1 --node-rank 0 --master-addr 10.0.0.10 "
            "--master-port 29500 --rdzv-conf timeout=1800 --max-restarts 3 train.py --lr 1e-4)") in job
    assert "nproc" not in "".join(line for line in job.splitlines() if line.startswith("#"))  # no comment echoes it
    assert env_of(job)["HF_HOME"] == "/mnt/data/hf"
    assert env_of(render_script(single_gpu_lora_plan(), "settings.env"))["MAX_RUNTIME_SECONDS"] == ""


def test_nproc_per_node_defaults_to_the_gpus_of_a_node():
    plan = spot_plan(job=JobPlan(command="python train.py", method="full", precision="bf16"))
    assert env_of(render_script(plan, "settings.env"))["NPROC_PER_NODE"] == "4"


def test_user_data_is_a_deterministic_cloud_config_within_the_ecs_limit():
    for plan, kw in ((single_gpu_lora_plan(), {}), (spot_plan(), {}),
                     (multi_node_erdma_plan(nodes=8), {"cpfs_mount_address": CPFS})):
        first = render_user_data(plan, 0)
        assert first == render_user_data(plan, 0)
        assert first.startswith("#cloud-config\n")
        assert len(first.encode()) <= USER_DATA_LIMIT
        files = written_files(first)
        assert files == {f.path: f.content for f in render_files(plan, 0, **kw) if f.in_user_data}
        runcmd = yaml.safe_load(first)["runcmd"]
        assert runcmd[1] == ["systemctl", "daemon-reload"]
        assert {"trainstack-programs.service", "trainstack-setup.service"} <= set(runcmd[2])


def test_user_data_does_not_grow_with_the_cluster_and_the_largest_plan_fits():
    """Nothing in the user data depends on the node count (the hostfile and the topology travel
    through the job settings channel), so adding a node changes no running node's user data; the
    largest plan the bootstrap serves (512 spot nodes with eRDMA, code and checkpoints on OSS, a
    data disk, a deadline and job env) stays within ECS's limit."""
    small = render_user_data(multi_node_erdma_plan(nodes=4), 0)
    assert small == render_user_data(multi_node_erdma_plan(nodes=5), 0)
    plan = multi_node_erdma_plan(nodes=512, profile={
        "resources": {"spot": "require"}, "storage": {"checkpoint": "oss"},
        "job": {"command": "torchrun train.py --zero 3 --config conf/70b.yaml", "max_runtime_hours": 24,
                "env": {"WANDB_MODE": "offline", "HF_HOME": "/mnt/data/hf"}}})
    assert plan.spot and plan.nodes == 512 and plan.network.rdma == "erdma"
    text = render_user_data(plan, 511)
    assert "/etc/trainstack/hostfile" not in written_files(text)
    assert len(text.encode()) <= USER_DATA_LIMIT - 768, f"{len(text.encode())} bytes leave too little room"
    doc = json.loads(render_job_settings(plan).document)
    assert doc["shared"]["hostfile"].splitlines() == plan.node_private_ips() and len(doc["ranks"]) == 512


def test_ranks_differ_only_in_their_rank():
    plan = multi_node_erdma_plan(nodes=3)
    a, b = (written_files(render_user_data(plan, r)) for r in (0, 1))
    differing = {path for path in a if a[path] != b[path]}
    assert differing == {"/etc/trainstack/node.env", "/etc/systemd/system/trainstack-job.service"}
    doc = json.loads(render_job_settings(plan, CPFS).document)
    # job.env holds the launch command, which carries the node's rank; the rest is shared
    assert set(doc["shared"]) == {"settings.env", "hostfile"} and all(set(r) == {"job.env"} for r in doc["ranks"])
    assert doc["ranks"][0]["job.env"] != doc["ranks"][1]["job.env"]


def test_the_job_settings_document_is_deterministic_and_its_digest_is_its_sha256():
    plan = multi_node_erdma_plan(nodes=3)
    one, two = render_job_settings(plan, CPFS), render_job_settings(plan, CPFS)
    assert one == two and one.digest == hashlib.sha256(one.document.encode()).hexdigest()
    doc = json.loads(one.document)
    assert (doc["kind"], doc["schema_version"], doc["nodes"]) == (JOB_SETTINGS_KIND, 1, 3)
    files = {**doc["shared"], **doc["ranks"][2]}
    assert set(files) <= set(CHANNEL_FILES)
    assert files == {f.name: f.content for f in render_files(plan, 2, CPFS) if f.channel}
    changed = render_job_settings(multi_node_erdma_plan(nodes=3, profile={"job": {"env": {"X": "1"}}}), CPFS)
    assert changed.digest != one.digest


def test_options_change_versions_and_are_validated():
    plan = multi_node_erdma_plan()
    env = env_of(render_script(plan, "node.env", 0, CPFS, BootstrapOptions(erdma_version="1.5.7")))
    assert env["ERDMA_INSTALLER_URL"].endswith("/erdma_installer-1.5.7.tar.gz")
    for bad in ({"erdma_version": "1.4.5; reboot"}, {"checkpoint_signal": "TERM"}, {"stop_on": "sometimes"},
                {"master_port": 80}, {"pip_index_url": "file:///x"}, {"spot_poll_seconds": 300},
                {"checkpoint_grace_seconds": 0}, {"data_disk_wait_seconds": 0},
                {"oss_sdk_spec": "alibabacloud-oss-v2"}, {"oss_sdk_spec": "alibabacloud-oss-v2>=1.4"},
                {"oss_sdk_spec": "alibabacloud-oss-v2==1.4.1; reboot"}):
        with pytest.raises(ValueError):
            BootstrapOptions(**bad)


def test_plans_the_bootstrap_cannot_serve_are_refused():
    with pytest.raises(ValueError, match="ECS nodes"):
        render_user_data(dlc_plan(), 0)
    with pytest.raises(ValueError, match="node_rank"):
        render_user_data(single_gpu_lora_plan(), 1)
    no_bucket = single_gpu_lora_plan(storage=StoragePlan(checkpoint="oss", checkpoint_path="/mnt/c"))
    with pytest.raises(ValueError, match="stack bucket"):
        render_user_data(no_bucket, 0)
    with pytest.raises(KeyError):
        render_script(single_gpu_lora_plan(), "spot-watcher.py")


def test_user_data_over_the_ecs_limit_is_refused_by_the_render_and_the_rule_book():
    """What can still grow in user data is the node's own settings (node.env, the network's NCCL
    settings): over ECS's limit the render refuses, and so does the rule book `plan` and `validate` run."""
    from trainstack.rules import check_plan, plan_problems
    from trainstack.errors import InputError

    plan = multi_node_erdma_plan()
    long = plan.model_copy(update={"network": plan.network.model_copy(
        update={"nccl_env": {**plan.network.nccl_env, "NCCL_SOCKET_IFNAME": "eth0," * 5000}})})
    with pytest.raises(ValueError, match=f"ECS accepts {USER_DATA_LIMIT}"):
        render_user_data(long, 0)
    problems = [p.message for p in plan_problems(long) if "ECS accepts" in p.message]
    assert [m.split(":")[0] for m in problems] == [f"bootstrap of {plan.name} node {r}" for r in (0, 2)]
    with pytest.raises(InputError, match="ECS accepts"):
        check_plan(long)
