"""The spot watcher, run for real as a subprocess against a fake metadata server on 127.0.0.1
that requires the metadata token: it signals the trainer as soon as a termination time appears."""

from __future__ import annotations

import os
import subprocess
import sys

from plan_factory import spot_plan

TERMINATION = "meta-data/instance/spot/termination-time"
WHEN = "2026-11-30T01:05:00Z"

TRAINER = """\
import os, signal, subprocess, sys, time
role, log = sys.argv[1], sys.argv[2]
def on_signal(sig, _):
    with open(log, "a") as fh:
        fh.write(f"{role} {signal.Signals(sig).name}\\n")
signal.signal(signal.SIGUSR1, on_signal)
rank = subprocess.Popen([sys.executable, __file__, "rank", log]) if role == "torchrun" else None
open(f"{log}.{role}.ready", "w").close()
end = time.monotonic() + 10  # bounded: the test never leaves it running
while time.monotonic() < end:
    time.sleep(0.02)
"""


def test_watcher_signals_the_trainer_on_the_termination_notice(fake_cloud, rendered, tmp_path, waiter):
    files = rendered(spot_plan(), tmp_path / "lib")
    fake_cloud.routes[TERMINATION] = [(404, ""), (500, "busy"), (404, ""), (200, WHEN)]
    trainer = tmp_path / "trainer.py"
    trainer.write_text(TRAINER)
    log = tmp_path / "signals.log"
    torchrun = subprocess.Popen([sys.executable, str(trainer), "torchrun", str(log)])
    watcher = None
    try:
        waiter(lambda: all(os.path.exists(f"{log}.{r}.ready") for r in ("torchrun", "rank")),
               what="the stand-in trainer to start")
        pidfile, marker = tmp_path / "trainer.pid", tmp_path / "run" / "spot-termination-time"
        pidfile.write_text(f"{torchrun.pid}\n")
        env = dict(os.environ, TRAINSTACK_LIB=str(tmp_path / "lib"), TRAINSTACK_METADATA_URL=fake_cloud.url,
                   TRAINSTACK_SPOT_POLL_SECONDS="0.05", TRAINSTACK_SPOT_MARKER=str(marker),
                   TRAINSTACK_TRAINER_PIDFILE=str(pidfile), TRAINSTACK_CHECKPOINT_SIGNAL="USR1")
        watcher = subprocess.Popen([sys.executable, str(files["trainstack_spot.py"])], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, stderr = watcher.communicate(timeout=10)
        assert watcher.returncode == 0, stderr

        waiter(lambda: log.exists() and len(log.read_text().splitlines()) == 2, what="SIGUSR1 at the trainer")
        assert sorted(log.read_text().splitlines()) == ["rank SIGUSR1", "torchrun SIGUSR1"]
        assert marker.read_text() == WHEN + "\n"
        assert fake_cloud.token_requests and fake_cloud.token_requests[0]["ttl"] == "21600"
        polls = [token for path, token in fake_cloud.gets if path == TERMINATION]
        assert len(polls) == 4, "polled through the 404s and the transient 500 until the notice"
        assert all(token in fake_cloud.tokens for token in polls), "every poll carried a valid token"
        assert "metadata error" in stderr and WHEN in stderr
    finally:
        if watcher and watcher.poll() is None:
            watcher.kill()
        torchrun.kill()
        torchrun.wait(timeout=10)


def test_watcher_keeps_polling_when_the_token_is_revoked(fake_cloud, rendered, tmp_path, waiter):
    files = rendered(spot_plan(), tmp_path / "lib")
    fake_cloud.routes[TERMINATION] = [(404, "")]
    marker = tmp_path / "marker"
    env = dict(os.environ, TRAINSTACK_LIB=str(tmp_path / "lib"), TRAINSTACK_METADATA_URL=fake_cloud.url,
               TRAINSTACK_SPOT_POLL_SECONDS="0.02", TRAINSTACK_SPOT_MARKER=str(marker),
               TRAINSTACK_TRAINER_PIDFILE=str(tmp_path / "no-trainer.pid"))
    watcher = subprocess.Popen([sys.executable, str(files["trainstack_spot.py"])], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        waiter(lambda: len(fake_cloud.gets) >= 3, what="the watcher to poll")
        fake_cloud.revoke_tokens()  # e.g. the token expired early
        fake_cloud.routes[TERMINATION] = [(200, WHEN)]
        _, stderr = watcher.communicate(timeout=10)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    assert watcher.returncode == 0, stderr
    assert len(fake_cloud.token_requests) == 2 and marker.read_text() == WHEN + "\n"
    assert "no trainer" in stderr  # a notice before the job started is still recorded
