"""Alerts on the node (trainstack_alerts.py as rendered): each format's body for each event, with the plan's
figures beside the heartbeat's; posts retried a few times and never fatal; the webhook URL (its token)
never in a log line; node 0 alone posts the job's events; a restart neither loses nor repeats one; the
relay carries the posts; the launch script's last step waits for them. A fake webhook on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

TOKEN = "f00dfeedcafe0123456789abcdef0123456789abcdef0123456789abcdef0123"
EVENTS = {  # one record of each agent event alerts may post, as trainstack_events.emit writes them
    "job_started": {"generation": "a" * 64},
    "job_resumed": {"generation": "a" * 64, "why": "the node started again"},
    "preemption_notice": {"termination_time": "2026-12-02T03:04:05Z"},
    "replacement_joined": {"generation": "b" * 64},
    "job_ended": {"reason": "succeeded", "rc": "0", "generation": "a" * 64},
    "node0_lost": {"seconds": "900"},
    "guard_stop": {"message": "spend so far 95.00 CNY + 5.00 CNY for 360s to save a checkpoint reaches "
                              "max_total_cost 100 CNY"},
}
PROFILE_OF = {"job_started": "job_start", "job_resumed": "job_start", "preemption_notice": "preemption",
              "replacement_joined": "replacement", "job_ended": "job_end", "node0_lost": "job_end",
              "guard_stop": "guard_stop"}
HEARTBEAT = {"nodes": 2, "instance_id": "i-wz9node0", "written_at": 1764644645.0,
             "progress": {"tokens_per_second": 2400.0, "tokens_per_second_avg": 2350.0, "tokens": 9_000_000},
             "billing": {"billed_seconds": 7200.0, "spent_cny": 40.0}, "guard": {"cluster_spent_cny": 80.0}}


class Webhook:
    """A webhook (and forward proxy) on 127.0.0.1: records each post; ``answers``: (status, body) in turn,
    the last repeating."""

    def __init__(self):
        self.posts, self.answers, self.lock = [], [(200, '{"errcode":0,"errmsg":"ok"}')], threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer.lock:
                    outer.posts.append({"path": self.path, "type": self.headers.get("Content-Type"),
                                        "body": json.loads(data)})
                    status, text = outer.answers[0] if len(outer.answers) == 1 else outer.answers.pop(0)
                self.send_response(status)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text.encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def address(self):
        return "127.0.0.1:%d" % self.server.server_address[1]

    @property
    def url(self):
        return "http://%s/robot/send?access_token=%s" % (self.address, TOKEN)


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.server.shutdown()
    hook.server.server_close()


def node_env(tmp_path, fmt="json", events="job_start preemption replacement job_end guard_stop", rank="0", **extra):
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "state" / "heartbeat.json").write_text(json.dumps(HEARTBEAT))
    env = {"NAME": "llama-ft", "NODE_NAME": "llama-ft-node-0", "NODE_RANK": rank, "REGION": "cn-shenzhen",
           "NNODES": "2", "ALERTS_SECRET": "team/alert-hook", "ALERTS_FORMAT": fmt, "ALERTS_EVENTS": events,
           "ALERTS_RELAY": "", "PLAN_TOKENS_PER_SECOND": "3000", "PLAN_HOURLY_CNY": "20",
           "TRAINSTACK_RUN": str(tmp_path / "run"), "TRAINSTACK_STATE": str(tmp_path / "state"),
           "TRAINSTACK_ALERTS_RETRY_SECONDS": "0", "TRAINSTACK_ALERTS_TIMEOUT_SECONDS": "5"}
    return dict(env, **extra)


def emit_all(programs, env, names):
    os.environ["TRAINSTACK_RUN"] = env["TRAINSTACK_RUN"]
    try:
        for name in names:
            programs.events.emit(name, **EVENTS[name])
    finally:
        del os.environ["TRAINSTACK_RUN"]


def follower(programs, env, url, sleeps=None):
    return programs.alerts.Follower(env, webhook=lambda: url, sleep=(sleeps.append if sleeps is not None
                                                                       else lambda s: None))


@pytest.mark.parametrize("fmt", ["dingtalk", "slack", "json"])
def test_each_event_is_posted_in_the_format_asked_with_plan_and_measured_figures(programs, webhook, tmp_path,
                                                                                  fmt, capsys):
    env = node_env(tmp_path, fmt)
    emit_all(programs, env, list(EVENTS))
    f = follower(programs, env, webhook.url)
    assert f.step() and f.posted == [(name, True) for name in EVENTS]
    assert len(webhook.posts) == len(EVENTS)
    for name, post in zip(EVENTS, webhook.posts):
        doc = post["body"]
        assert post["type"] == "application/json; charset=utf-8"
        if fmt == "dingtalk":  # the custom robot's markdown message: msgtype, markdown.title, markdown.text
            assert set(doc) == {"msgtype", "markdown"} and doc["msgtype"] == "markdown"
            text, head = doc["markdown"]["text"], doc["markdown"]["title"]
            assert head.startswith("trainstack llama-ft: ") and text.startswith("#### " + head)
        elif fmt == "slack":  # incoming webhook: text (the notification's fallback) and blocks
            assert set(doc) == {"text", "blocks"} and doc["text"].startswith("trainstack llama-ft: ")
            (block,) = doc["blocks"]
            assert block["type"] == "section" and block["text"]["type"] == "mrkdwn"
            text = block["text"]["text"]
        else:  # the event record itself, with where it comes from and the figures
            assert doc["event"] == name and all(doc[k] == v for k, v in EVENTS[name].items())
            assert doc["figures"] == {"plan": {"tokens_per_second": 3000.0, "hourly_cny": 20.0}, "measured": {
                "tokens_per_second": 2400.0, "tokens_per_second_avg": 2350.0, "tokens": 9_000_000, "spent_cny": 80.0,
                "billed_hours": 2.0, "at": 1764644645.0}}
            text = doc["title"]
            assert doc["stack"] == "llama-ft"
        if fmt != "json":
            assert "plan: 3,000 tokens/s, 20.00 CNY/h" in text
            assert "measured: 2,400 tokens/s (80 % of plan), 80.00 CNY spent so far" in text
        shown = json.dumps(doc)
        assert all(v[:12] in shown for v in EVENTS[name].values()), (name, doc)  # every field, in some form
    assert TOKEN not in capsys.readouterr().err


@pytest.mark.parametrize("asked", ["job_start", "preemption", "replacement", "job_end", "guard_stop",
                                   "job_end guard_stop"])
def test_only_the_events_the_profile_names_are_posted(programs, webhook, tmp_path, asked):
    env = node_env(tmp_path, events=asked)
    emit_all(programs, env, list(EVENTS) + ["pool_scaled_to_zero"] * 0)
    assert follower(programs, env, webhook.url).step()
    posted = [p["body"]["event"] for p in webhook.posts]
    assert posted == [name for name in EVENTS if PROFILE_OF[name] in asked.split()]


def test_the_jobs_events_come_from_node_0_and_a_nodes_own_from_that_node(programs, webhook, tmp_path):
    env = node_env(tmp_path, rank="1")
    emit_all(programs, env, list(EVENTS))
    assert follower(programs, env, webhook.url).step()
    assert [p["body"]["event"] for p in webhook.posts] == ["preemption_notice", "replacement_joined", "node0_lost"]


def test_a_failed_post_is_retried_then_left_behind_and_the_url_is_never_logged(programs, webhook, tmp_path, capsys):
    webhook.answers = [(503, "busy " + TOKEN), (500, "still busy"), (502, "down"), (200, "ok")]
    env = node_env(tmp_path, "slack", events="job_start job_end")
    emit_all(programs, env, ["job_started", "job_ended"])
    sleeps: list = []
    f = follower(programs, env, webhook.url, sleeps)
    assert f.step()  # never raises
    assert f.posted == [("job_started", False), ("job_ended", True)]
    assert len(webhook.posts) == 4 and len(sleeps) == 2, "three attempts for the first event, bounded"
    err = capsys.readouterr().err
    assert "job_started NOT posted to 127.0.0.1" in err and "after 3 attempts" in err
    assert TOKEN not in err and "access_token" not in err and "/robot/send" not in err
    assert not f.pending(), "handled: a restart does not post either again"


@pytest.mark.parametrize("status", [400, 403, 404])
def test_a_webhook_that_refuses_is_not_retried(programs, webhook, tmp_path, status):
    webhook.answers = [(status, "invalid_token")]
    env = node_env(tmp_path, events="job_end")
    emit_all(programs, env, ["job_ended"])
    f = follower(programs, env, webhook.url)
    assert f.step() and f.posted == [("job_ended", False)] and len(webhook.posts) == 1


def test_a_dingtalk_refusal_in_a_200_answer_is_a_failure(programs, webhook, tmp_path, capsys):
    webhook.answers = [(200, '{"errcode":310000,"errmsg":"keywords not in content"}')]
    env = node_env(tmp_path, "dingtalk", events="job_end")
    emit_all(programs, env, ["job_ended"])
    f = follower(programs, env, webhook.url)
    assert f.step() and f.posted == [("job_ended", False)]
    assert "errcode 310000" in capsys.readouterr().err


def test_an_unreachable_webhook_costs_a_few_bounded_attempts(programs, tmp_path, capsys):
    env = node_env(tmp_path, events="job_end", TRAINSTACK_ALERTS_TIMEOUT_SECONDS="1")
    emit_all(programs, env, ["job_ended"])
    url = "http://127.0.0.1:9/hook/%s" % TOKEN  # discard port: refused
    f = follower(programs, env, url)
    assert f.step() and f.posted == [("job_ended", False)]
    assert TOKEN not in capsys.readouterr().err


def test_a_webhook_secret_not_yet_readable_keeps_the_events_for_later(programs, webhook, tmp_path):
    env = node_env(tmp_path, events="job_start")
    emit_all(programs, env, ["job_started"])
    answers = [RuntimeError("cannot read KMS secret"), webhook.url]

    def kms():
        value = answers.pop(0)
        if isinstance(value, Exception):
            raise value
        return value

    f = programs.alerts.Follower(env, webhook=kms, sleep=lambda s: None)
    assert not f.step() and not webhook.posts and f.pending()
    assert f.step() and [p["body"]["event"] for p in webhook.posts] == ["job_started"]


def test_a_secret_that_is_no_url_disables_alerts_without_printing_it(programs, webhook, tmp_path, capsys):
    env = node_env(tmp_path, events="job_start")
    emit_all(programs, env, ["job_started"])
    f = follower(programs, env, "not-a-url-" + TOKEN)
    assert f.step() and not webhook.posts and not f.pending()
    err = capsys.readouterr().err
    assert "does not hold an http(s) URL" in err and TOKEN not in err


def test_the_relay_carries_the_posts(programs, webhook, tmp_path):
    env = node_env(tmp_path, events="job_start", ALERTS_RELAY="http://" + webhook.address)
    emit_all(programs, env, ["job_started"])
    target = "http://hooks.example.invalid/services/%s" % TOKEN  # unresolvable: only the relay reaches it
    assert follower(programs, env, target).step()
    (post,) = webhook.posts
    assert post["path"] == target, "a forward proxy gets the absolute URL"


def test_the_follower_reads_the_webhook_from_kms_and_a_second_one_steps_aside(programs, webhook, fake_cloud,
                                                                               tmp_path, monkeypatch, capsys):
    fake_cloud.secrets["team/alert-hook"] = webhook.url
    monkeypatch.setenv("TRAINSTACK_METADATA_URL", fake_cloud.url)
    monkeypatch.setenv("TRAINSTACK_KMS_ENDPOINT", fake_cloud.url)
    env = node_env(tmp_path, events="job_start")
    emit_all(programs, env, ["job_started"])
    assert programs.alerts.follow(env, sleep=lambda s: None, polls=2) == 0
    (call,) = fake_cloud.kms_calls
    assert call["SecretName"] == "team/alert-hook" and len(webhook.posts) == 1
    import fcntl

    with open(os.path.join(env["TRAINSTACK_RUN"], "alerts.lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert programs.alerts.follow(env, sleep=lambda s: None, polls=1) == 0
    assert "another follower runs" in capsys.readouterr().err and len(webhook.posts) == 1
    assert TOKEN not in capsys.readouterr().err


def test_wait_returns_once_the_events_are_handled_and_gives_up_after_its_timeout(programs, tmp_path, webhook):
    env = node_env(tmp_path, events="job_end")
    alerts = programs.alerts
    assert alerts.wait(env, 5) == 0  # no events file yet
    emit_all(programs, env, ["job_ended"])
    clock = iter(range(100))
    assert alerts.wait(env, 3, sleep=lambda s: None, clock=lambda: next(clock)) == 1
    assert follower(programs, env, webhook.url).step()
    assert alerts.wait(env, 3, sleep=lambda s: None) == 0


def test_the_program_does_nothing_without_alerts_and_knows_its_commands(programs, tmp_path):
    script = str(programs.path("trainstack_alerts.py"))
    env = {k: v for k, v in node_env(tmp_path).items() if k != "ALERTS_SECRET"}
    env["PYTHONPATH"] = str(programs.lib)
    assert subprocess.run([sys.executable, script, "follow"], env=env, timeout=30).returncode == 0
    bad = subprocess.run([sys.executable, script, "post"], env=node_env(tmp_path), capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and "usage" in bad.stderr
