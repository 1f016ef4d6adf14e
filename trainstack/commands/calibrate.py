"""`trainstack calibrate PROFILE|--stack NAME [--heartbeat FILE ...] [--dry-run] [--json]`.

Turns what a real run measured into the local calibration overlay (trainstack/sizing/
calibration_overlay.py): the run's measured tokens/s per GPU and memory peaks, over what the
shipped model predicts for that run's exact layout (its instance type, node and GPU count, from
the heartbeat), become two factors that later plans and estimates of the same model, framework,
GPU, method and precision use, each use labelled. The heartbeats come from the stack bucket (the
nodes' latest, credentials needed) or from saved files (``--heartbeat``, e.g. a node's
/var/lib/trainstack/heartbeat.json). A heartbeat that is malformed, of another stack, without a
measured speed, or too far from the model to be the same workload is refused (exit 2), and the
overlay is left as it was; so is one beyond physics: a speed above what the GPU can compute, a memory
peak below the weights it holds (trainstack/calibration_checks.py), or a record dated in the future.
Prints the estimate beside the measurement.
"""

from __future__ import annotations

import json
import time
from typing import Any, Optional

from ..errors import InputError, Problem

#: The least a heartbeat must have measured over (seconds of progress lines): a shorter window is
#: warm-up, not the run's speed.
MIN_WINDOW_SECONDS = 60.0


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="learn from a real run: measured speed and memory into the local "
                                         "calibration overlay",
                       description="Compare a run's heartbeat with the shipped sizing model and record the "
                                   "ratio in the calibration overlay (stacks/calibration.json, or "
                                   "$TRAINSTACK_CALIBRATION) that later estimates and plans of the same workload use.")
    p.add_argument("profile", nargs="?", help="path to the profile the run was planned from")
    p.add_argument("--stack", help="a stack name: stacks/Pulumi.<NAME>.yaml")
    p.add_argument("--heartbeat", action="append", metavar="FILE",
                   help="a saved heartbeat.json instead of reading the stack bucket (repeatable: one per node)")
    p.add_argument("--dry-run", action="store_true", help="print the comparison, write nothing")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _heartbeats_from_files(paths: list[str]) -> list:
    from ..fsutil import read_regular_file
    from ..status import HeartbeatError, parse_heartbeat
    from ..status.record import MAX_BYTES

    out = []
    for name in paths:
        # a regular file only (never a FIFO that blocks or /dev/zero), within the heartbeat's size
        raw = read_regular_file(name, what="heartbeat", limit=MAX_BYTES,
                                missing_hint="give a heartbeat.json a trainstack node wrote (docs/status.md)")
        try:
            out.append(parse_heartbeat(raw, name))
        except HeartbeatError as exc:
            raise InputError(f"{name}: not a valid trainstack heartbeat", problems=[
                Problem(path="", message=p, file=name) for p in exc.problems],
                hint="give a heartbeat.json a trainstack node wrote (docs/status.md)") from None
    return out


def _heartbeats_from_bucket(plan: Any) -> list:
    from .status import CLOUD, Observed, read_heartbeats

    CLOUD.credentials()
    observed = Observed()
    read_heartbeats(plan, CLOUD, observed)
    if observed.refused:
        raise InputError("the stack bucket holds heartbeats that are not valid", problems=[
            Problem(path="", message=r) for r in observed.refused])
    return observed.heartbeats


def _refuse(message: str, where: str, hint: Optional[str] = None) -> InputError:
    return InputError(f"{where}: {message}", problems=[Problem(path="", message=message, file=where)], hint=hint)


def measurement(profile: Any, plan: Any, beats: list) -> tuple[Any, dict]:
    """The heartbeat calibrated from (the lead node's) and the measured numbers; refuses what is not a
    usable measurement of this plan's workload."""
    if not beats:
        raise InputError(f"no heartbeat of {plan.name} yet: its nodes write one a minute once running "
                         "(docs/status.md)")
    for b in beats:
        if b.stack != plan.name:
            raise _refuse(f"is a heartbeat of stack {b.stack!r}, not of {plan.name!r}", b.node,
                          hint="calibrate with the profile the run was planned from")
    lead = min(beats, key=lambda b: b.node_rank)
    where = f"{lead.node} (heartbeat at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(lead.written_at))})"
    rate, window = lead.progress.tokens_per_second, lead.progress.window_seconds
    if not rate or not window or window < MIN_WINDOW_SECONDS:
        raise _refuse("has no measured speed yet (the trainer reports progress over less than "
                      f"{MIN_WINDOW_SECONDS:g} s)", where, hint="report progress from the training loop "
                      "(docs/status.md) and calibrate once it has run a few minutes")
    if not lead.gpu_model or not lead.instance_type:
        raise _refuse("does not say which GPU and instance type it ran on", where)
    alloc = max((b.memory.peak_allocated_gib for b in beats if b.memory.peak_allocated_gib is not None), default=None)
    reserved = max((b.memory.peak_reserved_gib for b in beats if b.memory.peak_reserved_gib is not None), default=None)
    source = next((b.memory.source for b in beats if b.memory.source), None)
    return lead, {"tokens_per_second_per_gpu": rate / lead.gpus, "peak_allocated_gib": alloc,
                  "peak_reserved_gib": reserved, "memory_source": source}


def calibrate(profile: Any, plan: Any, beats: list, now: Optional[float] = None):
    """The overlay entry for this run (not written), the entry it replaces, and the comparison."""
    from ..catalog import load_catalog
    from ..placement.engine import shipped_speed
    from .. import calibration_overlay as cal
    from ..sizing import memory_estimate

    lead, measured = measurement(profile, plan, beats)
    catalog = load_catalog()
    inst = catalog.instance(lead.instance_type)
    if inst.gpu is None or inst.gpu.name != lead.gpu_model:
        raise _refuse(f"ran on {lead.instance_type}, whose GPU the catalog does not know as {lead.gpu_model}",
                      lead.node)
    nodes, per_node = lead.nodes, inst.gpu_count
    if nodes * per_node != lead.gpus:
        raise _refuse(f"reports {lead.gpus} GPUs, but {nodes} x {lead.instance_type} have {nodes * per_node}",
                      lead.node)
    thr = shipped_speed(profile, inst, nodes)
    mem = memory_estimate(profile.architecture, profile.training, lead.gpus)
    if not thr.tokens_per_second_per_gpu:
        raise _refuse(f"the model has no speed for {inst.gpu.name} (its TFLOPS are unknown)", lead.node)
    physical(profile, inst.gpu, mem, measured, beats, lead)
    speed = measured["tokens_per_second_per_gpu"] / thr.tokens_per_second_per_gpu
    memory: Optional[float] = None
    if measured["memory_source"] == "trainer" and measured["peak_reserved_gib"]:
        memory = measured["peak_reserved_gib"] / mem.reserved_gib_per_gpu
    elif measured["memory_source"] == "nvidia-smi" and measured["peak_reserved_gib"]:
        memory = measured["peak_reserved_gib"] / mem.required_gib_per_gpu  # used memory includes the context
    low, high = cal.FACTOR_RANGE
    for what, factor in (("speed", speed), ("memory", memory)):
        if factor is not None and not low <= factor <= high:
            raise _refuse(f"measured {what} is {factor:.2f} x the model's prediction, outside {low:g}..{high:g}: "
                          "not the same workload (another model or batch, or tokens counted per rank instead of "
                          "for the whole job)", lead.node, hint="check the profile matches the run; "
                          "report tokens for the whole job (docs/status.md)")
    stamp = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
    t = profile.training
    entry = cal.OverlayEntry(
        key=cal.workload_key(profile.architecture, t, inst.gpu.name), model_name=profile.model.label,
        throughput_factor=round(speed, 4), memory_factor=None if memory is None else round(memory, 4),
        measured=cal.Measured(**{k: (round(v, 3) if isinstance(v, float) else v) for k, v in measured.items()}),
        predicted=cal.Predicted(tokens_per_second_per_gpu=round(thr.tokens_per_second_per_gpu, 1),
                                peak_allocated_gib=round(mem.peak_gib_per_gpu, 2),
                                peak_reserved_gib=round(mem.reserved_gib_per_gpu, 2),
                                required_gib=round(mem.required_gib_per_gpu, 2)),
        setup=cal.Setup(instance_type=lead.instance_type, nodes=nodes, gpus=lead.gpus,
                        micro_batch_size=t.micro_batch_size, sequence_length=t.sequence_length),
        source=cal.Source(stack=lead.stack, node=lead.node, instance_id=lead.instance_id,
                          heartbeat_at=stamp(lead.written_at)),
        calibrated_at=stamp(time.time() if now is None else now))
    return entry, cal.load_overlay().find(entry.key)


def physical(profile: Any, gpu: Any, mem: Any, measured: dict, beats: list, lead: Any) -> None:
    """Refuse a heartbeat beyond what the GPU can compute or below the weights it must hold
    (trainstack/calibration_checks.py): exit 2 naming the bound, the overlay untouched."""
    from .. import calibration_checks as phys

    hint = ("a heartbeat counts the whole job's tokens per second (docs/status.md); check it is this profile's run "
            "and was not edited")
    why = phys.speed_problem(measured["tokens_per_second_per_gpu"],
                             phys.speed_bound(profile.architecture, profile.training, gpu))
    if why:
        raise _refuse(why, lead.node, hint=hint)
    floor = phys.memory_floor_gib(mem)
    for b in beats:
        for what, value in (("peak allocated", b.memory.peak_allocated_gib),
                            ("peak reserved" if b.memory.source != "nvidia-smi" else "GPU memory used",
                             b.memory.peak_reserved_gib)):
            why = phys.memory_problem(what, value, floor)
            if why:
                raise _refuse(why, b.node, hint=hint)


def run(args) -> int:
    from .. import calibration_overlay as cal
    from ._run_source import load_run

    profile, plan, _ = load_run(args.profile, args.stack, "calibrate")
    beats = _heartbeats_from_files(args.heartbeat) if args.heartbeat else _heartbeats_from_bucket(plan)
    entry, previous = calibrate(profile, plan, beats)
    path = cal.overlay_path()
    written = False
    if not args.dry_run:
        if path is None:
            raise InputError(f"{cal.ENV}=off: there is no overlay to write", hint="unset it, or use --dry-run")
        cal.write_overlay(cal.load_overlay().with_entry(entry), path)
        written = True
    doc = {"entry": entry.model_dump(mode="json"), "replaced": previous.model_dump(mode="json") if previous else None,
           "overlay": str(path) if path else None, "written": written}
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    m, p = entry.measured, entry.predicted
    print(f"{entry.model_name} on {entry.setup.nodes} x {entry.setup.instance_type} ({entry.setup.gpus} x {entry.key.gpu}), "
          f"{entry.key.framework}, {entry.key.method}, {entry.key.precision}; heartbeat of {entry.source.node} at "
          f"{entry.source.heartbeat_at}")
    from ..textable import render_table

    def num(v: Optional[float], fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    rows = [["tokens/s per GPU", num(p.tokens_per_second_per_gpu, ",.0f"), num(m.tokens_per_second_per_gpu, ",.0f"),
             f"{entry.throughput_factor:.3f}"],
            ["peak allocated GiB", num(p.peak_allocated_gib, ".2f"), num(m.peak_allocated_gib, ".2f"), ""],
            ["peak reserved GiB" if m.memory_source != "nvidia-smi" else "GPU memory used GiB (vs required)",
             num(p.peak_reserved_gib if m.memory_source != "nvidia-smi" else p.required_gib, ".2f"),
             num(m.peak_reserved_gib, ".2f"), num(entry.memory_factor, ".3f")]]
    print(render_table(["", "ESTIMATE", "MEASURED", "FACTOR"], rows, align="lrrr"))
    if entry.memory_factor is not None and entry.memory_factor <= 1:
        print("memory: the run needed no more than predicted; later plans keep the shipped prediction")
    if previous is not None:
        print(f"replaces the earlier calibration of {previous.source.heartbeat_at} (speed x{previous.throughput_factor:.3f})")
    print(f"{'wrote' if written else 'would write (dry run)'} {path}: later estimates and plans of this workload on "
          f"{entry.key.gpu} use it and say so")
    return 0
