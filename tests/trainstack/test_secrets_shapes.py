"""The secret detector: each credential shape and key-name style is caught, ordinary names are not,
and no value is ever echoed, error paths included."""

from __future__ import annotations

import json

import pytest
import yaml

from trainstack.cli import main
from trainstack.errors import InputError
from trainstack.profile import parse_profile
from trainstack.secrets import REDACTED, is_secret_name, redact, scan, value_kind

BASE = {"name": "t", "model": {"preset": "llama-3.2-1b"}}

SHAPES = [
    "AKIAIOSFODNN7EXAMPLE", "ASIAY34FZKBOKMUTVV7A", "LTAI5tFakeKeyForTests0001", "LTAIabcdefgh",
    "Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0", "CAIS1234567890abcdefSTSTOKENVALUE", "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "glpat-xxxxxxxxxxxxxxxxxxxx",
    "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "sk-AbCdEfGhIjKlMnOpQrStUvWx0123456789abcdef",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc", "Bearer abcdefgh12345678",
    "-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN OPENSSH PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----", "https://user:p4ss@example.com/x.tgz", "oss://u:pw@bucket/data/",
    "https://b.oss-cn-shenzhen.aliyuncs.com/c.tgz?OSSAccessKeyId=STS.x&Signature=abc",
    "user:imgPassw0rd@registry.example.com/img:v1",
    "python train.py --db-password S3cr3t!", "python train.py --password=S3cr3t2", "HF_TOKEN=tok_abc python t.py",
    "export WANDB_API_KEY=abc123; python t.py",
]

SECRET_NAMES = ["DB_PWD", "DB_PASS", "MY_SECRETS", "AUTH_TOKENS", "authToken", "HF_TOKEN", "GITLAB_PAT",
                "OSS_ACCESS_KEY_ID", "access_key_secret", "api-key", "ApiKey", "x_api_key_header", "password",
                "clientSecret", "PRIVATE_KEY", "aws_session_token", "OPENAI_SK", "passphrase",
                # issue 34: "key" after a service's name, or a word that makes it a credential
                "wandb_key", "WANDB_KEY", "OPENAI_KEY", "hf-key", "cometKey", "license_key", "SSH_KEY", "signing_key"]

#: ordinary names and values that must keep validating (issue 13: no false alarms)
ORDINARY_ENV = {
    "TOKENIZERS_PARALLELISM": "false", "MAX_TOKENS": "4096", "NUM_PASSES": "3", "PASSES": "2",
    "TOKEN_LIMIT": "8192", "MAX_NEW_TOKENS": "512", "NCCL_DEBUG": "INFO", "PASS_THROUGH_LIMIT": "1",
    "TOKENS_PER_BATCH": "65536", "KEY_PAIR_NAME": "team-key", "HTTP_TOKENS": "required",
    "WANDB_PROJECT": "llama", "HF_HOME": "/mnt/data/hf", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "RUN_ID": "llama3-8b-lora-20250101", "GIT_SHA": "3f2a9c1d0b4e5f6a7b8c9d0e1f2a3b4c5d6e7f80",
}
ORDINARY_COMMANDS = [
    "torchrun train.py --max-tokens 4096 --num-passes 3",
    "python train.py --config configs/lora.yaml --tokens 1e9 --token-limit 2048",
    "accelerate launch train.py --model meta-llama/Meta-Llama-3-8B --use-auth",
    "python train.py --password-file /run/secrets/db --output_dir /mnt/data/out",
    "python train.py --hf-token $HF_TOKEN --wandb-key ${WANDB_KEY}",
    "TOKENIZERS_PARALLELISM=false python train.py",
    # issue 34: the options of Megatron, torchtitan and HF scripts that only sound like tokens or keys
    "torchrun pretrain_gpt.py --tokenizer-model /mnt/data/tokenizer.model --tokenizer-type HuggingFaceTokenizer",
    "python generate.py --max_new_tokens 512 --model.tokenizer_path /mnt/data/tokenizer",
    "torchrun train.py --dataset_text_field text --input_key prompt --output_key completion --label_key label",
    "python train.py --sort_key length --cache_key llama3-8b-lora-20250101-run --run-name llama3-8b-lora-20250101",
    "python train.py --model_name_or_path meta-llama/Meta-Llama-3-8B-Instruct --hub_model_id team/llama3-ft-key",
    "python train.py --git-sha 3f2a9c1d0b4e5f6a7b8c9d0e1f2a3b4c5d6e7f80",
]

#: issue 34: a literal value for a key-named option is a credential in the command, whatever its shape
HEX40 = "0123456789abcdef0123456789abcdef01234567"
INLINE_KEYS = [(f"python train.py --wandb_key {HEX40}", HEX40), (f"python train.py --wandb-key={HEX40}", HEX40),
               (f"WANDB_KEY={HEX40} python train.py", HEX40), ("python train.py --openai_key plainvalue", "plainvalue"),
               ("python train.py --my_service_key 9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddcc",
                "9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddcc")]


@pytest.mark.parametrize("command, secret", INLINE_KEYS)
def test_an_inline_key_in_the_command_is_refused_pointing_to_job_secrets(tmp_path, capsys, command, secret):
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({**BASE, "job": {"command": command}}))
    for cmd in (["validate", str(f)], ["plan", "--format", "json", str(f)]):
        assert main(cmd) == 2
        out = capsys.readouterr()
        assert "job.command" in out.err and "job.secrets" in out.err and "kms_secret" in out.err
        assert secret not in out.out + out.err


@pytest.mark.parametrize("value", SHAPES)
def test_every_credential_shape_is_detected(value):
    assert value_kind(value), value


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names_in_every_case_style(name):
    assert is_secret_name(name), name


def test_ordinary_names_values_and_commands_still_validate():
    for name in ORDINARY_ENV:
        assert not is_secret_name(name), name
    for value in ORDINARY_ENV.values():
        assert not value_kind(value), value
    p = parse_profile({**BASE, "job": {"env": ORDINARY_ENV, "command": ORDINARY_COMMANDS[0]},
                       "training": {"tokens": 1e6}, "access": {"key_pair": "team-key"}})
    assert p.job.env == ORDINARY_ENV
    for cmd in ORDINARY_COMMANDS:
        parse_profile({**BASE, "job": {"command": cmd}})


@pytest.mark.parametrize("where", ["env", "command", "tags", "code_uri", "dataset_uri", "image", "image_id"])
@pytest.mark.parametrize("value", ["AKIAIOSFODNN7EXAMPLE", "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
                                   "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"])
def test_a_secret_anywhere_is_rejected_and_never_echoed(tmp_path, capsys, where, value):
    doc = dict(BASE)
    if where == "env":
        doc["job"] = {"env": {"X": value}}
    elif where == "command":
        doc["job"] = {"command": f"python t.py --flag {value}"}
    elif where == "tags":
        doc["tags"] = {"owner": value}
    elif where == "code_uri":
        doc["job"] = {"code_uri": f"https://x:{value}@github.com/o/r.git"}
    elif where == "dataset_uri":
        doc["storage"] = {"dataset_uri": f"oss://bucket/{value}/"}
    elif where == "image":
        doc["job"] = {"image": f"u:{value}@registry.example.com/i:1"}
    else:
        doc["image_id"] = value
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(doc))
    for cmd in (["validate", "--json", str(f)], ["resolve", "--json", str(f)], ["plan", "--format", "json", str(f)]):
        assert main(cmd) == 2
        out = capsys.readouterr()
        assert value not in out.out + out.err, (cmd, where)


def test_a_secret_that_also_fails_a_type_check_is_not_echoed(capsys, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({**BASE, "resources": {"gpus": "LTAI5tBadTypeField1234"},
                                 "job": {"env": {"DB_PASS": 12345678}}}))
    assert main(["validate", "--json", str(f)]) == 2
    out = capsys.readouterr()
    assert "LTAI5tBadTypeField1234" not in out.out + out.err and "12345678" not in out.out + out.err
    doc = json.loads(out.out)
    assert {p["path"] for p in doc["problems"]} >= {"resources.gpus", "job.env.DB_PASS"}


def test_a_kms_secret_reference_is_not_a_secret():
    assert scan({"job": {"secrets": {"HF_TOKEN": {"kms_secret": "team-hf-token"}}}}) == []


def test_redact_keeps_settings_that_only_sound_secret():
    red = redact({"httpTokens": "required", "passwordInherit": False, "keyPairName": "k", "tokens": 5,
                  "password": "hunter2", "userData": "export X=AKIAIOSFODNN7EXAMPLE"})
    assert red["httpTokens"] == "required" and red["passwordInherit"] is False and red["keyPairName"] == "k"
    assert red["password"] == REDACTED and "AKIA" not in red["userData"]


def test_error_messages_are_scrubbed_even_when_a_rule_repeats_the_value():
    with pytest.raises(InputError) as err:
        parse_profile({**BASE, "name": "LTAI5tNameField12345", "job": {"env": {"LTAI5tNameField12345": "x"}}})
    text = "\n".join(err.value.lines()) + json.dumps(err.value.to_dict())
    assert "LTAI5tNameField12345" not in text
