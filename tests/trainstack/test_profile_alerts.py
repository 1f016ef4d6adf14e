"""Profile ``alerts:`` by group: every combination of alerts x network.internet_egress x alerts.relay (none,
inside the VPC, outside it) x platform (ECS, DLC named, DLC by ``target: auto``) is planned exactly when a
post could leave and a node agent runs, else refused with exit 2 naming the field, the same by validate and
plan; a literal URL is refused without being repeated; the plan shows the alerts by the secret's name only,
and the node role may read that one secret."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainstack.cli import main
from trainstack.profile import parse_profile

ROOT = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "stacks" / "profiles" / "llama3-8b-lora.yaml").read_text())
DLC = yaml.safe_load((ROOT / "stacks" / "profiles" / "qwen-7b-dlc.yaml").read_text())
HOOK = {"webhook": {"kms_secret": "team/train-alerts"}, "format": "dingtalk"}
SLACK_URL = "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/" + "a1B2c3D4e5F6g7H8i9J0k1L2"


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    assert "Traceback" not in err.getvalue()
    return rc, (json.loads(out.getvalue()) if out.getvalue().strip() else {}), err.getvalue()


def profile(platform, alerts, egress, relay):
    doc = json.loads(json.dumps(DLC if platform != "ecs" else BASE))
    if platform == "dlc-auto":
        doc["resources"]["target"], doc["dlc"] = "auto", {"workspace_id": "12345"}
    doc["network"] = {"vpc_cidr": "10.0.0.0/16", "internet_egress": egress}
    if alerts:
        doc["alerts"] = dict(HOOK, **({"relay": relay} if relay else {}))
    return doc


def write(tmp_path, doc, name="p.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@settings(max_examples=24, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(platform=st.sampled_from(["ecs", "dlc", "dlc-auto"]), alerts=st.booleans(), egress=st.booleans(),
       relay=st.sampled_from([None, "10.0.8.8:3128", "http://10.0.200.1:8080", "192.168.1.5:3128"]))
def test_every_combination_is_planned_or_refused_naming_the_field(tmp_path, platform, alerts, egress, relay):
    path = write(tmp_path, profile(platform, alerts, egress, relay))
    rc, doc, _ = run(["validate", path, "--json"])
    paths = {p["path"] for p in doc.get("problems", [])} if rc == 2 else set()
    expected = set()
    if alerts:
        if platform != "ecs":
            expected.add("alerts")  # PAI-DLC runs no node agent
        if relay is None and not egress:
            expected.add("alerts")
        if relay and relay.startswith("192.168."):
            expected.add("alerts.relay")
    assert (rc == 2) == bool(expected) and paths == expected, (rc, doc)
    if expected:
        messages = " ".join(p["message"] for p in doc["problems"])
        assert ("network.internet_egress" in messages) == (relay is None and not egress) or platform != "ecs"
        assert ("PAI" in messages) == (platform != "ecs")
        plan_rc, plan_doc, _ = run(["plan", path, "--format", "json"])
        assert plan_rc == 2 and {(p["path"], p["message"]) for p in plan_doc["problems"]} == {
            (p["path"], p["message"]) for p in doc["problems"]}


@pytest.mark.parametrize("webhook", [
    SLACK_URL, "https://oapi.dingtalk.com/robot/send?access_token=" + "0f" * 32,
    "https://hooks.example.com/notify/abcdef0123456789", {"kms_secret": "https://hooks.example.com/x/abcdef0123456789"}])
def test_a_literal_url_is_refused_like_a_secret_and_never_repeated(tmp_path, webhook):
    doc = dict(BASE, network={"internet_egress": True}, alerts={"webhook": webhook, "format": "slack"})
    rc, out, err = run(["validate", write(tmp_path, doc), "--json"])
    assert rc == 2 and any(p["path"].startswith("alerts") for p in out["problems"])
    shown = json.dumps(out) + err
    secret = webhook if isinstance(webhook, str) else webhook["kms_secret"]
    assert secret not in shown and secret.split("/")[-1] not in shown


@pytest.mark.parametrize("alerts, problem", [
    ({"webhook": {"kms_secret": "a"}, "format": "teams"}, "alerts.format"),
    ({"webhook": {"kms_secret": "a"}, "format": "json", "events": []}, "alerts.events"),
    ({"webhook": {"kms_secret": "a"}, "format": "json", "events": ["job_end", "job_end"]}, "alerts.events"),
    ({"webhook": {"kms_secret": "a"}, "format": "json", "events": ["job_finished"]}, "alerts.events.0"),
    ({"webhook": {"kms_secret": "a"}, "format": "json", "relay": "8.8.8.8:3128"}, "alerts.relay"),
    ({"webhook": {"kms_secret": "a"}, "format": "json", "relay": "10.0.0.1:99999"}, "alerts.relay"),
    ({"webhook": {"kms_secret": "a"}, "format": "json", "relay": "proxy.internal:3128"}, "alerts.relay"),
    ({"webhook": {"kms_secret": "a b"}, "format": "json"}, "alerts.webhook.kms_secret"),
    ({"webhook": {"kms_secret": "a", "kms_key_id": "alias/x"}, "format": "json"}, "alerts.webhook.kms_key_id"),
    ({"format": "json"}, "alerts.webhook"),
])
def test_bad_alerts_fields_are_exit_2_at_their_path(tmp_path, alerts, problem):
    doc = dict(BASE, network={"internet_egress": True}, alerts=alerts)
    rc, out, _ = run(["validate", write(tmp_path, doc), "--json"])
    assert rc == 2 and problem in {p["path"] for p in out["problems"]}, out


def test_the_plan_shows_the_alerts_by_the_secrets_name_and_the_role_reads_that_secret(tmp_path):
    doc = dict(BASE, alerts=dict(HOOK, relay="10.0.8.8:3128", events=["job_end", "guard_stop"]))
    rc, out, _ = run(["plan", write(tmp_path, doc), "--format", "json"])
    assert rc == 0
    assert out["plan"]["job"]["alerts"] == {"kms_secret": "team/train-alerts", "kms_key_id": None, "format": "dingtalk",
                                            "events": ["job_end", "guard_stop"], "relay": "10.0.8.8:3128",
                                            "via": "relay"}
    policies = [r for r in out["resources"] if r["type"] == "alicloud:ram/policy:Policy"
                and "GetSecretValue" in json.dumps(r)]
    (policy,) = policies
    assert "acs:kms:cn-shenzhen:*:secret/team/train-alerts" in json.dumps(policy)
    assert "secret/*" not in json.dumps(policy)


def test_a_plan_without_alerts_has_the_document_it_had(tmp_path):
    rc, out, _ = run(["plan", str(ROOT / "stacks" / "profiles" / "llama3-8b-lora.yaml"), "--format", "json"])
    assert rc == 0 and "alerts" not in out["plan"]["job"]
    assert "ALERTS_" not in json.dumps(out)


def test_the_profile_model_keeps_the_default_events_in_a_jobs_order():
    p = parse_profile(dict(BASE, alerts=HOOK))
    assert p.alerts is not None and p.alerts.events == ("job_start", "preemption", "replacement", "job_end",
                                                        "guard_stop")


def test_the_plan_text_and_pr_comment_name_the_alerts_and_never_a_url(tmp_path):
    doc = dict(BASE, network={"internet_egress": True}, alerts=HOOK)
    path = write(tmp_path, doc)
    for fmt in ("text", "markdown"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            assert main(["plan", path, "--format", fmt]) == 0
        assert "dingtalk to the webhook in KMS secret team/train-alerts on job_start, preemption" in out.getvalue()
        assert "via NAT gateway" in out.getvalue() and "://" not in out.getvalue().split("alerts", 1)[1][:200]
