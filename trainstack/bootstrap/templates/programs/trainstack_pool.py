#!/usr/bin/env python3
"""trainstack node programs: a self-healing cluster's run record, settings generation and scale-to-0.

Node 0 owns the **run record** (``RUN_URI``: node 0's status prefix, ``run.json``): at a new job start it
records the settings generation it verified (the SHA-256 of the job settings it trusts from its tag),
at the end why and when the job ended. Every pool node launches into the generation the record names:
it fetches ``job/settings/<generation>.json`` (deploy-written, content-addressed, read-only for the node
role) and checks it against that name, so a replacement arriving after a settings change joins the
running job, and new settings reach every node together at the next job start. A node role can point
the record only at a generation the deploy identity published (never at content of its own).

``--region R --endpoint E COMMAND``, with the OSS venv's Python:

- ``run-start RUN_URI --generation G --instance I``: node 0 starts a run (state ``running``).
- ``run-end RUN_URI --reason R --rc N``: the run ended (state ``ended``; kept until the next start).
- ``run-state RUN_URI``: prints ``STATE GENERATION`` (``none -`` without a record).
- ``generation RUN_URI --wait S``: prints the running generation, waiting up to S s for node 0 to start one.
- ``settings PREFIX_URI DIR --rank N --generation G``: this rank's files of generation G into DIR.
- ``after-exit RUN_URI NODE0_STATUS_URI --grace S --loss S``: a pool node's torchrun exited: prints
  ``ended`` (the run ended: scale to 0), ``rejoin`` (node 0 is alive or rebooting: launch again) or
  ``node0_lost`` (no heartbeat from node 0 for ``--loss`` seconds).
- ``seat POOL_STATUS_URI --seats N --self I --fresh S``: exit 0 when this pool node has a seat in the
  running world (fewer than N other pool nodes report ``training``/``starting`` within S s), 1 when the
  world is full (a node added by growing the pool waits for the next job start).

``scale-to-zero --region R --tag T`` (python3, no SDK): executes the pool's scale-to-0 rule, whose ARI the
deployer tagged on this instance (ESS ExecuteScalingRule, signed with the RAM role; the role may execute
rules of this scaling group only). Stdlib only beside the store, Python 3.6 compatible.
"""

import hashlib
import json
import os
import sys
import tempfile
import time

from trainstack_cloud import ecs_call, ecs_endpoint, rpc_call
from trainstack_events import emit
from trainstack_metadata import Metadata, MetadataError, log
from trainstack_store import split_uri

RUN_KIND = "trainstack-run"
#: ESS 2022-02-22 ExecuteScalingRule (alibabacloud-ess20220222 1.13.3 client.py execute_scaling_rule)
ESS_API_VERSION = "2022-02-22"


def ess_endpoint(region):
    """ESS's VPC endpoint (Auto Scaling API reference, "Request structure": ess-vpc.<region>.aliyuncs.com)."""
    return os.environ.get("TRAINSTACK_ESS_ENDPOINT") or "https://ess-vpc.%s.aliyuncs.com" % region


def _get_json(store, uri):
    bucket, key = split_uri(uri)
    fd, path = tempfile.mkstemp(prefix=".trainstack-")
    os.close(fd)
    try:
        store.get(bucket, key, path)
        with open(path, "rb") as fh:
            return fh.read()
    except Exception as exc:  # the SDK's NoSuchKey, a fake store's FileNotFoundError
        if "NoSuchKey" in str(exc) or isinstance(exc, FileNotFoundError):
            return None
        raise
    finally:
        if os.path.exists(path):
            os.remove(path)


def read_record(store, uri):
    data = _get_json(store, uri)
    try:
        rec = json.loads(data.decode("utf-8")) if data else None
    except ValueError:
        return None
    return rec if isinstance(rec, dict) and rec.get("kind") == RUN_KIND else None


def write_record(store, uri, rec):
    bucket, key = split_uri(uri)
    fd, path = tempfile.mkstemp(prefix=".trainstack-")
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(rec, sort_keys=True) + "\n")
    try:
        store.put(path, bucket, key)
    finally:
        os.remove(path)
    return rec


def run_start(store, uri, generation, instance, now=None):
    return write_record(store, uri, {"kind": RUN_KIND, "state": "running", "generation": generation,
                                     "started_at": int(now or time.time()), "node0": instance})


def run_end(store, uri, reason, rc, now=None):
    rec = read_record(store, uri) or {"kind": RUN_KIND, "generation": None}
    if rec.get("state") == "ended":
        return rec  # the first word stands (node 0's, or the pool node that found node 0 lost)
    rec.update(state="ended", reason=reason, rc=rc, ended_at=int(now or time.time()))
    return write_record(store, uri, rec)


def wait_generation(store, uri, wait, idle=None, poll=None, sleep=time.sleep, clock=time.monotonic):
    """The running generation; None when node 0 starts none within ``wait`` seconds (``idle`` seconds
    while the record says the last run ended: a node ESS launched after the end does not wait an hour)."""
    poll = float(os.environ.get("TRAINSTACK_POOL_POLL_SECONDS") or 10) if poll is None else poll
    start = clock()
    while True:
        rec = read_record(store, uri)
        if rec and rec.get("state") == "running" and rec.get("generation"):
            return str(rec["generation"])
        limit = idle if idle is not None and rec and rec.get("state") == "ended" else wait
        if clock() - start >= limit:
            return None
        sleep(poll)


def settings(store, prefix_uri, dest, rank, generation):
    """Generation ``generation``'s files for ``rank``: the object's SHA-256 must be its name."""
    from trainstack_settings import write_settings

    data = _get_json(store, prefix_uri.rstrip("/") + "/%s.json" % generation)
    if data is None:
        raise ValueError("generation %s is not published under %s" % (generation[:12], prefix_uri))
    got = hashlib.sha256(data).hexdigest()
    if got != generation:
        raise ValueError("generation %s...: the object's SHA-256 is %s..." % (generation[:12], got[:12]))
    return write_settings(json.loads(data.decode("utf-8")), dest, rank, got)


def _beat_age(store, uri, now):
    data = _get_json(store, uri.rstrip("/") + "/heartbeat.json")
    try:
        rec = json.loads(data.decode("utf-8")) if data else {}
    except ValueError:
        rec = {}
    at = rec.get("written_at") if isinstance(rec, dict) else None
    return now - float(at) if isinstance(at, (int, float)) else None


def after_exit(store, run_uri, node0_status_uri, grace, loss, poll=None, sleep=time.sleep):
    """What a pool node does once its torchrun exited (see the module docstring)."""
    poll = float(os.environ.get("TRAINSTACK_POOL_POLL_SECONDS") or 10) if poll is None else poll
    end = time.monotonic() + grace
    while True:  # node 0 writes the end a moment after the rendezvous closes
        rec = read_record(store, run_uri)
        if rec is None or rec.get("state") == "ended":
            return "ended"
        if time.monotonic() >= end:
            break
        sleep(poll)
    age = _beat_age(store, node0_status_uri, time.time())
    started = float(rec.get("started_at") or 0)
    if (age if age is not None else time.time() - started) > loss:
        return "node0_lost"
    return "rejoin"


def seat(store, pool_status_uri, seats, self_id, fresh, now=None):
    now = now or time.time()
    bucket, prefix = split_uri(pool_status_uri, folder=True)
    busy = 0
    for key, _, _ in store.list(bucket, prefix):
        if not key.endswith("/heartbeat.json") or ("/%s/" % self_id) in "/" + key:
            continue
        data = _get_json(store, "oss://%s/%s" % (bucket, key))
        try:
            rec = json.loads(data.decode("utf-8")) if data else {}
        except ValueError:
            continue
        if rec.get("state") in ("starting", "training") and now - float(rec.get("written_at") or 0) < fresh:
            busy += 1
    return busy < seats


def scale_to_zero(region, tag, metadata=None, attempts=3):
    """ExecuteScalingRule on the rule the deployer tagged on this instance; 0 when ESS accepted it."""
    md = metadata or Metadata()
    delay = float(os.environ.get("TRAINSTACK_RETRY_SECONDS", "5"))
    for attempt in range(1, attempts + 1):
        try:
            creds = md.ram_credentials(wait=None if attempt == 1 else 0)
            instance = md.require("meta-data/instance-id")
            answer = ecs_call("ListTagResources", {"RegionId": region, "ResourceType": "instance",
                                                   "ResourceId.1": instance, "Tag.1.Key": tag}, creds,
                              ecs_endpoint(region))
            rules = [t.get("TagValue") for t in (answer.get("TagResources") or {}).get("TagResource") or []
                     if t.get("TagKey") == tag and t.get("TagValue")]
            if not rules:
                log("scale-to-zero: instance %s has no %s tag" % (instance, tag))
                return 1
            rpc_call("ESS", ESS_API_VERSION, "ExecuteScalingRule", {"RegionId": region, "ScalingRuleAri": rules[0]},
                     creds, ess_endpoint(region))
            emit("pool_scaled_to_zero", rule=rules[0])
            return 0
        except (MetadataError, RuntimeError, OSError, ValueError) as exc:
            log("scale-to-zero attempt %d/%d: %s" % (attempt, attempts, exc))
            if attempt < attempts:
                time.sleep(delay * attempt)
    return 1


def _opt(args, name, default=None):
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else default


def main(argv, store_factory=None):
    try:
        if argv[:1] == ["scale-to-zero"]:
            return scale_to_zero(_opt(argv, "--region"), _opt(argv, "--tag"))
        if len(argv) < 6 or argv[0] != "--region" or argv[2] != "--endpoint":
            raise ValueError("usage: --region R --endpoint E COMMAND ARGS | scale-to-zero --region R --tag T")
        if store_factory is None:
            from trainstack_store import sdk_store as store_factory
        store, cmd, args = store_factory(argv[1], argv[3]), argv[4], argv[5:]
        if cmd == "run-start":
            run_start(store, args[0], _opt(args, "--generation"), _opt(args, "--instance"))
        elif cmd == "run-end":
            run_end(store, args[0], _opt(args, "--reason"), int(_opt(args, "--rc", "0")))
        elif cmd == "run-state":
            rec = read_record(store, args[0]) or {}
            sys.stdout.write("%s %s\n" % (rec.get("state") or "none", rec.get("generation") or "-"))
        elif cmd == "generation":
            idle = _opt(args, "--idle")
            found = wait_generation(store, args[0], float(_opt(args, "--wait", "0")),
                                    None if idle is None else float(idle))
            if found is None:
                return 1
            sys.stdout.write(found + "\n")
        elif cmd == "settings":
            settings(store, args[0], args[1], int(_opt(args, "--rank")), _opt(args, "--generation"))
        elif cmd == "after-exit":
            sys.stdout.write(after_exit(store, args[0], args[1], float(_opt(args, "--grace", "60")),
                                        float(_opt(args, "--loss", "3600"))) + "\n")
        elif cmd == "seat":
            return 0 if seat(store, args[0], int(_opt(args, "--seats")), _opt(args, "--self"),
                             float(_opt(args, "--fresh", "120"))) else 1
        else:
            raise ValueError("unknown command %r" % cmd)
        return 0
    except Exception as exc:  # whatever the SDK raised: one line, never a traceback
        log("pool %s failed: %s: %s" % (" ".join(argv[4:5]), type(exc).__name__, exc))
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
