"""trainstack node programs: the budget guard (docs/status.md).

Each heartbeat while the job runs asks :func:`check`: when the spend so far plus the time to save one
checkpoint reaches MAX_TOTAL_COST_CNY (or that time reaches the DEADLINE_HOURS deadline), it writes
RUN/guard-stop; the launch script's watchdog then asks the trainer for a checkpoint, stops it and
releases billing like at the max runtime. Stdlib only, Python 3.6 compatible.
"""

import json
import os
import time

from trainstack_events import emit
from trainstack_metadata import atomic_write, log

GUARD_MARKER = "guard-stop"


def guard_verdict(now, cluster_spent, cluster_hourly, reserve_seconds, max_total_cost, deadline_at):
    """Why the job must stop now, or None: it stops while money and time remain for one more
    checkpoint (``reserve_seconds`` of the whole cluster on top of the spend so far)."""
    if max_total_cost and cluster_hourly and cluster_spent is not None:
        reserve = cluster_hourly * reserve_seconds / 3600.0
        if cluster_spent + reserve >= max_total_cost:
            return {"reason": "budget", "message": "spend so far %.2f CNY + %.2f CNY for %ds to save a checkpoint "
                    "reaches max_total_cost %g CNY" % (cluster_spent, reserve, reserve_seconds, max_total_cost)}
    if deadline_at and now + reserve_seconds >= deadline_at:
        return {"reason": "deadline", "message": "deadline_hours ends at %s, %ds before it is needed to save a "
                "checkpoint" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deadline_at)), reserve_seconds)}
    return None


def check(rec, run_dir):
    """Ask the job to stop (the marker) when the guard says so about the record ``rec`` of a
    heartbeat; returns the verdict, or None."""
    g, hourly = rec["guard"], rec["billing"]["node_hourly_cny"]
    verdict = rec["state"] in ("starting", "training") and guard_verdict(
        rec["written_at"], g["cluster_spent_cny"], hourly and hourly * rec["nodes"], g["reserve_seconds"],
        g["max_total_cost_cny"], g["deadline_at"])
    marker = os.path.join(run_dir, GUARD_MARKER)
    if verdict and not os.path.exists(marker):
        verdict["at"] = rec["written_at"]
        atomic_write(marker, json.dumps(verdict, sort_keys=True) + "\n")
        log("budget guard: %s: asking the job to checkpoint and stop" % verdict["message"])
        emit("guard_stop", os.path.join(run_dir, "events.jsonl"), message=verdict["message"])  # alerts post it
    return verdict or None
