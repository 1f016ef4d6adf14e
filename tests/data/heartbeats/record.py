"""Record the heartbeat fixtures of tests/status and tests/commands with the real heartbeat program.

    .venv/bin/python tests/data/heartbeats/record.py

Each fixture is what trainstack_heartbeat.py (the node program as the stack ships it) writes for a sample stack's
node after a scripted run: progress lines from a trainer, an instance clock, spot notices, the
launch script's state files. Nothing in the JSON is typed by hand; re-record after changing the
heartbeat program (tests/status/test_record.py checks the files still parse).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from plan_factory import resolved  # noqa: E402

from trainstack.bootstrap import render_files, render_script  # noqa: E402

#: the runs' clock: 2025-06-15T15:06:40Z
NOW = 1_750_000_000.0


class Metadata:
    def __init__(self, instance_id: str):
        self.instance_id = instance_id

    def require(self, path: str) -> str:
        return self.instance_id


def load_program(lib: Path, plan):
    """The heartbeat and budget guard programs, as the node installs them, imported from ``lib``."""
    for f in render_files(plan, 0, "cpfs-x.cn-shenzhen.cpfs.aliyuncs.com" if plan.storage.cpfs else None):
        if f.program:
            (lib / f.name).write_text(f.content)
    for name in [m for m in sys.modules if m.startswith("trainstack_")]:
        del sys.modules[name]
    sys.path.insert(0, str(lib))
    try:
        return importlib.import_module("trainstack_heartbeat"), importlib.import_module("trainstack_guard")
    finally:
        sys.path.remove(str(lib))


def record(stack: str, rank: int, *, speed_ratio: float, uptime_hours: float, tokens_done: float,
           allocated: float | None, reserved: float | None, written_at: float = NOW, state: str = "training",
           instances: tuple[str, ...] = ("i-wz9node",), notices: tuple[str, ...] = (),
           checkpoint_seconds: float | None = 95.0, finished: str | None = None, stop: str | None = None) -> dict:
    plan = resolved(stack)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        program, guard = load_program(d, plan)
        env = {}
        for line in render_script(plan, "node.env", rank,
                                  "cpfs-x.cn-shenzhen.cpfs.aliyuncs.com" if plan.storage.cpfs else None).splitlines():
            if "=" in line and not line.startswith("#"):
                key, _, value = line.partition("=")
                env[key] = value.strip("'")
        for sub in ("state", "run", "ckpt"):
            (d / sub).mkdir()
        (d / "uptime").write_text(f"{uptime_hours * 3600:.1f} 1.0\n")
        (d / "boot").write_text("boot\n")
        env.update(TRAINSTACK_STATE=str(d / "state"), TRAINSTACK_RUN=str(d / "run"),
                   TRAINSTACK_PROGRESS_FILE=str(d / "run" / "progress.jsonl"), TRAINSTACK_UPTIME_FILE=str(d / "uptime"),
                   TRAINSTACK_BOOT_ID_FILE=str(d / "boot"), CHECKPOINT_DIR=str(d / "ckpt"))
        # the earlier instances of this node rank (a replacement continues their record)
        seed = {"instance_id": instances[-1], "boots": {}, "prior_seconds": 3600.0 * (len(instances) - 1),
                "instances": list(instances), "notices": list(notices),
                "started_at": written_at - uptime_hours * 3600 - 3600.0 * (len(instances) - 1)}
        (d / "state" / "heartbeat-state.json").write_text(json.dumps(seed))
        tps = plan.estimate.tokens_per_second * speed_ratio
        with open(d / "run" / "progress.jsonl", "w") as fh:
            for i in range(31):
                t = written_at - 600 + 20 * i
                line = {"time": t, "step": int((tokens_done - tps * (written_at - t)) // 65536),
                        "tokens": int(tokens_done - tps * (written_at - t))}
                if allocated is not None:
                    line.update(allocated_gib=allocated, reserved_gib=reserved)
                if i == 15 and checkpoint_seconds is not None:  # a checkpoint saved five minutes ago
                    line["checkpoint_seconds"] = checkpoint_seconds
                fh.write(json.dumps(line) + "\n")
        if state in ("training", "stopping"):
            (d / "run" / "trainer.pid").write_text("4242\n")
        if finished is not None:
            (d / "state" / "job-finished").write_text(finished + "\n")
        if stop == "budget":  # what the guard wrote a minute before the job ended (the launch script keeps it)
            hourly = plan.hourly_cost_cny
            verdict = guard.guard_verdict(written_at - 60, (uptime_hours * 3600 - 60) / 3600 * hourly, hourly,
                                            (checkpoint_seconds or 300) + 60, plan.job.max_total_cost_cny, None)
            assert verdict, "the fixture's run must be over its budget"
            (d / "state" / "stop-reason.json").write_text(json.dumps(dict(verdict, at=written_at - 60)))
        beat = program.Heartbeat(env, None, metadata=Metadata(instances[-1]), clock=lambda: written_at,
                                 gpu_memory=(lambda: 70.1) if allocated is None else None)
        rec = beat.tick()
        assert rec["state"] == state, (rec["state"], state)
        return rec


FIXTURES = {
    # 1 x A10, 1.1x the predicted speed, two hours in, memory from the trainer
    "llama3-8b-lora-node-0.json": lambda: record(
        "llama3-8b-lora", 0, speed_ratio=1.1, uptime_hours=2.0, tokens_done=2.0e7, allocated=16.2, reserved=18.9),
    # spot A100: reclaimed once (a notice, a second instance), memory only from nvidia-smi
    "qwen-7b-spot-node-0.json": lambda: record(
        "qwen-7b-spot", 0, speed_ratio=0.9, uptime_hours=0.5, tokens_done=6.0e7, allocated=None, reserved=None,
        instances=("i-wz9first", "i-wz9second"), notices=("2025-06-15T14:00:00Z",)),
    # the budget guard stopped it
    "qwen-7b-spot-stopped.json": lambda: record(
        "qwen-7b-spot", 0, speed_ratio=0.9, uptime_hours=71.95, tokens_done=7.0e7, allocated=None, reserved=None,
        state="stopped", finished="15", stop="budget"),
}
for rank in range(3):  # 3 x 8 A100 on eRDMA; node 2 stopped sending heartbeats 20 minutes ago
    FIXTURES[f"llama3-70b-full-node-{rank}.json"] = (lambda r: lambda: record(
        "llama3-70b-full", r, speed_ratio=0.95, uptime_hours=5.0, tokens_done=8.0e7, allocated=61.5, reserved=70.2,
        written_at=NOW - (1200 if r == 2 else 0), instances=(f"i-wz9node{r}",)))(rank)


if __name__ == "__main__":
    for name, make in FIXTURES.items():
        (HERE / name).write_text(json.dumps(make(), indent=1, sort_keys=True) + "\n")
        print("wrote", HERE / name)
