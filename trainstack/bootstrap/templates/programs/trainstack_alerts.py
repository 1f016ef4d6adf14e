#!/usr/bin/env python3
"""trainstack node programs: alerts, the job's events posted to the profile's webhook (docs/alerts.md).

``follow``: run beside the heartbeat (trainstack-heartbeat.service), on every node, for as long as the
node runs. It follows RUN/events.jsonl, where :func:`trainstack_events.emit` appends every event of
the agent (the launch script, the spot watcher, the budget guard), and posts the ones the profile
asks for (ALERTS_EVENTS) to the webhook whose URL is the value of the KMS secret ALERTS_SECRET (read
with the RAM role, held in memory only, never logged: errors are redacted). Why a follower and not a
post from ``emit``: the spot watcher and the launch script must never wait on the internet, and a
webhook that is down must cost nothing but a log line; the follower posts with a bounded timeout and
a few retries, then moves on, and its offset (RUN/alerts-offset) makes a restart neither lose nor
repeat an event. Events of the whole job are posted by node 0 only (every node's guard sees the same
spend); a node's own events (a reclaim notice, a replacement joining) by that node.

``wait --timeout S``: the launch script's last step before billing stops: wait (bounded) until the
follower has posted what the events file holds, so the job's end reaches the webhook.

Bodies: DingTalk custom robot ``msgtype: markdown`` with ``title`` and ``text``
(https://open.dingtalk.com/document/robots/custom-robot-access; the same fields in Alibaba's
ACS::Notify::DingTalkWebhook, https://help.aliyun.com/en/oos/user-guide/acs-notify-dingtalkwebhook),
Slack incoming webhook ``text`` (the notification fallback) and ``blocks``
(https://api.slack.com/messaging/webhooks), or the event record itself as JSON; each with the plan's
tokens/s and CNY/h against what the last heartbeat measured. Stdlib only, Python 3.6 compatible.
"""

import fcntl
import json
import os
import sys
import time
from urllib.error import HTTPError, URLError
from urllib.parse import parse_qsl, urlsplit
from urllib.request import ProxyHandler, Request, build_opener

from trainstack_metadata import atomic_write, log

#: profile event -> the agent's events (trainstack_events.EVENTS) it stands for
PROFILE_EVENTS = {"job_start": ("job_started", "job_resumed"), "preemption": ("preemption_notice",),
                  "replacement": ("replacement_joined",), "job_end": ("job_ended", "node0_lost"),
                  "guard_stop": ("guard_stop",)}
#: events about the whole job: posted from node 0 only
JOB_EVENTS = ("job_started", "job_resumed", "job_ended", "guard_stop")
TITLES = {
    "job_started": "job started (settings %(generation).12s)",
    "job_resumed": "job resumed: %(why)s (settings %(generation).12s)",
    "preemption_notice": "spot reclaim notice: %(node)s is released at %(termination_time)s",
    "replacement_joined": "%(node)s joined the running job (settings %(generation).12s)",
    "job_ended": "job ended: %(reason)s (exit %(rc)s, settings %(generation).12s)",
    "node0_lost": "job lost: no heartbeat from node 0 for %(seconds)ss",
    "guard_stop": "budget guard stops the job: %(message)s",
}
REDACTED = "***"


class _Missing(dict):
    def __missing__(self, key):
        return "?"


def _number(env, name):
    try:
        return float(env.get(name) or "x")
    except ValueError:
        return None


def _read_json(path):
    try:
        with open(path) as fh:
            value = json.load(fh)
        return value if isinstance(value, dict) else {}
    except (OSError, IOError, ValueError):
        return {}


def figures(env, heartbeat):
    """The plan's figures (job settings) beside the last heartbeat's measurements (docs/status.md)."""
    progress, guard, billing = (heartbeat.get(k) or {} for k in ("progress", "guard", "billing"))
    nodes = heartbeat.get("nodes") or _number(env, "NNODES") or 1
    spent = guard.get("cluster_spent_cny")
    if spent is None and billing.get("spent_cny") is not None:
        spent = billing["spent_cny"] * nodes
    return {"plan": {"tokens_per_second": _number(env, "PLAN_TOKENS_PER_SECOND"),
                     "hourly_cny": _number(env, "PLAN_HOURLY_CNY")},
            "measured": {"tokens_per_second": progress.get("tokens_per_second"),
                         "tokens_per_second_avg": progress.get("tokens_per_second_avg"),
                         "tokens": progress.get("tokens"), "spent_cny": spent,
                         "billed_hours": None if billing.get("billed_seconds") is None
                         else round(billing["billed_seconds"] / 3600.0, 3),
                         "at": heartbeat.get("written_at")}}


def _fmt(value, unit, places=0):
    return "?" if value is None else ("{:,.%df} %s" % (places, unit)).format(value)


def figure_lines(fig):
    plan, got = fig["plan"], fig["measured"]
    share = ""
    if plan["tokens_per_second"] and got["tokens_per_second"] is not None:
        share = " (%d %% of plan)" % round(100.0 * got["tokens_per_second"] / plan["tokens_per_second"])
    return ["plan: %s, %s" % (_fmt(plan["tokens_per_second"], "tokens/s"), _fmt(plan["hourly_cny"], "CNY/h", 2)),
            "measured: %s%s, %s spent so far" % (_fmt(got["tokens_per_second"], "tokens/s"), share,
                                                 _fmt(got["spent_cny"], "CNY", 2))]


def title(record, node):
    return TITLES.get(record.get("event"), "%(event)s") % _Missing(record, node=node)


def body(fmt, record, env, heartbeat):
    """The JSON document one event is posted as, in the profile's format."""
    stack, node = env.get("NAME") or "?", env.get("NODE_NAME") or "?"
    if heartbeat.get("instance_id"):  # pool nodes share one name
        node = "%s (%s)" % (node, heartbeat["instance_id"])
    fig = figures(env, heartbeat)
    head = "trainstack %s: %s" % (stack, title(record, node))
    lines = ["node: %s" % node] + figure_lines(fig)
    if fmt == "dingtalk":
        return {"msgtype": "markdown", "markdown": {
            "title": head, "text": "#### %s\n\n%s\n" % (head, "\n".join("- " + line for line in lines))}}
    if fmt == "slack":
        return {"text": head, "blocks": [{"type": "section", "text": {
            "type": "mrkdwn", "text": "*%s*\n%s" % (head, "\n".join(lines))}}]}
    return dict(record, stack=stack, node=node, title=title(record, node), figures=fig)


def redact(text, url):
    """``text`` without the URL or any part of it that carries the token (path, query values)."""
    parts = urlsplit(url)
    for piece in sorted({url, parts.path, parts.query} | {v for _, v in parse_qsl(parts.query)}, key=len,
                        reverse=True):
        if piece and len(piece) >= 4 and piece != "/":
            text = text.replace(piece, REDACTED)
    return text


def post(url, doc, fmt, relay=None, timeout=10.0, attempts=3, delay=2.0, sleep=time.sleep):
    """Post ``doc``; (True, what) or (False, why), never an exception and never the URL. Retried:
    network errors, timeouts, HTTP 429 and 5xx; not retried: other 4xx and a robot's refusal."""
    opener = build_opener(ProxyHandler({"http": relay, "https": relay} if relay else {}))
    data = json.dumps(doc, sort_keys=True).encode("utf-8")
    why = "not tried"
    for attempt in range(1, attempts + 1):
        try:
            req = Request(url, data=data, headers={"Content-Type": "application/json; charset=utf-8"})
            with opener.open(req, timeout=timeout) as resp:
                answer = resp.read(65536).decode("utf-8", "replace")
                status = resp.getcode()
            if fmt == "dingtalk":  # the robot answers 200 with errcode 0, or a refusal (keyword, rate)
                try:
                    code = json.loads(answer).get("errcode", 0)
                except (ValueError, AttributeError):
                    code = 0
                if code:
                    return False, redact("DingTalk refused it: errcode %s %s" % (code, answer[:200]), url)
            return True, "HTTP %s" % status
        except HTTPError as exc:
            try:
                why = "HTTP %s %s" % (exc.code, exc.read(300).decode("utf-8", "replace"))
            finally:
                exc.close()
            if exc.code != 429 and exc.code < 500:
                return False, redact(why, url)
        except (URLError, OSError, ValueError) as exc:  # refused, unreachable, timed out, bad URL
            why = "%s: %s" % (type(exc).__name__, exc)
        if attempt < attempts:
            sleep(delay * attempt)
    return False, redact("%s (after %d attempts)" % (why, attempts), url)


class Follower(object):
    """Posts the wanted events of the events file; ``webhook()`` gives the URL (KMS in production)."""

    def __init__(self, env, webhook=None, sleep=time.sleep):
        self.env, self.sleep = env, sleep
        run = env.get("TRAINSTACK_RUN") or "/run/trainstack"
        self.events = env.get("TRAINSTACK_EVENTS_FILE") or os.path.join(run, "events.jsonl")
        self.offset_file = os.path.join(run, "alerts-offset")  # same lifetime as the events file
        self.heartbeat = os.path.join(env.get("TRAINSTACK_STATE") or "/var/lib/trainstack", "heartbeat.json")
        self.fmt = env.get("ALERTS_FORMAT") or "json"
        wanted = (env.get("ALERTS_EVENTS") or "").split()
        self.wanted = {e for w in wanted for e in PROFILE_EVENTS.get(w, ())}
        self.node0 = (env.get("NODE_RANK") or "0") == "0"
        self.relay = env.get("ALERTS_RELAY") or None
        self.timeout = _number(env, "TRAINSTACK_ALERTS_TIMEOUT_SECONDS") or 10.0
        self.attempts = int(_number(env, "TRAINSTACK_ALERTS_ATTEMPTS") or 3)
        self.delay = _number(env, "TRAINSTACK_ALERTS_RETRY_SECONDS")
        self.delay = 2.0 if self.delay is None else self.delay
        self._webhook, self.url = webhook or self._from_kms, None
        self.posted = []  # (event, ok) of this process, for the tests and the log

    def _from_kms(self):
        from trainstack_launch import fetch_secrets

        return fetch_secrets([("alerts webhook", self.env["ALERTS_SECRET"])], self.env.get("REGION"),
                             attempts=2)["alerts webhook"]

    def wants(self, record):
        name = record.get("event")
        return name in self.wanted and (self.node0 or name not in JOB_EVENTS)

    def offset(self):
        try:
            with open(self.offset_file) as fh:
                return int(fh.read().strip() or 0)
        except (OSError, IOError, ValueError):
            return 0

    def pending(self):
        """[(offset after the line, record)] of the complete lines not handled yet."""
        start = self.offset()
        try:
            with open(self.events, "rb") as fh:
                fh.seek(start)
                data = fh.read()
        except (OSError, IOError):
            return []
        out, pos = [], start
        for line in data.split(b"\n")[:-1]:  # a torn last line waits for the next poll
            pos += len(line) + 1
            try:
                rec = json.loads(line.decode("utf-8"))
            except ValueError:
                rec = {}
            out.append((pos, rec if isinstance(rec, dict) else {}))
        return out

    def ensure_url(self):
        if self.url is None:
            try:
                url = (self._webhook() or "").strip()
            except Exception as exc:  # KMS unreachable, no such secret, no role: try again later
                log("alerts: the webhook secret %s cannot be read now: %s" % (self.env.get("ALERTS_SECRET"),
                                                                               type(exc).__name__))
                return False
            if not url.lower().startswith(("https://", "http://")):
                log("alerts: the KMS secret %s does not hold an http(s) URL: alerts are not posted"
                    % self.env.get("ALERTS_SECRET"))
                self.url = ""
            else:
                self.url = url
        return True

    def step(self):
        """Handle what is pending; False when the webhook could not be read (nothing advanced)."""
        for pos, rec in self.pending():
            if self.wants(rec):
                if not self.ensure_url():
                    return False
                if self.url:
                    doc = body(self.fmt, rec, self.env, _read_json(self.heartbeat))
                    ok, what = post(self.url, doc, self.fmt, self.relay, self.timeout, self.attempts, self.delay,
                                    self.sleep)
                    host = urlsplit(self.url).hostname
                    log("alerts: %s %s to %s: %s" % (rec["event"], "posted" if ok else "NOT posted", host, what))
                    self.posted.append((rec["event"], ok))
            atomic_write(self.offset_file, "%d\n" % pos)
        return True

    def drained(self):
        return not self.pending()


def follow(env, webhook=None, sleep=time.sleep, polls=None):
    """Follow the events file until stopped (``polls``: that many polls, for tests); one follower a node."""
    poll = _number(env, "TRAINSTACK_ALERTS_POLL_SECONDS") or 2.0
    run = env.get("TRAINSTACK_RUN") or "/run/trainstack"
    if not os.path.isdir(run):
        os.makedirs(run)
    with open(os.path.join(run, "alerts.lock"), "a") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (OSError, IOError):
            log("alerts: another follower runs on this node")
            return 0
        return _loop(env, webhook, sleep, polls, poll)


def _loop(env, webhook, sleep, polls, poll):
    follower, backoff, n = Follower(env, webhook, sleep), poll, 0
    log("alerts: following %s (%s, events: %s)" % (follower.events, follower.fmt, env.get("ALERTS_EVENTS")))
    while polls is None or n < polls:
        n += 1
        try:
            backoff = poll if follower.step() else min(backoff * 2, 300.0)
        except Exception as exc:  # never let the follower die on one bad event
            log("alerts: %s: %s" % (type(exc).__name__, redact(str(exc), follower.url or "-")))
        sleep(backoff)
    return 0


def wait(env, timeout, sleep=time.sleep, clock=time.monotonic):
    """Wait until everything in the events file was handled; 0 drained, 1 timed out (logged)."""
    follower, end = Follower(env), clock() + timeout
    while not follower.drained():
        if clock() >= end:
            log("alerts: %ds passed and events remain unposted: going on" % timeout)
            return 1
        sleep(0.5)
    return 0


def main(argv, env=None):
    env = dict(os.environ if env is None else env)
    if not env.get("ALERTS_SECRET"):
        return 0  # the profile has no alerts
    if argv[:1] == ["follow"]:
        return follow(env)
    if argv[:2] == ["wait", "--timeout"] and len(argv) == 3:
        return wait(env, float(argv[2]))
    log("usage: trainstack_alerts.py follow | wait --timeout S")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
