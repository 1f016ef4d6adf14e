"""Issue 13's reproducers that are not runs in failures.json: each gives a clear error or a safe
result (wildcard OSS access, NaN and far-future overlays, names and values that broke things
downstream, SSH sources, confined profile paths, plain credentials in stack config, CI output)."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path

import pytest

from components.identity import oss_policy_document
from trainstack.stack_config import check_auto_release_at, check_stack_config, profile_path
from policies.runner import run_policies
from trainstack.catalog.overlay import validate_overlay
from trainstack.cidrs import ssh_source_problem
from trainstack.cli import main
from trainstack.errors import InputError
from trainstack.ossuri import OssUriError, parse_oss_uri
from trainstack.profile import parse_profile
from trainstack.resolver import resolve

ROOT = Path(__file__).resolve().parents[2]
BASE = {"name": "t", "model": {"preset": "llama-3.2-1b"}, "resources": {"gpus": 1, "target": "ecs"}}


def _problem(doc) -> str:
    with pytest.raises(InputError) as err:
        parse_profile(doc, file="p.yaml")
    return "\n".join(err.value.lines())


# ---- item 3: wildcards in OSS URIs -----------------------------------------------------------
@pytest.mark.parametrize("field, uri", [
    ("code_uri", "oss://*/code.tar.gz"), ("dataset_uri", "oss://*/"), ("dataset_uri", "oss://team-*/"),
    ("dataset_uri", "oss://bucket/data*/"), ("code_uri", "oss://Bucket/x.tgz"), ("dataset_uri", "oss://ab/"),
    ("dataset_uri", "oss://bucket/../x/"), ("dataset_uri", "oss://bucket//x/"), ("code_uri", "oss://b-1:80/x"),
    ("dataset_uri", "oss://bucket/x?y=1"),
])
def test_oss_uris_that_name_no_real_bucket_are_refused(field, uri):
    doc = copy.deepcopy(BASE)
    doc.setdefault("job" if field == "code_uri" else "storage", {})[field] = uri
    assert "oss:// URI" in _problem(doc)


def test_oss_uris_parse_with_alibabas_rules():
    assert parse_oss_uri("oss://my-team-data/qwen/").key == "qwen/"
    assert parse_oss_uri("oss://a1b/x/y.tgz").ram_object_resource() == "acs:oss:*:*:a1b/x/y.tgz"
    for bad in ("oss://-ab/", "oss://ab-/", "oss://a_b/", "oss://" + "a" * 64 + "/"):
        with pytest.raises(OssUriError):
            parse_oss_uri(bad)


def test_the_node_role_names_only_concrete_buckets_and_prefixes():
    doc = copy.deepcopy(BASE)
    doc["storage"] = {"dataset_uri": "oss://team-data/llama/", "checkpoint": "oss"}
    doc["job"] = {"code_uri": "oss://team-code/run1/code.tar.gz"}
    policy = oss_policy_document(resolve(parse_profile(doc)))
    resources = [r for s in policy["Statement"] for r in s["Resource"]]
    assert all(r.split(":", 4)[4].split("/")[0].replace("-", "").isalnum() for r in resources), resources
    assert "acs:oss:*:*:team-data/llama/*" in resources and "acs:oss:*:*:team-code/run1/code.tar.gz" in resources


def test_a_wildcard_bucket_policy_is_blocked():
    doc = json.dumps({"Version": "1", "Statement": [{"Effect": "Allow", "Action": ["oss:GetObject"],
                                                     "Resource": ["acs:oss:*:*:*"]}]})
    verdicts = run_policies([{"type": "alicloud:ram/policy:Policy", "name": "p",
                              "inputs": {"policyName": "p", "policyDocument": doc}}])
    assert [(v["policy"], v["level"]) for v in verdicts] == [("no-wildcard-oss-access", "mandatory")]
    attach = run_policies([{"type": "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment", "name": "a",
                            "inputs": {"policyName": "AliyunOSSFullAccess", "policyType": "System", "roleName": "r"}}])
    assert [v["policy"] for v in attach] == ["no-wildcard-oss-access"]


# ---- item 6: finite numbers, sane dates ------------------------------------------------------
def _overlay(**prices) -> dict:
    return {"schema_version": 1, "region": "cn-shenzhen", "source": "test", "fetched_at": "2025-01-02T03:04:05Z",
            "currency": "CNY", "instance_types": [{"name": "ecs.gn7i-c8g1.2xlarge", "family": "gn7i", "gpu_count": 1}],
            "prices": {"ecs.gn7i-c8g1.2xlarge": prices or {"on_demand": 9.5}}}


@pytest.mark.parametrize("change, needle", [
    (lambda r: r["prices"]["ecs.gn7i-c8g1.2xlarge"].update(on_demand=float("nan")), "on_demand"),
    (lambda r: r["prices"]["ecs.gn7i-c8g1.2xlarge"].update(on_demand=float("inf")), "on_demand"),
    (lambda r: r["instance_types"][0].update(gpu_count=1_000_000), "gpu_count"),
    (lambda r: r.update(fetched_at="9999-12-31T00:00:00Z"), "in the future"),
    (lambda r: r.update(currency="USD", usd_to_cny_rate=float("inf")), "usd_to_cny_rate"),
])
def test_overlays_need_finite_numbers_and_a_real_date(change, needle):
    rec = _overlay()
    assert validate_overlay(rec) == []
    change(rec)
    assert any(needle in p for p in validate_overlay(rec))


def test_usd_rate_inf_is_refused(capsys):
    assert main(["catalog", "refresh", "--region", "cn-shenzhen", "--usd-rate", "inf", "--dry-run"]) == 2
    assert "--usd-rate" in capsys.readouterr().err


@pytest.mark.parametrize("section, field, value", [
    ("resources", "max_hourly_cost", float("nan")), ("resources", "max_total_cost", float("inf")),
    ("training", "tokens", float("nan")), ("storage", "dataset_gib", float("inf")),
])
def test_profiles_refuse_nan_and_infinity(section, field, value):
    doc = copy.deepcopy(BASE)
    doc.setdefault(section, {})[field] = value
    assert f"{section}.{field}" in _problem(doc)


def test_a_tiny_budget_is_infeasible_and_plan_json_is_standard(tmp_path, capsys):
    import yaml

    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({**BASE, "resources": {"gpus": 1, "target": "ecs", "max_total_cost": 1.0},
                                 "training": {"tokens": 1e9}}))
    code = main(["plan", "--format", "json", str(f)])
    out = capsys.readouterr().out
    assert code == 3 and "nan" not in out.lower()
    json.loads(out, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))


# ---- item 9: names and values that broke things downstream ---------------------------------
@pytest.mark.parametrize("doc, needle", [
    ({**BASE, "name": "llama\n"}, "name: must be DNS-safe"),
    ({**BASE, "name": "a--b"}, "name: must be DNS-safe"),
    ({**BASE, "zone": "cn-shenzhen-a; rm -rf /"}, "zone"),
    ({**BASE, "zone": "cn-shenzhen-zz-top"}, "not in region"),
    ({**BASE, "model": {"architecture": {"hidden_size": 256, "num_layers": 2, "num_attention_heads": 4,
                                         "num_kv_heads": 4, "intermediate_size": 1024, "vocab_size": 1000,
                                         "tie_embeddings": True}},
      "training": {"method": "lora", "lora": {"rank": 512}}}, "above the model's hidden size"),
    ({**BASE, "access": {"ssh_cidrs": ["::ffff:0.0.0.0/96"]}}, "whole internet"),
    ({**BASE, "access": {"ssh_cidrs": ["2002::/16"]}}, "whole internet"),
    ({**BASE, "access": {"ssh_cidrs": ["8.8.0.0/16"]}}, "public addresses"),
    ({**BASE, "tags": {"team": "a\nb"}}, "control characters"),
    ({**BASE, "access": {"key_pair": "k p"}}, "key pair name"),
])
def test_values_that_broke_downstream_rules_are_refused(doc, needle):
    assert needle in _problem(doc)


def test_ssh_sources_are_judged_as_the_ipv4_they_embed():
    assert ssh_source_problem("10.0.0.0/8") is None and ssh_source_problem("203.0.113.0/24") is None
    assert ssh_source_problem("::ffff:10.0.0.0/104") is None
    assert "whole internet" in ssh_source_problem("64:ff9b::/96")
    rule = {"type": "alicloud:ecs/securityGroupRule:SecurityGroupRule", "name": "ssh",
            "inputs": {"type": "ingress", "ipProtocol": "tcp", "portRange": "22/22", "ipv6CidrIp": "::ffff:0:0/96"}}
    assert [v["policy"] for v in run_policies([rule])] == ["no-public-ssh"]


def test_auto_release_at_must_be_a_real_future_time():
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert check_auto_release_at("2031-01-31T18:00:00Z", now) == "2031-01-31T18:00:00Z"
    for bad in ("2031-02-30T00:00:00Z", "2031-01-31T25:00:00Z", "2031-01-31 18:00", "2025-01-01T00:00:00Z"):
        with pytest.raises(InputError, match="autoReleaseAt"):
            check_auto_release_at(bad, now)


def test_a_plain_access_key_in_stack_config_is_refused():
    with pytest.raises(InputError, match="plain stack config"):
        check_stack_config({"alicloud:accessKey": "x"})
    check_stack_config({"alicloud:accessKey": "x"}, ["alicloud:accessKey"])


@pytest.mark.parametrize("value", ["../../etc/shadow", "/etc/shadow", "profiles/../../README.md"])
def test_trainstack_profile_is_confined_to_stacks(value):
    with pytest.raises(InputError, match="outside stacks"):
        profile_path(value)
    assert profile_path("profiles/llama3-8b-lora.yaml").is_file()


def test_a_symlink_out_of_stacks_is_refused(tmp_path, monkeypatch):
    stacks = tmp_path / "stacks"
    (stacks / "profiles").mkdir(parents=True)
    (stacks / "profiles" / "evil.yaml").symlink_to("/etc/passwd")
    with pytest.raises(InputError, match="outside stacks"):
        profile_path("profiles/evil.yaml", tmp_path)


def test_the_ci_comment_never_repeats_a_foreign_files_lines(tmp_path, monkeypatch):
    from trainstack.preview import ci

    proj = tmp_path / "proj"
    (proj / "stacks").mkdir(parents=True)
    (proj / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text() + f"main: {ROOT}\n")
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$salt$ShadowLineMarker:20228:0:99999:7:::\n")
    (proj / "stacks" / "Pulumi.evil.yaml").write_text(f"config:\n  trainstack:profile: {secret}\n")
    monkeypatch.chdir(proj)
    out = tmp_path / "comment.md"
    assert ci.main(["comment", "--base-plans", str(tmp_path), "--out", str(out), "evil"]) == 2
    text = out.read_text()
    assert "cannot be planned" in text and "outside stacks" in text and "ShadowLineMarker" not in text


def test_a_nan_given_value_keeps_the_error_json_standard(tmp_path, capsys):
    f = tmp_path / "p.yaml"
    f.write_text("name: a\nmodel: {preset: llama-3-8b}\nresources: {max_hourly_cost: .nan}\n")
    assert main(["validate", "--json", str(f)]) == 2
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(c))
    assert doc["problems"][0]["path"] == "resources.max_hourly_cost"
