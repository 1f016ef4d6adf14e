"""The node agent: metadata tokens, the signed StopInstance call, and trainer signalling."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys

import pytest
from plan_factory import single_gpu_lora_plan

from components.bootstrap import render_script


@pytest.fixture
def agent(tmp_path):
    path = tmp_path / "trainstack_agent.py"
    path.write_text(render_script(single_gpu_lora_plan(), "trainstack_agent.py"))
    spec = importlib.util.spec_from_file_location("trainstack_agent_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.path = path
    return module


def test_rpc_signature_matches_alibabas_documented_example(agent):
    params = {"AccessKeyId": "testid", "Action": "DescribeRegions", "Format": "XML",
              "SignatureMethod": "HMAC-SHA1", "SignatureNonce": "3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf",
              "SignatureVersion": "1.0", "Timestamp": "2016-02-23T12:46:24Z", "Version": "2014-05-26"}
    assert agent.sign_rpc(params, "testsecret") == "OLeaidS1JvxuMvnyHOwuJ+uX5qY="
    assert agent.percent_encode("a b*c~d/") == "a%20b%2Ac~d%2F"


def test_metadata_token_is_renewed_before_it_expires(agent, fake_cloud):
    now = [1000.0]
    md = agent.Metadata(base=fake_cloud.url, ttl=100, clock=lambda: now[0])
    assert md.get("meta-data/instance-id") == "i-wz9testinstance"
    assert md.get("meta-data/instance-id") == "i-wz9testinstance"
    assert len(fake_cloud.token_requests) == 1 and fake_cloud.token_requests[0]["ttl"] == "100"
    now[0] += 81  # past 80% of the lifetime
    md.get("meta-data/instance-id")
    assert len(fake_cloud.token_requests) == 2
    assert all(token in {"token-0", "token-1"} for _, token in fake_cloud.gets)


def test_a_rejected_token_is_replaced_once(agent, fake_cloud):
    md = agent.Metadata(base=fake_cloud.url)
    md.get("meta-data/instance-id")
    fake_cloud.revoke_tokens()
    assert md.get("meta-data/region-id") == "cn-shenzhen"
    assert len(fake_cloud.token_requests) == 2
    assert md.get("meta-data/no-such-item") is None  # 404 means absent, not an error


def test_metadata_errors_are_reported_not_raised_raw(agent):
    md = agent.Metadata(base="http://127.0.0.1:9", timeout=0.5)  # nothing listens on the discard port
    with pytest.raises(agent.MetadataError):
        md.get("meta-data/instance-id")


def test_stop_instance_calls_ecs_with_stopcharging_and_role_credentials(agent, fake_cloud):
    env = dict(os.environ, TRAINSTACK_METADATA_URL=fake_cloud.url, TRAINSTACK_ECS_ENDPOINT=fake_cloud.url)
    result = subprocess.run([sys.executable, str(agent.path), "stop-instance", "--region", "cn-shenzhen"],
                            capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    (call,) = fake_cloud.ecs_calls  # signature verified by the fake with Alibaba's SDK signer
    assert call["Action"] == "StopInstance" and call["Version"] == "2014-05-26"
    assert (call["InstanceId"], call["StoppedMode"], call["ForceStop"]) == ("i-wz9testinstance", "StopCharging", "false")
    assert (call["AccessKeyId"], call["SecurityToken"]) == ("STS.fakeid", "sts-token/+=")
    assert all(token for _, token in fake_cloud.gets), "every metadata read carried the token"


def test_stop_instance_reports_a_rejected_call(agent, fake_cloud):
    fake_cloud.routes["meta-data/ram/security-credentials/TrainstackNodeRole"] = [(200, (
        '{"AccessKeyId": "STS.fakeid", "AccessKeySecret": "wrong", "SecurityToken": "t", "Code": "Success"}'))]
    env = dict(os.environ, TRAINSTACK_METADATA_URL=fake_cloud.url, TRAINSTACK_ECS_ENDPOINT=fake_cloud.url,
               TRAINSTACK_RETRY_SECONDS="0")
    result = subprocess.run([sys.executable, str(agent.path), "stop-instance"], capture_output=True, text=True,
                            env=env, timeout=30)
    assert result.returncode == 1
    assert "SignatureDoesNotMatch" in result.stderr and len(fake_cloud.ecs_calls) == 3


def test_stop_instance_without_a_ram_role_says_what_is_missing(agent, fake_cloud):
    fake_cloud.routes["meta-data/ram/security-credentials/"] = [(404, "")]
    env = dict(os.environ, TRAINSTACK_METADATA_URL=fake_cloud.url, TRAINSTACK_ECS_ENDPOINT=fake_cloud.url,
               TRAINSTACK_RETRY_SECONDS="0")
    result = subprocess.run([sys.executable, str(agent.path), "stop-instance"], capture_output=True, text=True,
                            env=env, timeout=30)
    assert result.returncode == 1 and "no RAM role" in result.stderr and not fake_cloud.ecs_calls


def test_oss_runs_ossutil_with_sts_credentials_in_its_environment(agent, fake_cloud, tmp_path):
    fake = tmp_path / "ossutil"
    fake.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "print(json.dumps([sys.argv[1:], {k: v for k, v in os.environ.items() if k.startswith('OSS_')}]))\n")
    fake.chmod(0o755)
    env = dict(os.environ, TRAINSTACK_METADATA_URL=fake_cloud.url, TRAINSTACK_OSSUTIL=str(fake))
    result = subprocess.run([sys.executable, str(agent.path), "oss", "--region", "cn-shenzhen", "--endpoint",
                             "oss-cn-shenzhen-internal.aliyuncs.com", "cp", "-f", "oss://b/k", "/tmp/x"],
                            capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    argv, oss_env = json.loads(result.stdout)
    assert argv == ["cp", "-f", "oss://b/k", "/tmp/x", "--region", "cn-shenzhen",
                    "--endpoint", "oss-cn-shenzhen-internal.aliyuncs.com"]
    assert oss_env == {"OSS_ACCESS_KEY_ID": "STS.fakeid", "OSS_ACCESS_KEY_SECRET": "fake-secret-for-tests",
                       "OSS_SESSION_TOKEN": "sts-token/+="}
    assert "fake-secret" not in " ".join(argv)  # never on a command line others can read


def test_signal_trainer_reaches_torchrun_and_its_ranks_but_term_only_torchrun(agent, tmp_path, waiter):
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
        sent = agent.signal_trainer(str(pidfile), signal.SIGUSR1)
        assert sent[0] == root.pid and len(sent) == 2
        waiter(lambda: log.exists() and len(log.read_text().splitlines()) == 2, what="SIGUSR1 at both")
        assert sorted(log.read_text().splitlines()) == ["rank SIGUSR1", "root SIGUSR1"]
        assert agent.signal_trainer(str(pidfile), signal.SIGTERM) == [root.pid]
        waiter(lambda: "root SIGTERM" in log.read_text(), what="SIGTERM at torchrun")
        assert "rank SIGTERM" not in log.read_text()
    finally:
        for pid in agent.children_of(root.pid):
            os.kill(pid, signal.SIGKILL)
        root.kill()
        root.wait(timeout=10)
    assert agent.signal_trainer(str(tmp_path / "missing.pid"), signal.SIGUSR1) == []


def test_signal_names(agent):
    assert agent.signal_number("USR1") == signal.SIGUSR1
    assert agent.signal_number("sigusr2") == signal.SIGUSR2
    assert agent.signal_number("15") == 15
