"""One output path: --out refuses what it must not replace, keeps the old file on failure, and
write errors (ENOSPC, EFBIG) on a file or on stdout are exit 2, never exit 0 or a traceback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from trainstack.cli import main
from trainstack.outputs import OutputError, write_file

ROOT = Path(__file__).resolve().parents[2]
PROFILE = str(ROOT / "stacks" / "profiles" / "llama3-8b-lora.yaml")


def test_replaces_a_regular_file_atomically_keeping_its_mode(tmp_path):
    f = tmp_path / "plan.json"
    f.write_text("old")
    f.chmod(0o640)
    write_file(f, "new")
    assert f.read_text() == "new" and stat.S_IMODE(f.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_refuses_a_fifo_a_directory_and_a_read_only_file(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    ro = tmp_path / "ro.json"
    ro.write_text("keep")
    ro.chmod(0o444)
    for target, why in ((tmp_path / "fifo", "named pipe"), (tmp_path / "dir", "directory"), (ro, "read-only")):
        with pytest.raises(OutputError, match=why):
            write_file(target, "x")
    assert ro.read_text() == "keep" and stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
def test_a_device_is_never_replaced(device, capsys):
    assert main(["schema", "--out", device]) == 2
    assert "character device" in capsys.readouterr().err and stat.S_ISCHR(os.stat(device).st_mode)


def test_a_copy_of_dev_full_made_with_mknod_stays_a_device(tmp_path, capsys):
    node = tmp_path / "full"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except (PermissionError, OSError):
        pytest.skip("mknod needs root")
    assert main(["plan", PROFILE, "--format", "json", "--out", str(node)]) == 2
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_a_symlink_is_refused_unless_asked_then_its_target_is_replaced(tmp_path, capsys):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert main(["schema", "--out", str(link)]) == 2
    assert "symbolic link" in capsys.readouterr().err and target.read_text() == "old"
    assert main(["schema", "--out", str(link), "--out-follow-symlink"]) == 0
    assert link.is_symlink() and target.read_text().startswith("{")
    loop = tmp_path / "a"
    loop.symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(loop)
    assert main(["schema", "--out", str(loop), "--out-follow-symlink"]) == 2


def _run(args: list[str], *, stdout=None, fsize: int | None = None) -> subprocess.CompletedProcess:
    def limit():  # a real write error from the kernel: EFBIG past RLIMIT_FSIZE (SIGXFSZ ignored)
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([sys.executable, "-m", "trainstack", *args], cwd=ROOT, stdout=stdout or subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=limit if fsize else None)


def test_stdout_on_a_full_device_is_exit_2_not_a_truncated_success():
    with open("/dev/full", "w") as full:
        r = _run(["plan", PROFILE, "--format", "json"], stdout=full)
    assert r.returncode == 2 and "No space left" in r.stderr and "Traceback" not in r.stderr
    assert "Exception ignored" not in r.stderr


def test_stdout_redirected_to_a_file_that_cannot_grow_is_exit_2(tmp_path):
    with open(tmp_path / "plan.txt", "w") as fh:
        r = _run(["plan", PROFILE], stdout=fh, fsize=2048)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "standard output" in r.stderr


def test_out_that_cannot_be_written_keeps_the_old_file(tmp_path):
    out = tmp_path / "plan.json"
    out.write_text("previous plan")
    r = _run(["plan", PROFILE, "--format", "json", "--out", str(out)], fsize=4096)
    assert r.returncode == 2 and "old file" in r.stderr and "Traceback" not in r.stderr
    assert out.read_text() == "previous plan" and [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_a_closed_pipe_is_a_quiet_success():
    p = subprocess.Popen([sys.executable, "-m", "trainstack", "schema"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(timeout=60) == 0 and "Traceback" not in err and "Exception ignored" not in err
