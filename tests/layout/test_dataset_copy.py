"""storage.dataset_sync: at-boot (issue 33 item 5): every node copies the dataset to its data disk in the
background from its first boot on; the plan says how long (the data disk's sourced throughput or OSS's
assumed read), refuses a copy no ESSD holds with the same message in validate and plan, and the nodes
get the copy step only then."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from tests.plan_factory import resolved
from tests.shell_stubs import stub_commands
from trainstack.bootstrap import render_script
from trainstack.cli import main
from trainstack.layout.storage import MB_PER_GIB, OSS_READ_MBPS, dataset_copy
from trainstack.plan import DataDiskPlan, StoragePlan

ROOT = Path(__file__).resolve().parents[2]
COPY = {"storage": {"dataset_gib": 50, "dataset_uri": "oss://team-data/corpus/", "dataset_sync": "at-boot"}}
#: ESSD-PERF, read from the page here, not from the catalog under test: (base, MB/s per GiB, max) per level
ESSD = {"PL0": (100, 0.25, 180), "PL1": (120, 0.5, 350), "PL2": (120, 0.5, 750), "PL3": (120, 0.5, 4000)}


def storage(gib: float, disk_gib: int, level: str = "PL1", category: str = "cloud_essd",
            sync: str = "at-boot") -> StoragePlan:
    return StoragePlan(checkpoint="oss", checkpoint_path="/mnt/checkpoints", dataset_uri="oss://team-data/corpus/",
                       dataset_gib=gib, dataset_sync=sync,  # type: ignore[arg-type]
                       data_disk=DataDiskPlan(size_gib=disk_gib, performance_level=level,  # type: ignore[arg-type]
                                              category=category))  # type: ignore[arg-type]


def test_the_copy_time_by_hand():
    # 50 GiB onto a 160 GiB PL1 disk: min{120 + 0.5 x 160, 350} = 200 MB/s, the disk bounds it
    c = dataset_copy(storage(50, 160))
    assert c is not None and c.mbps == 200 and c.kind == "sourced" and "ESSD-PERF" in c.source
    assert c.seconds == pytest.approx(50 * 2**30 / 1e6 / 200, abs=0.1)  # 268.4 s
    # 2,000 GiB onto 2,500 GiB PL3: the disk writes 1,370 MB/s, OSS's assumed 1,250 MB/s bounds it
    c = dataset_copy(storage(2000, 2500, "PL3"))
    assert c is not None and c.mbps == OSS_READ_MBPS and c.kind == "assumed"
    assert c.seconds == pytest.approx(1717.99, abs=0.1)
    # an AutoPL disk copies at the PL1 disk of its size (AUTOPL-PRICE)
    assert dataset_copy(storage(50, 160, "PL0", "cloud_auto")).mbps == 200  # type: ignore[union-attr]
    assert dataset_copy(storage(50, 160, sync="stream")) is None
    assert dataset_copy(storage(0, 160)) is None


@settings(max_examples=200, deadline=None)
@given(gib=st.floats(1, 60_000), disk=st.integers(20, 65_536), level=st.sampled_from(sorted(ESSD)))
def test_the_copy_runs_at_the_slower_of_the_disk_and_oss(gib, disk, level):
    c = dataset_copy(storage(gib, disk, level))
    base, per_gib, top = ESSD[level]
    want = min(base + per_gib * disk, top, OSS_READ_MBPS)
    assert c is not None and c.mbps == pytest.approx(want)
    assert c.kind == ("assumed" if want == OSS_READ_MBPS and base + per_gib * disk > OSS_READ_MBPS else "sourced")
    assert c.seconds == pytest.approx(gib * MB_PER_GIB / want, abs=0.06)


def test_the_plan_and_the_nodes_of_a_copying_stack():
    plan = resolved("llama3-8b-lora", COPY)
    assert plan.storage.dataset_dir == "/mnt/data/dataset"
    assert any(n.startswith("dataset_sync at-boot: every node copies oss://team-data/corpus/ (50 GiB)")
               for n in plan.storage.notes)
    env = render_script(plan, "node.env")
    assert "DATASET_SYNC_URI=oss://team-data/corpus/" in env and "DATASET_DIR=/mnt/data/dataset" in env
    steps = next(line for line in env.splitlines() if line.startswith("SETUP_STEPS="))
    assert steps.split("=", 1)[1].strip("'").split()[:2] == ["setup_data_disk", "setup_dataset_copy"]
    streaming = render_script(resolved("llama3-8b-lora"), "node.env")
    assert "DATASET_" not in streaming and "setup_dataset_copy" not in streaming


def test_a_replacement_copies_in_the_background_and_the_plan_says_so():
    heal = {"storage": {"dataset_gib": 2000, "checkpoint": "cpfs", "dataset_uri": "oss://team-data/corpus/",
                        "dataset_sync": "at-boot"}}
    plan = resolved("llama3-70b-spot-heal", heal)
    r = plan.spot_pool.replacement
    before = resolved("llama3-70b-spot-heal").spot_pool.replacement
    assert r is not None and before is not None and r.dataset_copy_seconds == pytest.approx(1718.0, abs=0.1)
    assert r.seconds == before.seconds, "the copy is not on the replacement's path"
    assert any("copies the dataset in the background from its boot on (29 min" in lab for lab in plan.labels)
    pool_env = render_script(plan, "node.env", node_rank=1, cpfs_mount_address="cpfs-x.example:/share")
    assert "setup_dataset_copy" in pool_env


def _cli(args: list[str], capsys) -> tuple[int, str]:
    code = main(args)
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.err


def test_a_copy_no_essd_holds_is_refused_alike_by_validate_and_plan(tmp_path, capsys):
    doc = yaml.safe_load((ROOT / "stacks" / "profiles" / "llama3-8b-lora.yaml").read_text())
    doc["storage"] = {**doc.get("storage", {}), "dataset_gib": 60_000, "dataset_uri": "oss://team-data/corpus/",
                      "dataset_sync": "at-boot"}
    doc["resources"].pop("max_hourly_cost", None)  # 72 TB of disk is over the sample's budget on its own
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(doc))
    code_v, err_v = _cli(["validate", str(path)], capsys)
    code_p, err_p = _cli(["plan", str(path)], capsys)
    line = "storage.dataset_sync: a 60,000 GiB dataset copied at boot needs a 72,100 GiB data disk"
    assert code_v == code_p == 2 and line in err_v and line in err_p
    doc["storage"]["dataset_sync"] = "stream"  # streamed, the same dataset only caps the cache disk
    path.write_text(yaml.safe_dump(doc))
    assert _cli(["validate", str(path)], capsys)[0] == 0


STUBS = {
    "systemctl": 'echo "systemctl $*" >>"$FAKE_DIR/calls"; [ -f "$FAKE_DIR/active" ]',
    "systemd-run": 'echo "systemd-run $*" >>"$FAKE_DIR/calls"; printf "%s\\n" "$@" >"$FAKE_DIR/argv"',
}


@pytest.mark.parametrize("uri", ["oss://team-data/corpus/", "oss://team-data/$(touch PWNED)/`id`;x"])
def test_the_setup_step_starts_one_background_copy_with_the_uri_as_one_argument(tmp_path, uri):
    plan = resolved("llama3-8b-lora", COPY)
    bin_dir, etc, fake = stub_commands(tmp_path / "bin", STUBS), tmp_path / "etc", tmp_path / "fake"
    for d in (etc, fake):
        d.mkdir()
    env_text = render_script(plan, "node.env").replace("oss://team-data/corpus/", uri.replace("'", ""))
    if "$(" in uri:  # the renderer quotes what it writes; a hostile value is hand-placed in its quoting
        import shlex
        env_text = "\n".join(f"DATASET_SYNC_URI={shlex.quote(uri)}" if ln.startswith("DATASET_SYNC_URI=") else ln
                             for ln in env_text.splitlines()) + "\n"
    (etc / "node.env").write_text(env_text)
    setup = tmp_path / "trainstack-setup.sh"
    setup.write_text(render_script(plan, "trainstack-setup.sh"))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "TRAINSTACK_ETC": str(etc), "FAKE_DIR": str(fake),
           "TRAINSTACK_STATE": str(tmp_path / "state"), "TRAINSTACK_RUN": str(tmp_path / "run")}

    def step() -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", 'source "$1"; setup_dataset_copy', "-", str(setup)], cwd=tmp_path,
                              capture_output=True, text=True, env=env, timeout=30)

    out = step()
    assert out.returncode == 0, out.stderr
    argv = (fake / "argv").read_text().splitlines()
    assert argv[:2] == ["--unit", "trainstack-dataset-copy"] and "--collect" in argv
    tail = argv[argv.index("mirror"):]
    assert tail == ["mirror", uri, "/mnt/data/dataset"]
    assert not list(tmp_path.rglob("PWNED"))
    (fake / "active").touch()  # a second boot's step while the copy still runs: no second copy
    (fake / "argv").unlink()
    out = step()
    assert out.returncode == 0 and not (fake / "argv").exists() and "already running" in out.stderr


def test_a_copy_that_cannot_start_leaves_the_setup_going(tmp_path):
    """The copy only saves the trainer reading storage.dataset_uri: a failed start is a warning, not a stop."""
    plan = resolved("llama3-8b-lora", COPY)
    bin_dir, etc = stub_commands(tmp_path / "bin", {"systemctl": "exit 3", "systemd-run": "exit 1"}), tmp_path / "etc"
    etc.mkdir()
    (etc / "node.env").write_text(render_script(plan, "node.env"))
    setup = tmp_path / "trainstack-setup.sh"
    setup.write_text(render_script(plan, "trainstack-setup.sh"))
    out = subprocess.run(["bash", "-c", 'set -e; source "$1"; setup_dataset_copy; echo next-step', "-", str(setup)],
                         capture_output=True, text=True, timeout=30,
                         env={"PATH": f"{bin_dir}:/usr/bin:/bin", "TRAINSTACK_ETC": str(etc)})
    assert out.returncode == 0 and out.stdout.strip() == "next-step", out.stderr
    assert "WARNING: cannot start the dataset copy" in out.stderr


def _oss_statements(plan) -> list[dict]:
    from trainstack.layout.identity import oss_policy_document
    return oss_policy_document(plan)["Statement"]  # type: ignore[index]


def test_the_node_role_reads_the_copied_prefix_also_inside_the_stack_bucket():
    """A dataset elsewhere in the stack bucket needs its own read statements (the stack bucket's rights are
    job/ and checkpoints/ only); one under those prefixes is already readable."""
    plan = resolved("llama3-8b-lora", COPY)
    bucket = plan.storage.oss.bucket  # type: ignore[union-attr]
    for key, own in (("data/corpus/", True), ("checkpoints/seed/", False), ("job/x/", False)):
        moved = plan.model_copy(update={"storage": plan.storage.model_copy(
            update={"dataset_uri": f"oss://{bucket}/{key}"})})
        statements = _oss_statements(moved)
        reads = [s for s in statements if f"acs:oss:*:*:{bucket}/{key}*" in s["Resource"]]
        lists = [s for s in statements if s.get("Condition", {}).get("StringLike", {}).get("oss:Prefix") == [f"{key}*"]]
        assert bool(reads and lists) == own, (key, statements)
    assert any(f"acs:oss:*:*:team-data/corpus/*" in s["Resource"] for s in _oss_statements(plan))


def test_a_copied_dataset_is_a_prefix():
    from trainstack.errors import InputError
    from trainstack.profile import parse_profile
    with pytest.raises(InputError) as err:
        parse_profile({"name": "demo", "model": {"preset": "llama-3-8b"}, "storage": {
            "dataset_gib": 10, "dataset_uri": "oss://team-data/corpus", "dataset_sync": "at-boot"}})
    assert "end storage.dataset_uri with /" in "\n".join(err.value.lines())
