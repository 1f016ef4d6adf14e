"""trainstack node programs: the agent's events, defined in one place (docs/self-healing.md).

Each event is a name and the data it carries; :func:`emit` logs it and appends it as one JSON line to
RUN/events.jsonl (``TRAINSTACK_EVENTS_FILE``), where anything that reports them (alerts: issue 36)
reads them. Stdlib only, Python 3.6 compatible.
"""

import json
import os
import time

from trainstack_metadata import log

#: name -> the data fields it carries
EVENTS = {
    "preemption_notice": ("termination_time",),   # the spot watcher saw Alibaba's reclaim notice
    "replacement_joined": ("generation",),        # a pool node launched into the running generation
    "job_started": ("generation",),               # node 0 started a new run
    "job_resumed": ("generation", "why"),         # node 0 rejoined its run (reboot, replacement)
    "job_ended": ("reason", "rc", "generation"),  # succeeded | failed | guard | max_runtime | node0_lost
    "guard_stop": ("message",),                   # the budget guard asked the job to stop
    "node0_lost": ("seconds",),                   # a pool node gave up waiting for node 0
    "pool_scaled_to_zero": ("rule",),             # ExecuteScalingRule on the scale-to-0 rule was accepted
    "node_stopped": ("instance_id",),             # StopInstance (no-charge) was accepted
}


def emit(name, events_file=None, **data):
    """Record event ``name``; ``events_file``: where, when the caller knows its RUN directory (else the
    environment's)."""
    if name not in EVENTS:
        raise ValueError("unknown event %r" % name)
    unknown = sorted(set(data) - set(EVENTS[name]))
    if unknown:
        raise ValueError("event %s has no field(s) %s" % (name, ", ".join(unknown)))
    record = dict(data, event=name, at=int(time.time()))
    path = events_file or os.environ.get("TRAINSTACK_EVENTS_FILE") or os.path.join(
        os.environ.get("TRAINSTACK_RUN") or "/run/trainstack", "events.jsonl")
    try:
        directory = os.path.dirname(path)
        if directory and not os.path.isdir(directory):
            os.makedirs(directory)
        with open(path, "a") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
    except OSError as exc:
        log("event %s not recorded: %s" % (name, exc))
    log("event %s %s" % (name, json.dumps(data, sort_keys=True)))
    return record


def main(argv):
    """``trainstack_events.py NAME [FIELD=VALUE ...]`` (the launch script's events)."""
    if not argv:
        log("usage: trainstack_events.py NAME [FIELD=VALUE ...]")
        return 2
    try:
        emit(argv[0], **dict(a.split("=", 1) for a in argv[1:] if "=" in a))
    except ValueError as exc:
        log(str(exc))
        return 2
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
