#!/usr/bin/env python3
"""trainstack heartbeat: one node's status record every HEARTBEAT_SECONDS (docs/status.md).

Run by trainstack-heartbeat.service with the OSS venv's Python and node.env in its environment
(the launch script's ``--heartbeat``); one of the node programs the node installs from the stack
bucket, each checked against its sha256 (trainstack_programs).

Each beat reads what the trainer appended to the progress file (TRAINSTACK_PROGRESS_FILE, one
JSON object a line: docs/status.md), this instance's uptime (instance hours: every boot, plus the
instances this node replaced, from its last heartbeat on OSS), spot notices and the launch
script's state files, and writes the record to STATE/heartbeat.json and STATUS_URI/heartbeat.json;
then the budget guard (trainstack_guard) looks at it. Python 3.6 compatible, stdlib only beside
the store.
"""

import json
import os
import sys
import time

import trainstack_guard as guard
from trainstack_metadata import Metadata, MetadataError, atomic_write, log
from trainstack_store import sdk_store, split_uri


HEARTBEAT_SCHEMA = "trainstack.heartbeat/1"
#: stop reasons that mean trainstack stopped the job (the others say how a self-healing run ended)
TRAINSTACK_STOPS = ("budget", "deadline", "max_runtime")
#: measured tokens/s is over the progress lines of this many recent seconds
RATE_WINDOW_SECONDS = 600.0


def _num(value, kind=float):
    """A finite number >= 0 as ``kind``, else None: a progress line is never trusted."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        return None
    return kind(value)


def _read(path, default=None):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except (OSError, IOError):
        return default


def _read_json(path):
    try:
        value = json.loads(_read(path) or "null")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def read_progress(path, offset=0):
    """The trainer's progress lines (docs/status.md: one JSON object a line, with "time") since
    ``offset``; returns (records, new offset). A torn last line waits for the next read."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size < offset:  # truncated or replaced
                offset = 0
            fh.seek(offset)
            data = fh.read()
    except (OSError, IOError):
        return [], offset
    end = data.rfind(b"\n") + 1
    records = []
    for line in data[:end].splitlines():
        try:
            rec = json.loads(line.decode("utf-8"))
        except ValueError:
            continue
        if isinstance(rec, dict) and _num(rec.get("time")) is not None:
            records.append(rec)
    return records, offset + end


class Progress(object):
    """What the progress lines say: step, tokens (whole job), tokens/s, memory peaks, checkpoints."""

    def __init__(self):
        self.samples, self.first = [], None  # (time, tokens) in the window; this run's first
        self.step = self.tokens = self.updated_at = self.allocated = self.reserved = None
        self.checkpoint_at = self.checkpoint_seconds = None

    def add(self, rec):
        t, tokens = rec["time"], _num(rec.get("tokens"), int)
        self.step = _num(rec.get("step"), int) if rec.get("step") is not None else self.step
        if tokens is not None:
            if self.tokens is not None and tokens < self.tokens:  # resumed from an earlier checkpoint
                self.samples, self.first = [], None
            self.tokens, self.updated_at = tokens, t
            self.samples.append((t, tokens))
            self.first = self.first or (t, tokens)
            while len(self.samples) > 2 and self.samples[1][0] <= t - RATE_WINDOW_SECONDS:
                self.samples.pop(0)
        for key in ("allocated", "reserved"):
            value = _num(rec.get(key + "_gib"))
            if value is not None and value > (getattr(self, key) or 0):
                setattr(self, key, value)
        if _num(rec.get("checkpoint_seconds")) is not None:
            self.checkpoint_at, self.checkpoint_seconds = t, float(rec["checkpoint_seconds"])

    def rates(self):
        """(tokens/s over the recent window, since this run's first line, the window's seconds)."""
        if len(self.samples) < 2 or self.samples[-1][0] <= self.samples[0][0]:
            return None, None, None
        (t0, n0), (t1, n1), (tf, nf) = self.samples[0], self.samples[-1], self.first
        return (n1 - n0) / (t1 - t0), (n1 - nf) / (t1 - tf), t1 - t0


def nvidia_smi_used_gib():
    """Most memory one GPU uses now (nvidia-smi memory.used: reserved plus CUDA context), or None."""
    import subprocess
    try:
        out = subprocess.check_output(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                      timeout=20).decode("ascii", "replace").split()
        return max(float(v) for v in out) / 1024.0
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


class Heartbeat(object):
    """This node's status record (the heartbeat.json contract of docs/status.md), rebuilt from the
    progress file, the instance's uptime and the launch script's state files; written to
    STATE/heartbeat.json and the node's status prefix. ``env``: node.env, exported."""

    def __init__(self, env, store=None, metadata=None, clock=time.time, gpu_memory=nvidia_smi_used_gib):
        self.env, self.store, self.clock, self.gpu_memory = env, store, clock, gpu_memory
        self.state, self.run = env.get("TRAINSTACK_STATE", "/var/lib/trainstack"), env.get("TRAINSTACK_RUN", "/run/trainstack")
        self.local = os.path.join(self.state, "heartbeat.json")
        self.uri = env.get("STATUS_URI", "")
        self.progress, self.offset, self.smi_peak = Progress(), 0, None
        try:
            self.instance_id = (metadata or Metadata()).require("meta-data/instance-id")
        except MetadataError as exc:
            log("heartbeat: instance id unknown: %s" % exc)
            self.instance_id = None
        self.saved = _read_json(os.path.join(self.state, "heartbeat-state.json"))
        if not self.saved or self.saved.get("instance_id") != self.instance_id:
            self.saved = self.seed(self.remote() or {})

    def seed(self, last):
        """A new instance continues the node's last record on OSS (a replacement keeps counting the
        hours, spot notices and instances of the node it replaces)."""
        seed = {"instance_id": self.instance_id, "boots": {}, "started_at": _num(last.get("started_at")),
                "prior_seconds": _num((last.get("billing") or {}).get("billed_seconds")) or 0.0,
                "instances": [i for i in last.get("instances") or [] if isinstance(i, str)],
                "notices": [n for n in last.get("notices") or [] if isinstance(n, str)]}
        if self.instance_id and self.instance_id not in seed["instances"]:
            seed["instances"].append(self.instance_id)
        return seed

    def remote(self):
        if not (self.store and self.uri):
            return None
        bucket, prefix = split_uri(self.uri, True)
        tmp = self.local + ".last"
        try:
            if prefix + "heartbeat.json" in [k for k, _, _ in self.store.list(bucket, prefix)]:
                self.store.get(bucket, prefix + "heartbeat.json", tmp)
                return _read_json(tmp)
        except Exception as exc:  # whatever the SDK raised: a fresh record
            log("heartbeat: cannot read the last heartbeat: %s: %s" % (type(exc).__name__, exc))
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return None

    def number(self, name):
        try:
            return float(self.env.get(name) or "x")
        except ValueError:
            return None

    def record(self):
        env, now, saved, p = self.env, self.clock(), self.saved, self.progress
        # instance hours: every boot's uptime on this instance, plus the instances it replaced
        uptime = float((_read(env.get("TRAINSTACK_UPTIME_FILE") or "/proc/uptime", "0").split() or ["0"])[0])
        saved["boots"][_read(env.get("TRAINSTACK_BOOT_ID_FILE") or "/proc/sys/kernel/random/boot_id", "boot")] = uptime
        saved["started_at"] = saved.get("started_at") or now - uptime  # the node's first boot
        records, self.offset = read_progress(env.get("TRAINSTACK_PROGRESS_FILE") or self.run + "/progress.jsonl",
                                             self.offset)
        for rec in records:
            p.add(rec)
        notice = _read(os.path.join(self.run, "spot-termination-time"))
        if notice and notice not in saved["notices"]:
            saved["notices"].append(notice)
        memory = "trainer" if p.allocated or p.reserved else None
        if memory is None and self.gpu_memory:
            used = self.gpu_memory()
            self.smi_peak = max(used, self.smi_peak or 0) if used is not None else self.smi_peak
            memory = "nvidia-smi" if self.smi_peak is not None else None
        ckpt_at, ckpt_from = p.checkpoint_at, "trainer"
        if ckpt_at is None:
            mtimes = [os.stat(os.path.join(d, f)).st_mtime for d, _, fs in os.walk(env.get("CHECKPOINT_DIR") or "/nonexistent")
                      for f in fs]
            ckpt_at, ckpt_from = (max(mtimes), "files") if mtimes else (None, None)
        billed = saved["prior_seconds"] + sum(saved["boots"].values())
        nodes, hourly = int(self.number("NNODES") or 1), self.number("NODE_HOURLY_CNY")
        spent = None if hourly is None else round(billed / 3600.0 * hourly, 4)
        reserve = (p.checkpoint_seconds if p.checkpoint_seconds is not None else
                   self.number("CHECKPOINT_GRACE_SECONDS") or 300.0) + (self.number("HEARTBEAT_SECONDS") or 60.0)
        deadline = self.number("DEADLINE_HOURS")
        finished = _read(os.path.join(self.state, "job-finished"))
        stop = _read_json(os.path.join(self.state, "stop-reason.json"))
        stopped = bool(stop) and stop.get("reason") in TRAINSTACK_STOPS  # not how a healing run ended
        state = ("stopped" if stopped else "finished") if finished is not None else (
            "interrupted" if notice else "stopping" if os.path.exists(os.path.join(self.run, guard.GUARD_MARKER))
            else "training" if os.path.exists(os.path.join(self.run, "trainer.pid")) else "starting")
        recent, average, window = p.rates()
        return {
            "schema": HEARTBEAT_SCHEMA, "stack": env.get("NAME"), "node": env.get("NODE_NAME"),
            "node_rank": int(self.number("NODE_RANK") or 0), "nodes": nodes,
            "gpus": nodes * int(self.number("GPUS_PER_NODE") or 1),
            "instance_type": env.get("INSTANCE_TYPE") or None, "gpu_model": env.get("GPU_MODEL") or None,
            "instance_id": self.instance_id, "instances": list(saved["instances"]), "written_at": now,
            "started_at": saved["started_at"], "state": state,
            "progress": {"step": p.step, "tokens": p.tokens, "updated_at": p.updated_at, "tokens_per_second": recent,
                         "tokens_per_second_avg": average, "window_seconds": window},
            "memory": {"peak_allocated_gib": p.allocated,
                       "peak_reserved_gib": p.reserved if memory == "trainer" else self.smi_peak, "source": memory},
            "checkpoint": {"last_at": ckpt_at, "save_seconds": p.checkpoint_seconds, "source": ckpt_from},
            "interruptions": len(saved["notices"]), "notices": list(saved["notices"]),
            "billing": {"billed_seconds": round(billed, 1), "node_hourly_cny": hourly, "spent_cny": spent,
                        "price_source": env.get("PRICE_SOURCE") or None},
            "guard": {"max_total_cost_cny": self.number("MAX_TOTAL_COST_CNY"),
                      "deadline_at": saved["started_at"] + deadline * 3600 if deadline else None,
                      "reserve_seconds": reserve, "cluster_spent_cny": None if spent is None else round(spent * nodes, 4)},
            "stop": stop, "exit_code": int(finished) if finished and finished.lstrip("-").isdigit() else None,
        }

    def tick(self):
        """Write one heartbeat; while the job runs, ask it to stop when the guard says so."""
        rec = self.record()
        guard.check(rec, self.run)
        atomic_write(os.path.join(self.state, "heartbeat-state.json"), json.dumps(self.saved, sort_keys=True))
        atomic_write(self.local, json.dumps(rec, sort_keys=True, indent=1) + "\n")
        if self.store and self.uri:
            bucket, prefix = split_uri(self.uri, True)
            try:
                self.store.put(self.local, bucket, prefix + "heartbeat.json")
            except Exception as exc:  # the next heartbeat tries again
                log("heartbeat upload to %s failed: %s: %s" % (self.uri, type(exc).__name__, exc))
        return rec


def heartbeat_main(argv, store_factory=None, env=None, sleep=time.sleep):
    """``heartbeat [--once]``: a heartbeat every HEARTBEAT_SECONDS (node.env in the environment)."""
    env = dict(os.environ if env is None else env)
    try:
        store = env.get("STATUS_URI") and (store_factory or sdk_store)(
            env.get("REGION"), env.get("OSS_ENDPOINT"))
        beat = Heartbeat(env, store or None)
        while True:
            beat.tick()
            if "--once" in argv:
                return 0
            sleep(beat.number("HEARTBEAT_SECONDS") or 60.0)
    except Exception as exc:  # systemd restarts the service
        log("heartbeat failed: %s: %s" % (type(exc).__name__, exc))
        return 1


if __name__ == "__main__":
    sys.exit(heartbeat_main(sys.argv[1:]))
