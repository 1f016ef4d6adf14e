"""Calibration overlay: what real runs measured, applied on top of the shipped model, never silently.

``trainstack calibrate`` turns a run's heartbeat (measured tokens/s, memory peaks) into one entry
per workload: model (the architecture's fingerprint, so a preset and its Hugging Face config
match), framework, GPU model, method and precision. An entry holds two factors, measured over
what the shipped model predicts for that run's exact layout:

* ``throughput_factor`` multiplies the predicted speed (and divides the step time) of later
  estimates of the same workload, at any GPU count or batch;
* ``memory_factor`` multiplies the predicted peak, reserved and required memory, but only when it
  is above 1: a run that needed less than predicted never lets a later plan keep less margin
  (the shipped model stays on the safe side, docs/sizing.md).

The sizing functions themselves never read the overlay; the resolver's engine and ``estimate``
apply it with :func:`adjust` and label every use ("calibration overlay: ..."), so a plan says
when it rests on a local measurement. The file is JSON (``schema_version`` 1) at
``stacks/calibration.json`` of the project, or ``$TRAINSTACK_CALIBRATION`` (``off`` disables it);
a malformed file is an error naming the file (exit 2), never ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .architecture import Architecture
from .errors import InputError, Problem
from .profile import TrainingSpec
from .sizing.memory import MemoryEstimate
from .sizing.throughput import ThroughputEstimate

SCHEMA_VERSION = 1
ENV = "TRAINSTACK_CALIBRATION"
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "stacks" / "calibration.json"
#: A measurement further than this factor from the model is refused: it is a mismatch (another
#: model, tokens counted per rank instead of for the job), not a calibration.
FACTOR_RANGE = (0.25, 4.0)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


def _factor() -> object:
    return Field(ge=FACTOR_RANGE[0], le=FACTOR_RANGE[1], allow_inf_nan=False)


class WorkloadKey(_Frozen):
    model: str = Field(pattern=r"^[0-9a-f]{16}$", description="sha256 of the architecture, 16 hex digits")
    framework: str
    gpu: str
    method: str
    precision: str


class Measured(_Frozen):
    tokens_per_second_per_gpu: float = Field(gt=0, allow_inf_nan=False)
    peak_allocated_gib: Optional[float] = Field(None, ge=0, allow_inf_nan=False)
    peak_reserved_gib: Optional[float] = Field(None, ge=0, allow_inf_nan=False)
    memory_source: Optional[Literal["trainer", "nvidia-smi"]] = None


class Predicted(_Frozen):
    """What the shipped model predicted for the run's layout (no overlay)."""

    tokens_per_second_per_gpu: float = Field(gt=0, allow_inf_nan=False)
    peak_allocated_gib: float = Field(ge=0, allow_inf_nan=False)
    peak_reserved_gib: float = Field(ge=0, allow_inf_nan=False)
    required_gib: float = Field(ge=0, allow_inf_nan=False)


class Setup(_Frozen):
    instance_type: Optional[str] = None
    nodes: int = Field(ge=1)
    gpus: int = Field(ge=1)
    micro_batch_size: int = Field(ge=1)
    sequence_length: int = Field(ge=1)


class Source(_Frozen):
    stack: str
    node: str
    instance_id: Optional[str] = None
    heartbeat_at: str


class OverlayEntry(_Frozen):
    key: WorkloadKey
    model_name: str
    throughput_factor: float = _factor()  # type: ignore[assignment]
    memory_factor: Optional[float] = Field(None, ge=FACTOR_RANGE[0], le=FACTOR_RANGE[1], allow_inf_nan=False)
    measured: Measured
    predicted: Predicted
    setup: Setup
    source: Source
    calibrated_at: str

    @property
    def applied_memory_factor(self) -> float:
        """What later estimates use: the factor when it raises the memory, else 1."""
        return max(1.0, self.memory_factor or 1.0)

    def label(self) -> str:
        mem = (f", memory x{self.applied_memory_factor:.3f}" if self.applied_memory_factor > 1 else
               ", memory unchanged (the run needed no more than predicted)")
        return (f"calibration overlay: {self.key.gpu} speed x{self.throughput_factor:.3f}{mem} for "
                f"{self.model_name} ({self.key.framework}, {self.key.method}, {self.key.precision}), measured on "
                f"{self.setup.nodes} x {self.setup.instance_type or self.key.gpu} by {self.source.stack} "
                f"{self.source.node} at {self.source.heartbeat_at} ({overlay_path()})")


class CalibrationOverlay(_Frozen):
    schema_version: Literal[1] = SCHEMA_VERSION
    entries: tuple[OverlayEntry, ...] = ()

    def find(self, key: WorkloadKey) -> Optional[OverlayEntry]:
        return next((e for e in self.entries if e.key == key), None)

    def with_entry(self, entry: OverlayEntry) -> "CalibrationOverlay":
        """This overlay with ``entry`` replacing any earlier one of the same workload."""
        kept = tuple(e for e in self.entries if e.key != entry.key)
        return CalibrationOverlay(entries=tuple(sorted(kept + (entry,), key=lambda e: e.key.model_dump_json())))


def model_fingerprint(arch: Architecture) -> str:
    return hashlib.sha256(arch.model_dump_json().encode("utf-8")).hexdigest()[:16]


def workload_key(arch: Architecture, training: TrainingSpec, gpu: str) -> WorkloadKey:
    return WorkloadKey(model=model_fingerprint(arch), framework=training.framework, gpu=gpu, method=training.method,
                       precision=training.precision)


def overlay_path() -> Optional[Path]:
    value = os.environ.get(ENV)
    if value is not None and value.strip().lower() in ("off", "none", ""):
        return None
    return Path(value).expanduser() if value else DEFAULT_PATH


_cache: dict[tuple[str, int, int], CalibrationOverlay] = {}


def load_overlay(path: Optional[Path] = None) -> CalibrationOverlay:
    """The overlay at ``path`` (default :func:`overlay_path`); empty when there is none."""
    path = path if path is not None else overlay_path()
    if path is None or not path.is_file():
        return CalibrationOverlay()
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _cache:
        _cache.clear()
        _cache[key] = parse_overlay(path.read_bytes(), str(path))
    return _cache[key]


def parse_overlay(data: bytes, where: str) -> CalibrationOverlay:
    try:
        json.loads(data.decode("utf-8"), parse_constant=_refuse)  # NaN and Infinity are not numbers here
        return CalibrationOverlay.model_validate_json(data)
    except ValidationError as exc:
        problems = [Problem(path=".".join(str(p) for p in e["loc"]), message=f"calibration overlay is invalid: {e['msg']}",
                            file=where) for e in exc.errors()]
        raise InputError(f"{where}: the calibration overlay is invalid", problems=problems,
                         hint=f"fix or delete it (`trainstack calibrate` rewrites it), or set {ENV}=off") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{where}: the calibration overlay is not JSON: {exc}",
                         hint=f"fix or delete it, or set {ENV}=off") from None


def _refuse(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def write_overlay(overlay: CalibrationOverlay, path: Path) -> None:
    from .outputs import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(overlay.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    _cache.clear()


# ---- applying it -----------------------------------------------------------------------------

def calibrated_speed(thr: ThroughputEstimate, factor: float) -> ThroughputEstimate:
    def times(v: Optional[float]) -> Optional[float]:
        return None if v is None else v * factor
    return thr.model_copy(update={
        "tokens_per_second_per_gpu": times(thr.tokens_per_second_per_gpu), "tokens_per_second": times(thr.tokens_per_second),
        "step_seconds": None if thr.step_seconds is None else thr.step_seconds / factor,
        "mfu": times(thr.mfu), "hfu": times(thr.hfu),
        # the interval follows the measurement: the model's relative error band about the calibrated figure
        "tokens_per_second_per_gpu_interval": None if thr.tokens_per_second_per_gpu_interval is None else
        tuple(round(v * factor, 1) for v in thr.tokens_per_second_per_gpu_interval)})


def calibrated_memory(mem: MemoryEstimate, factor: float) -> MemoryEstimate:
    """Peak, reserved, breakdown and phases scaled by ``factor`` (>= 1); required grows by what
    reserved grew (the CUDA context and NCCL buffers are outside the allocator)."""
    if factor <= 1:
        return mem
    reserved = mem.reserved_gib_per_gpu * factor
    return mem.model_copy(update={
        "peak_gib_per_gpu": round(mem.peak_gib_per_gpu * factor, 3), "reserved_gib_per_gpu": round(reserved, 3),
        "required_gib_per_gpu": round(mem.required_gib_per_gpu + reserved - mem.reserved_gib_per_gpu, 3),
        "breakdown_gib": {k: round(v * factor, 3) for k, v in mem.breakdown_gib.items()},
        "phases_gib": {k: round(v * factor, 3) for k, v in mem.phases_gib.items()},
        "peak_gib_interval": _scaled(mem.peak_gib_interval, factor),
        "required_gib_interval": _scaled(mem.required_gib_interval, reserved / mem.reserved_gib_per_gpu
                                         if mem.reserved_gib_per_gpu else factor)})


def _scaled(iv: Optional[tuple[float, float]], factor: float) -> Optional[tuple[float, float]]:
    return None if iv is None else (round(iv[0] * factor, 2), round(iv[1] * factor, 2))


def adjust(arch: Architecture, training: TrainingSpec, gpu: str, mem: MemoryEstimate, thr: ThroughputEstimate,
           overlay: Optional[CalibrationOverlay] = None) -> tuple[MemoryEstimate, ThroughputEstimate, tuple[str, ...]]:
    """The estimates with the overlay entry of this workload on ``gpu`` applied, and its label
    (nothing changes, no label, without an entry)."""
    overlay = overlay or load_overlay()
    entry = overlay.find(workload_key(arch, training, gpu)) if overlay.entries else None
    if entry is None:
        return mem, thr, ()
    return (calibrated_memory(mem, entry.applied_memory_factor), calibrated_speed(thr, entry.throughput_factor),
            (entry.label(),))


def adjust_memory(arch: Architecture, training: TrainingSpec, gpu: Optional[str], mem: MemoryEstimate) -> MemoryEstimate:
    overlay = load_overlay()
    entry = overlay.find(workload_key(arch, training, gpu)) if gpu and overlay.entries else None
    return mem if entry is None else calibrated_memory(mem, entry.applied_memory_factor)
