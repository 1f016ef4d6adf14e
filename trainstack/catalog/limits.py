"""Alibaba Cloud service limits as data (``data/service_limits.yaml``), each with its source.

Planning code asks for a limit by key (``service_limits().number("ecs.user_data.max_bytes")``)
instead of carrying its own constant, so a limit and its citation change in one place. A value
no public source states is kept with ``verified: false`` and a note saying what was searched.
"""

from __future__ import annotations

import difflib
import functools
from pathlib import Path
from typing import Iterator, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, ValidationError, model_validator

from .loader import DATA_DIR, CatalogError, read_data_yaml, source_tags

#: What a limit can be: a flag, a number, a rule or mode (string), a list of names, or a
#: mapping of names to numbers (ESSD minimum per performance level) or to strings (an environment).
LimitValue = Union[StrictBool, StrictInt, StrictFloat, str, tuple[str, ...], dict[str, Union[StrictInt, StrictFloat]],
                   dict[str, str]]

LIMITS_FILE = "service_limits.yaml"


class ServiceLimit(BaseModel):
    """One documented limit or rule of an Alibaba Cloud service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(pattern=r"^[a-z0-9_]+(\.[a-z0-9_]+)+$", description="<service>.<subject>.<fact>")
    value: Optional[LimitValue] = Field(description="None only when no source states it")
    unit: Optional[str] = None
    source: str = Field(description="Tag in sources.yaml")
    verified: bool = True
    notes: Optional[str] = None

    @model_validator(mode="after")
    def _unknown_is_explicit(self) -> "ServiceLimit":
        if self.value is None and self.verified:
            raise ValueError("a limit without a value must say verified: false")
        if not self.verified and not self.notes:
            raise ValueError("an unverified limit needs notes saying what was searched")
        return self


class ServiceLimits:
    """All limits by key; read-only."""

    def __init__(self, limits: tuple[ServiceLimit, ...]):
        self._by_key = {lim.key: lim for lim in limits}

    def __iter__(self) -> Iterator[ServiceLimit]:
        return iter(self._by_key.values())

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __getitem__(self, key: str) -> ServiceLimit:
        try:
            return self._by_key[key]
        except KeyError:
            near = difflib.get_close_matches(key, self._by_key, n=3, cutoff=0.6)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise KeyError(f"no service limit {key!r} in {LIMITS_FILE}{hint}") from None

    def value(self, key: str) -> Optional[LimitValue]:
        return self[key].value

    def number(self, key: str) -> Union[int, float]:
        """A numeric limit; a key holding anything else is a programming error."""
        v = self[key].value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"service limit {key!r} is {v!r}, not a number")
        return v

    def under(self, prefix: str) -> list[ServiceLimit]:
        """The limits of one service or subject (``ecs.deployment_set``)."""
        dotted = prefix.rstrip(".") + "."
        return [lim for key, lim in self._by_key.items() if key.startswith(dotted)]

    def unverified(self) -> list[ServiceLimit]:
        return [lim for lim in self._by_key.values() if not lim.verified]


def load_limits(data_dir: Path = DATA_DIR) -> ServiceLimits:
    """Read and check ``service_limits.yaml``: typed entries, unique keys, known source tags."""
    rows = read_data_yaml(data_dir / LIMITS_FILE) or []
    tags = source_tags(data_dir)
    limits: list[ServiceLimit] = []
    errors: list[str] = []
    seen: set[str] = set()
    for i, row in enumerate(rows):
        try:
            lim = ServiceLimit.model_validate(row)
        except ValidationError as exc:
            errors.append(f"{LIMITS_FILE}[{i}] ({row.get('key', '?') if isinstance(row, dict) else '?'}): {exc}")
            continue
        if lim.key in seen:
            errors.append(f"{LIMITS_FILE}: duplicate key {lim.key}")
        seen.add(lim.key)
        if lim.source not in tags:
            errors.append(f"{LIMITS_FILE}: {lim.key} cites unknown source {lim.source!r}")
        limits.append(lim)
    if errors:
        raise CatalogError("service limits are inconsistent:\n  " + "\n  ".join(errors))
    return ServiceLimits(tuple(limits))


@functools.lru_cache(maxsize=1)
def service_limits() -> ServiceLimits:
    """The packaged service limits, read once per process."""
    return load_limits()
