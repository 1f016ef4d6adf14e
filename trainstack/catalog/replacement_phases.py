"""The phases a self-healing replacement node goes through, as data (``data/replacement_phases.yaml``).

Each phase carries its figure and how it is known (measured by a test here, sourced from a document
in sources.yaml, or assumed and saying why), so the plan's replacement time is a sum of labelled
parts, never one opaque constant (trainstack.layout.replacement adds the checkpoint restore).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .loader import DATA_DIR, CatalogError, read_data_yaml, source_tags

PHASES_FILE = "replacement_phases.yaml"


class PhaseFact(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    what: str
    seconds: float = Field(ge=0, strict=False)
    range: Optional[tuple[float, float]] = Field(None, strict=False)
    kind: Literal["measured", "sourced", "assumed"]
    source: str
    skipped_by: Optional[Literal["gpu-driver", "erdma", "pytorch"]] = None
    applies: Literal["always", "erdma"] = "always"
    stage: Literal["setup", "resume"] = "setup"
    before_launch: bool = False

    @model_validator(mode="after")
    def _range_holds(self) -> "PhaseFact":
        if self.range is not None and not self.range[0] <= self.seconds <= self.range[1]:
            raise ValueError(f"seconds {self.seconds} is outside its range {self.range}")
        return self


class TimelineFact(BaseModel):
    """A fact the phases hang on: the reclaim notice window, what triggers the replacement's launch."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    what: str
    seconds: Optional[float] = Field(None, ge=0, strict=False)
    kind: Literal["sourced"]
    source: str


class ReplacementFacts(BaseModel):
    model_config = ConfigDict(frozen=True)

    notice: TimelineFact
    launch_trigger: TimelineFact
    phases: tuple[PhaseFact, ...]


def replacement_phases(data_dir: Path = DATA_DIR) -> tuple[PhaseFact, ...]:
    """The phases in order."""
    return replacement_facts(data_dir).phases


@functools.lru_cache(maxsize=4)
def replacement_facts(data_dir: Path = DATA_DIR) -> ReplacementFacts:
    """The notice window, the launch trigger and the phases; every sourced figure cites a tag of sources.yaml."""
    doc = read_data_yaml(data_dir / PHASES_FILE) or {}
    tags = source_tags(data_dir)
    out, errors = [], []
    timeline = {}
    for key in ("notice", "launch_trigger"):
        try:
            timeline[key] = TimelineFact.model_validate(doc.get(key))
        except ValidationError as exc:
            errors.append(f"{PHASES_FILE} {key}: {exc}")
            continue
        if timeline[key].source not in tags:
            errors.append(f"{PHASES_FILE}: {key} cites unknown source {timeline[key].source!r}")
    if "notice" in timeline and timeline["notice"].seconds is None:
        errors.append(f"{PHASES_FILE}: notice needs seconds")
    for i, row in enumerate(doc.get("phases") or []):
        try:
            fact = PhaseFact.model_validate(row)
        except ValidationError as exc:
            errors.append(f"{PHASES_FILE}[{i}]: {exc}")
            continue
        if fact.kind == "sourced" and fact.source not in tags:
            errors.append(f"{PHASES_FILE}: {fact.name} cites unknown source {fact.source!r}")
        out.append(fact)
    if len({f.name for f in out}) != len(out):
        errors.append(f"{PHASES_FILE}: duplicate phase names")
    if errors:
        raise CatalogError("replacement phases are inconsistent:\n  " + "\n  ".join(errors))
    return ReplacementFacts(notice=timeline["notice"], launch_trigger=timeline["launch_trigger"], phases=tuple(out))
