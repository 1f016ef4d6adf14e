"""Read the calibration rows into (Architecture, TrainingSpec, measured) for the benchmarks and tests."""

from __future__ import annotations

import json
import pathlib
from typing import Any, NamedTuple, Union

from trainstack.architecture import Architecture
from trainstack.profile import LoraSpec, TrainingSpec

DATA = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "calibration"
CALIBRATION = DATA / "h200-training-steps.json"
HELDOUT = DATA / "h200-heldout.json"


class Row(NamedTuple):
    id: str
    model: str
    arch: Architecture
    training: TrainingSpec
    peak_gib: float
    reserved_gib: float
    tokens_per_second: float


def load_rows(path: Union[str, pathlib.Path] = CALIBRATION) -> list[Row]:
    """Every row of a calibration file, the conditions turned into trainstack's own types."""
    doc: list[dict[str, Any]] = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    rows = []
    for r in doc:
        lora = LoraSpec(rank=r["lora"]["rank"], targets=r["lora"]["targets"]) if r.get("lora") else None
        training = TrainingSpec(method=r["method"], precision=r["precision"], optimizer="adamw",
                                micro_batch_size=r["micro_batch_size"], sequence_length=r["sequence_length"],
                                gradient_checkpointing=r["gradient_checkpointing"], lora=lora)
        m = r["measured"]
        rows.append(Row(r["id"], r["model"], Architecture(**r["architecture"]), training,
                        m["peak_allocated_bytes"] / 2**30, m["peak_reserved_bytes"] / 2**30,
                        m["tokens_per_second"]))
    return rows
