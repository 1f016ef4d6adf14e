"""The disk steps of the rendered node setup, run for real in bash against stub disk tools:
they wait (bounded) for a disk attached after boot, find a disk by its label once it has one (it
may have grown), format only a disk that blkid positively reports as empty, never take a disk
that carries another trainstack label, and never reformat data."""

from __future__ import annotations

import subprocess

import pytest
from plan_factory import single_gpu_lora_plan
from shell_stubs import stub_commands

from trainstack.bootstrap import BootstrapOptions, render_script
from trainstack.plan import DataDiskPlan, OssPlan, StoragePlan

GIB = 2**30

STUBS = {
    # system disk, a local NVMe disk of another size, then the 200 GiB ESSD data disk, which is
    # attached (listed) from the FAKE_ATTACH_AFTER-th call on
    "lsblk": f"""
n=$(($(cat "$FAKE_DIR/lsblk-calls" 2>/dev/null || echo 0) + 1)); echo "$n" >"$FAKE_DIR/lsblk-calls"
printf "/dev/vda {40 * GIB} disk\\n/dev/nvme0n1 {300 * GIB} disk\\n"
[ "$n" -lt "${{FAKE_ATTACH_AFTER:-1}}" ] || printf "/dev/vdb {200 * GIB} disk\\n"
""",
    "blkid": """
fs=${FAKE_FSTYPE-}; [ -f "$FAKE_DIR/formatted" ] && fs=ext4
echo "blkid $*" >>"$FAKE_DIR/calls"
case " $* " in
  *" -L "*) [ -n "${FAKE_LABELLED-}" ] && { echo "$FAKE_LABELLED"; exit 0; }; exit 2 ;;
  *" -s LABEL "*) [ -n "${FAKE_OTHER_LABEL-}" ] && echo "$FAKE_OTHER_LABEL"; exit 0 ;;
  *" -s UUID "*) echo 0f0e0d0c-1111-2222-3333-444455556666; exit 0 ;;
  *" -s TYPE "*) [ -n "$fs" ] && echo "$fs"; exit 0 ;;
esac
[ -f "$FAKE_DIR/formatted" ] && exit 0
exit "$FAKE_BLKID_RC"
""",
    "mkfs.ext4": 'echo "mkfs.ext4 $*" >>"$FAKE_DIR/calls"; touch "$FAKE_DIR/formatted"',
    "mount": 'echo "mount $*" >>"$FAKE_DIR/calls"',
    "mountpoint": "exit 1",
}


BUCKET = OssPlan(bucket="b", internal_endpoint="oss-cn-shenzhen-internal.aliyuncs.com")


def holds_checkpoints_plan(tmp_path):
    """Checkpoints on their own ESSD (200 GiB), next to a 100 GiB data disk."""
    return single_gpu_lora_plan(storage=StoragePlan(
        checkpoint="essd", checkpoint_path=str(tmp_path / "ckpt"), oss=BUCKET,
        data_disk=DataDiskPlan(size_gib=100, mount_path=str(tmp_path / "data")),
        checkpoint_disk=DataDiskPlan(size_gib=200, mount_path=str(tmp_path / "data"), holds_checkpoints=True,
                                     label="trainstack-ckpt")))


@pytest.fixture
def disk(tmp_path):
    bin_dir, etc, fake = stub_commands(tmp_path / "bin", STUBS), tmp_path / "etc", tmp_path / "fake"
    for d in (etc, fake):
        d.mkdir()
    plan = single_gpu_lora_plan(storage=StoragePlan(
        checkpoint="oss", checkpoint_path=str(tmp_path / "ckpt"),
        data_disk=DataDiskPlan(size_gib=200, mount_path=str(tmp_path / "data")),
        oss=BUCKET))
    setup = tmp_path / "trainstack-setup.sh"

    def render(plan, options=None):
        (etc / "node.env").write_text(render_script(plan, "node.env", options=options))
        setup.write_text(render_script(plan, "trainstack-setup.sh", options=options))

    render(plan)

    def run(blkid_rc: int, fstype: str = "", step: str = "setup_data_disk", **extra: str) -> subprocess.CompletedProcess:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "TRAINSTACK_ETC": str(etc), "TRAINSTACK_FSTAB": str(tmp_path / "fstab"),
               "TRAINSTACK_STATE": str(tmp_path / "state"), "TRAINSTACK_RUN": str(tmp_path / "run"),
               "FAKE_DIR": str(fake), "FAKE_BLKID_RC": str(blkid_rc), "FAKE_FSTYPE": fstype, **extra}
        return subprocess.run(["bash", "-c", f'source "$1"; {step}', "-", str(setup)],
                              capture_output=True, text=True, env=env, timeout=30)

    def calls() -> list[str]:
        path = fake / "calls"
        return path.read_text().splitlines() if path.exists() else []

    run.calls = calls
    run.render = render
    run.plan = plan
    run.lsblk_calls = lambda: int((fake / "lsblk-calls").read_text())
    run.fstab = tmp_path / "fstab"
    run.mount_path = str(tmp_path / "data")
    return run


def test_an_existing_filesystem_is_mounted_and_never_reformatted(disk):
    result = disk(blkid_rc=0, fstype="xfs")
    assert result.returncode == 0, result.stderr
    assert not [c for c in disk.calls() if c.startswith("mkfs")]
    assert f"mount -t xfs /dev/vdb {disk.mount_path}" in disk.calls()
    assert "never reformatted" in result.stderr
    assert disk.fstab.read_text() == \
        f"UUID=0f0e0d0c-1111-2222-3333-444455556666 {disk.mount_path} xfs defaults,nofail 0 2\n"
    assert disk(blkid_rc=0, fstype="xfs").returncode == 0
    assert len(disk.fstab.read_text().splitlines()) == 1  # a second boot adds no second entry


def test_only_a_disk_blkid_reports_empty_is_formatted(disk):
    result = disk(blkid_rc=2)
    assert result.returncode == 0, result.stderr
    mkfs = [c for c in disk.calls() if c.startswith("mkfs")]
    assert mkfs == ["mkfs.ext4 -q -L trainstack-data /dev/vdb"]  # the 200 GiB disk, not vda or nvme0n1
    assert f"mount -t ext4 /dev/vdb {disk.mount_path}" in disk.calls()


@pytest.mark.parametrize("blkid_rc, fstype, message", [
    (4, "", "refusing to format"),  # blkid could not probe: unknown is not empty
    (8, "", "refusing to format"),  # ambivalent probe result
    (0, "", "partition table"),  # signatures but no filesystem: a partitioned disk
])
def test_anything_but_a_positive_empty_answer_leaves_the_disk_alone(disk, blkid_rc, fstype, message):
    result = disk(blkid_rc=blkid_rc, fstype=fstype)
    assert result.returncode != 0
    assert message in result.stderr and "FATAL" in result.stderr
    assert not [c for c in disk.calls() if c.startswith(("mkfs", "mount"))]


def test_the_rendered_step_has_no_other_path_to_mkfs():
    setup = render_script(single_gpu_lora_plan(), "trainstack-setup.sh")
    assert setup.count("mkfs") == 1
    guarded = setup[setup.index('blkid -p "$dev" >/dev/null'):setup.index("mkfs")]
    assert "    2)\n" in guarded  # inside the `blkid -p` exit-2 ("nothing found") branch only


def test_a_checkpoint_disk_attached_after_boot_is_waited_for(disk, tmp_path):
    disk.render(holds_checkpoints_plan(tmp_path))
    result = disk(blkid_rc=2, step="setup_checkpoint_disk", FAKE_ATTACH_AFTER="4", TRAINSTACK_DISK_POLL_SECONDS="0.05")
    assert result.returncode == 0, result.stderr
    assert disk.lsblk_calls() == 4, "looked again until the disk was attached"
    assert result.stderr.count("waiting up to 900s for the 200 GiB checkpoint disk") == 1
    assert "mkfs.ext4 -q -L trainstack-ckpt /dev/vdb" in disk.calls()
    assert f"mount -t ext4 /dev/vdb {disk.mount_path}" in disk.calls()


def test_the_wait_for_the_data_disk_is_bounded(disk, tmp_path):
    disk.render(holds_checkpoints_plan(tmp_path), BootstrapOptions(data_disk_wait_seconds=1))
    result = disk(blkid_rc=2, step="setup_checkpoint_disk", FAKE_ATTACH_AFTER="1000000",
                  TRAINSTACK_DISK_POLL_SECONDS="0.1")
    assert result.returncode != 0
    assert "FATAL: no 200 GiB checkpoint disk attached after 1s" in result.stderr
    assert 3 <= disk.lsblk_calls() <= 40
    assert not [c for c in disk.calls() if c.startswith(("mkfs", "mount"))]


def test_a_disk_with_its_label_is_found_by_label_whatever_its_size_now(disk):
    """A disk the stack grew (ResizeDisk online) no longer has its planned size: its label finds it."""
    result = disk(blkid_rc=0, fstype="ext4", FAKE_LABELLED="/dev/vdc")
    assert result.returncode == 0, result.stderr
    assert f"mount -t ext4 /dev/vdc {disk.mount_path}" in disk.calls()
    assert not [c for c in disk.calls() if c.startswith("mkfs")]


def test_a_disk_carrying_the_other_trainstack_label_is_never_taken(disk, tmp_path):
    """The retained checkpoint disk (label trainstack-ckpt) has the data disk's size: it is skipped."""
    disk.render(disk.plan, BootstrapOptions(data_disk_wait_seconds=1))
    result = disk(blkid_rc=2, FAKE_OTHER_LABEL="trainstack-ckpt", TRAINSTACK_DISK_POLL_SECONDS="0.1")
    assert result.returncode != 0 and "no 200 GiB data disk attached" in result.stderr
    assert not [c for c in disk.calls() if c.startswith(("mkfs", "mount"))]
