#!/usr/bin/env python3
"""trainstack spot watcher: turn Alibaba's spot interruption notice into a checkpoint signal.

A reclaimed spot instance gets about 5 minutes of notice: the metadata item
``instance/spot/termination-time`` answers 404 while the instance is safe and a UTC time
once release is scheduled. The watcher polls it every few seconds (with a metadata token,
so hardened metadata access works) and, on the first answer, writes a marker file and sends
the checkpoint signal to the trainer at once: the trainer, not the watcher, owns the notice
window. It never stops the trainer or the instance. Transient metadata errors are logged
and polling continues.

Environment: TRAINSTACK_METADATA_URL, TRAINSTACK_SPOT_POLL_SECONDS (5),
TRAINSTACK_CHECKPOINT_SIGNAL (USR1), TRAINSTACK_SPOT_MARKER, TRAINSTACK_TRAINER_PIDFILE.
A node program (installed from the stack bucket, checked against its sha256).
"""

import os
import sys
import time

from trainstack_launch import DEFAULT_PIDFILE, signal_number, signal_trainer
from trainstack_metadata import Metadata, MetadataError, atomic_write, log


def _event(when, marker):
    """The notice as an agent event (alerts post it); after the signal, and never in its way."""
    try:
        from trainstack_events import emit

        emit("preemption_notice", os.path.join(os.path.dirname(marker), "events.jsonl"), termination_time=when)
    except Exception as exc:  # an event is a report: the checkpoint signal has gone out already
        log("preemption event not recorded: %s" % exc)

TERMINATION_TIME = "meta-data/instance/spot/termination-time"


def on_notice(when, signum, marker, pidfile):
    atomic_write(marker, when + "\n")  # first, so a trainer woken by the signal can read it
    sent = signal_trainer(pidfile, signum)
    log("spot termination notice for %s: marker %s written, signal %d sent to %s"
              % (when, marker, signum, sent or "no trainer (none running yet)"))
    _event(when, marker)


def main():
    poll = float(os.environ.get("TRAINSTACK_SPOT_POLL_SECONDS", "5"))
    signum = signal_number(os.environ.get("TRAINSTACK_CHECKPOINT_SIGNAL", "USR1"))
    marker = os.environ.get("TRAINSTACK_SPOT_MARKER", "/run/trainstack/spot-termination-time")
    pidfile = os.environ.get("TRAINSTACK_TRAINER_PIDFILE", DEFAULT_PIDFILE)
    metadata = Metadata()
    log("spot watcher polling %s/latest/%s every %gs" % (metadata.base, TERMINATION_TIME, poll))
    errors = 0
    while True:
        try:
            when = metadata.get(TERMINATION_TIME)
            errors = 0
        except MetadataError as exc:
            errors += 1
            if errors in (1, 10) or errors % 100 == 0:
                log("metadata error %d (still polling): %s" % (errors, exc))
            when = None
        if when and when.strip():
            on_notice(when.strip(), signum, marker, pidfile)
            return 0
        time.sleep(poll)


if __name__ == "__main__":
    sys.exit(main())
