"""The node agent and its modules (templates/programs/): metadata tokens, waiting for the RAM role
(trainstack_metadata), the signed StopInstance call (trainstack_cloud, run on its own), safe
code-archive extraction and trainer signalling (trainstack_launch, through the agent's command line)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile

import pytest



def test_rpc_signature_matches_alibabas_documented_example(programs):
    params = {"AccessKeyId": "testid", "Action": "DescribeRegions", "Format": "XML",
              "SignatureMethod": "HMAC-SHA1", "SignatureNonce": "3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf",
              "SignatureVersion": "1.0", "Timestamp": "2016-02-23T12:46:24Z", "Version": "2014-05-26"}
    assert programs.cloud.sign_rpc(params, "testsecret") == "OLeaidS1JvxuMvnyHOwuJ+uX5qY="
    assert programs.cloud.percent_encode("a b*c~d/") == "a%20b%2Ac~d%2F"


def test_metadata_token_is_renewed_before_it_expires(programs, fake_cloud):
    now = [1000.0]
    md = programs.metadata.Metadata(base=fake_cloud.url, ttl=100, clock=lambda: now[0])
    assert md.get("meta-data/instance-id") == "i-wz9testinstance"
    assert md.get("meta-data/instance-id") == "i-wz9testinstance"
    assert len(fake_cloud.token_requests) == 1 and fake_cloud.token_requests[0]["ttl"] == "100"
    now[0] += 81  # past 80% of the lifetime
    md.get("meta-data/instance-id")
    assert len(fake_cloud.token_requests) == 2
    assert all(token in {"token-0", "token-1"} for _, token in fake_cloud.gets)


def test_a_rejected_token_is_replaced_once(programs, fake_cloud):
    md = programs.metadata.Metadata(base=fake_cloud.url)
    md.get("meta-data/instance-id")
    fake_cloud.revoke_tokens()
    assert md.get("meta-data/region-id") == "cn-shenzhen"
    assert len(fake_cloud.token_requests) == 2
    assert md.get("meta-data/no-such-item") is None  # 404 means absent, not an error


def test_metadata_errors_are_reported_not_raised_raw(programs):
    md = programs.metadata.Metadata(base="http://127.0.0.1:9", timeout=0.5)  # nothing listens on the discard port
    with pytest.raises(programs.metadata.MetadataError):
        md.get("meta-data/instance-id")


def test_stop_instance_calls_ecs_with_stopcharging_and_role_credentials(programs, fake_cloud):
    env = dict(os.environ, TRAINSTACK_METADATA_URL=fake_cloud.url, TRAINSTACK_ECS_ENDPOINT=fake_cloud.url)
    result = subprocess.run([sys.executable, str(programs.path("trainstack_cloud.py")), "stop-instance", "--region", "cn-shenzhen"],
                            capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    (call,) = fake_cloud.ecs_calls  # signature verified by the fake with Alibaba's SDK signer
    assert call["Action"] == "StopInstance" and call["Version"] == "2014-05-26"
    assert (call["InstanceId"], call["StoppedMode"], call["ForceStop"]) == ("i-wz9testinstance", "StopCharging", "false")
    assert (call["AccessKeyId"], call["SecurityToken"]) == ("STS.fakeid", "sts-token/+=")
    assert all(token for _, token in fake_cloud.gets), "every metadata read carried the token"


def test_stop_instance_reports_a_rejected_call(programs, fake_cloud):
    fake_cloud.routes["meta-data/ram/security-credentials/TrainstackNodeRole"] = [(200, (
        '{"AccessKeyId": "STS.fakeid", "AccessKeySecret": "wrong", "SecurityToken": "t", "Code": "Success"}'))]
    env = dict(os.environ, TRAINSTACK_METADATA_URL=fake_cloud.url, TRAINSTACK_ECS_ENDPOINT=fake_cloud.url,
               TRAINSTACK_RETRY_SECONDS="0")
    result = subprocess.run([sys.executable, str(programs.path("trainstack_cloud.py")), "stop-instance"], capture_output=True, text=True,
                            env=env, timeout=30)
    assert result.returncode == 1
    assert "SignatureDoesNotMatch" in result.stderr and len(fake_cloud.ecs_calls) == 3


def test_stop_instance_without_a_ram_role_says_what_is_missing(programs, fake_cloud):
    fake_cloud.routes["meta-data/ram/security-credentials/"] = [(404, "")]
    env = dict(os.environ, TRAINSTACK_METADATA_URL=fake_cloud.url, TRAINSTACK_ECS_ENDPOINT=fake_cloud.url,
               TRAINSTACK_RETRY_SECONDS="0", TRAINSTACK_RAM_ROLE_WAIT_SECONDS="0.5",
               TRAINSTACK_RAM_ROLE_POLL_SECONDS="0.05")
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(programs.path("trainstack_cloud.py")), "stop-instance"], capture_output=True, text=True,
                            env=env, timeout=30)
    assert result.returncode == 1 and "no RAM role" in result.stderr and not fake_cloud.ecs_calls
    assert "waited" in result.stderr and "waiting up to" in result.stderr
    assert time.monotonic() - started < 10, "only the first of the three attempts waits for the role"


def role_lookups(cloud):
    return [p for p, _ in cloud.gets if p == "meta-data/ram/security-credentials/"]


def test_credentials_wait_for_a_role_attached_after_boot(programs, fake_cloud):
    # the stack attaches the role right after creating the instance: the first polls find none
    fake_cloud.routes["meta-data/ram/security-credentials/"] = [
        (404, ""), (200, ""), (200, "\n"), (200, "TrainstackNodeRole")]
    fake_cloud.routes["meta-data/ram/security-credentials/TrainstackNodeRole"] = [
        (404, ""), (200, '{"Code": "Failure"}'), *fake_cloud.routes["meta-data/ram/security-credentials/TrainstackNodeRole"]]
    md = programs.metadata.Metadata(base=fake_cloud.url)
    creds = md.ram_credentials(wait=10, poll=0.01)
    assert (creds["AccessKeyId"], creds["SecurityToken"]) == ("STS.fakeid", "sts-token/+=")
    assert len(role_lookups(fake_cloud)) == 6  # 3 without a role, then the role 3 times until its credentials
    assert all(token for _, token in fake_cloud.gets)


def test_credentials_give_up_after_the_wait_with_the_clear_message(programs, fake_cloud):
    fake_cloud.routes["meta-data/ram/security-credentials/"] = [(404, "")]
    md = programs.metadata.Metadata(base=fake_cloud.url)
    started = time.monotonic()
    with pytest.raises(programs.metadata.MetadataError, match="no RAM role is attached to this instance.*waited 0.3s"):
        md.ram_credentials(wait=0.3, poll=0.05)
    assert 0.25 <= time.monotonic() - started < 5
    assert 3 <= len(role_lookups(fake_cloud)) <= 8
    fake_cloud.gets.clear()
    with pytest.raises(programs.metadata.MetadataError, match="no RAM role"):
        md.ram_credentials(wait=0, poll=5)  # no wait: one look
    assert len(role_lookups(fake_cloud)) == 1


def test_stop_instance_waits_for_the_role_from_the_environment_settings(programs, fake_cloud):
    fake_cloud.routes["meta-data/ram/security-credentials/"] = [(404, "")] * 3 + [(200, "TrainstackNodeRole")]
    env = dict(os.environ, TRAINSTACK_METADATA_URL=fake_cloud.url, TRAINSTACK_ECS_ENDPOINT=fake_cloud.url,
               TRAINSTACK_RAM_ROLE_WAIT_SECONDS="20", TRAINSTACK_RAM_ROLE_POLL_SECONDS="0.05")
    result = subprocess.run([sys.executable, str(programs.path("trainstack_cloud.py")), "stop-instance"], capture_output=True, text=True,
                            env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "waiting up to 20s for the instance RAM role" in result.stderr
    (call,) = fake_cloud.ecs_calls
    assert call["Action"] == "StopInstance" and call["SecurityToken"] == "sts-token/+="
    assert len(role_lookups(fake_cloud)) == 4


def make_tar(path, members):
    """members: (name, kind, data-or-link) with kind file | dir | symlink | hardlink | fifo."""
    with tarfile.open(path, "w:gz") as tf:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(value)
                tf.addfile(info, io.BytesIO(value))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE}[kind]
            info.linkname = value or ""
            tf.addfile(info)


def test_extract_unpacks_a_code_archive(programs, tmp_path):
    archive = tmp_path / "code.tar.gz"
    make_tar(archive, [("project/", "dir", None), ("project/train.py", "file", b"print('hi')\n"),
                       ("project/conf/base.yaml", "file", b"lr: 1\n"), ("project/current.yaml", "symlink", "conf/base.yaml")])
    dest = tmp_path / "out"
    result = subprocess.run([sys.executable, str(programs.path("trainstack_agent.py")), "extract", str(archive), str(dest)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert (dest / "project" / "train.py").read_text() == "print('hi')\n"
    assert (dest / "project" / "current.yaml").read_text() == "lr: 1\n"
    zipped = tmp_path / "code.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("train.py", "print('zip')\n")
        zf.writestr("pkg/__init__.py", "")
    assert programs.launch.safe_extract(str(zipped), str(tmp_path / "z")) == 2
    assert (tmp_path / "z" / "train.py").read_text() == "print('zip')\n"


@pytest.mark.parametrize("members", [
    [("ok.py", "file", b"x"), ("../escaped.py", "file", b"evil")],
    [("project/../../escaped.py", "file", b"evil")],
    [("/tmp/escaped.py", "file", b"evil")],
    [("link", "symlink", "/etc"), ("link/escaped.py", "file", b"evil")],
    [("link", "symlink", "../.."), ("link/escaped.py", "file", b"evil")],
    [("hard", "hardlink", "../escaped.py")],
    [("pipe", "fifo", None)],
], ids=["dotdot", "nested-dotdot", "absolute", "symlink-absolute", "symlink-up", "hardlink-up", "fifo"])
def test_extract_refuses_members_that_would_land_outside(programs, tmp_path, members):
    archive = tmp_path / "code.tar.gz"
    make_tar(archive, members)
    dest = tmp_path / "a" / "b" / "out"
    result = subprocess.run([sys.executable, str(programs.path("trainstack_agent.py")), "extract", str(archive), str(dest)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1 and "unsafe archive member" in result.stderr
    assert not list(dest.iterdir()), "nothing is written when one member is unsafe"
    assert not [p for p in tmp_path.rglob("escaped.py")]


def test_extract_refuses_a_zip_slip(programs, tmp_path):
    zipped = tmp_path / "code.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("train.py", "ok")
        zf.writestr("../../escaped.py", "evil")
    with pytest.raises(ValueError, match="unsafe archive member"):
        programs.launch.safe_extract(str(zipped), str(tmp_path / "a" / "out"))
    assert not list((tmp_path / "a" / "out").iterdir()) and not list(tmp_path.rglob("escaped.py"))


def test_signal_trainer_reaches_torchrun_and_its_ranks_but_term_only_torchrun(programs, tmp_path, waiter):
    # a stand-in torchrun whose one child stands in for a rank; both log the signals they get
    script = tmp_path / "tree.py"
    script.write_text(
        "import os, signal, subprocess, sys, time\n"
        "role, log = sys.argv[1], sys.argv[2]\n"
        "def on(sig, _):\n"
        "    with open(log, 'a') as fh: fh.write(f'{role} {signal.Signals(sig).name}\\n')\n"
        "signal.signal(signal.SIGUSR1, on); signal.signal(signal.SIGTERM, on)\n"
        "child = subprocess.Popen([sys.executable, __file__, 'rank', log]) if role == 'root' else None\n"
        "open(log + '.' + role, 'w').close()\n"
        "end = time.monotonic() + 10\n"
        "while time.monotonic() < end: time.sleep(0.02)\n")
    log = tmp_path / "signals.log"
    root = subprocess.Popen([sys.executable, str(script), "root", str(log)])
    try:
        waiter(lambda: (tmp_path / "signals.log.root").exists() and (tmp_path / "signals.log.rank").exists(),
               what="the process tree to start")
        pidfile = tmp_path / "trainer.pid"
        pidfile.write_text(f"{root.pid}\n")
        sent = programs.launch.signal_trainer(str(pidfile), signal.SIGUSR1)
        assert sent[0] == root.pid and len(sent) == 2
        waiter(lambda: log.exists() and len(log.read_text().splitlines()) == 2, what="SIGUSR1 at both")
        assert sorted(log.read_text().splitlines()) == ["rank SIGUSR1", "root SIGUSR1"]
        assert programs.launch.signal_trainer(str(pidfile), signal.SIGTERM) == [root.pid]
        waiter(lambda: "root SIGTERM" in log.read_text(), what="SIGTERM at torchrun")
        assert "rank SIGTERM" not in log.read_text()
    finally:
        for pid in programs.launch.children_of(root.pid):
            os.kill(pid, signal.SIGKILL)
        root.kill()
        root.wait(timeout=10)
    assert programs.launch.signal_trainer(str(tmp_path / "missing.pid"), signal.SIGUSR1) == []


def test_signal_names(programs):
    assert programs.launch.signal_number("USR1") == signal.SIGUSR1
    assert programs.launch.signal_number("sigusr2") == signal.SIGUSR2
    assert programs.launch.signal_number("15") == 15
