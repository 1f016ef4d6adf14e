"""Profiles and stack config never hold credentials; output never shows them."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from trainstack.cli import main
from trainstack.errors import InputError
from trainstack.profile import parse_profile
from trainstack.secrets import REDACTED, find_secrets, redact

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = {"name": "t", "model": {"preset": "llama-3.2-1b"}}
FAKE_AK = "LTAI5tFakeKeyForTests0001"


@pytest.mark.parametrize("extra, path", [
    ({"job": {"env": {"ALIBABA_CLOUD_ACCESS_KEY_SECRET": "abc123"}}}, "job.env.ALIBABA_CLOUD_ACCESS_KEY_SECRET"),
    ({"job": {"env": {"HF_TOKEN": "hf_abcdef"}}}, "job.env.HF_TOKEN"),
    ({"job": {"env": {"WANDB_API_KEY": "0123456789"}}}, "job.env.WANDB_API_KEY"),
    ({"tags": {"owner": FAKE_AK}}, "tags.owner"),
    ({"job": {"command": f"python train.py --ak {FAKE_AK}"}}, "job.command"),
    ({"job": {"command": "echo '-----BEGIN RSA PRIVATE KEY-----'"}}, "job.command"),
    ({"access_key_id": FAKE_AK}, "access_key_id"),
])
def test_secret_in_profile_is_rejected_with_a_pointer_to_the_credentials_chain(extra, path):
    with pytest.raises(InputError) as err:
        parse_profile({**BASE, **extra}, file="p.yaml")
    paths = [p.path for p in err.value.problems]
    assert path in paths
    text = "\n".join(err.value.lines())
    assert "credential" in text or "AccessKey" in text
    assert FAKE_AK not in text, "the error must not echo the secret back"


def test_names_that_only_look_secret_are_fine():
    p = parse_profile({**BASE, "training": {"tokens": 1e6}, "access": {"key_pair": "team-key"},
                       "job": {"env": {"MAX_TOKENS": "4096", "NCCL_DEBUG": "INFO"}}})
    assert p.access.key_pair == "team-key"


def test_validate_exits_2_and_never_prints_the_key(tmp_path, capsys):
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({**BASE, "job": {"env": {"OSS_ACCESS_KEY_ID": FAKE_AK}}}))
    assert main(["validate", str(f)]) == 2
    out = capsys.readouterr()
    assert "job.env.OSS_ACCESS_KEY_ID" in out.err and FAKE_AK not in out.err + out.out


def test_redact_nested_keys_and_values():
    doc = {"inputs": {"password": "hunter2", "userData": f"export AK={FAKE_AK}", "list": [{"secretKey": "x"}],
                      "keyPair": "team-key", "tokens": 5}}
    red = redact(doc)
    assert red["inputs"]["password"] == REDACTED and red["inputs"]["list"][0]["secretKey"] == REDACTED
    assert FAKE_AK not in str(red) and REDACTED in red["inputs"]["userData"]
    assert red["inputs"]["keyPair"] == "team-key" and red["inputs"]["tokens"] == 5


def test_find_secrets_reports_paths():
    assert [p for p, _ in find_secrets({"a": [{"token": "t"}], "b": {"note": FAKE_AK}})] == ["a[0].token", "b.note"]


def test_sample_stacks_and_profiles_hold_no_secrets():
    for f in list((ROOT / "stacks").glob("Pulumi.*.yaml")) + list((ROOT / "stacks" / "profiles").glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        assert not list(find_secrets(doc)), f
        for key in (doc.get("config") or {}):
            assert key not in ("alicloud:accessKey", "alicloud:secretKey"), f"{f}: plain credentials in stack config"


def test_gitignore_covers_state_and_credentials():
    ignored = (ROOT / ".gitignore").read_text().split()
    for pattern in (".pulumi/", ".alibabacloud/", "credentials", "*.pem", ".env", ".venv/"):
        assert pattern in ignored
