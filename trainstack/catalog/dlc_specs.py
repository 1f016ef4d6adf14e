"""PAI-DLC facts as data (``data/dlc_specs.yaml``): Lingjun specs, PAI's NCCL presets, the job
environment DLC injects, official-image labels and the state of DLC prices, each with sources.

Typed and frozen like the rest of the catalog; a figure no public page states is ``None`` and
named in ``unverified``, so the DLC planner can tell documented facts from readings of a name.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from pathlib import Path
from typing import Any, Iterable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import InputError, Problem, did_you_mean
from ..profile.yamlfile import read_yaml_document
from .loader import DATA_DIR, CatalogError, load_catalog, overlay_dir, read_data_yaml, source_tags

DLC_FILE = "dlc_specs.yaml"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _unknowns_listed(record: BaseModel, fields: Iterable[str]) -> None:
    """A None field must be named in ``unverified`` (unknown is explicit, never a silent gap)."""
    listed = set(getattr(record, "unverified", ()))
    missing = [f for f in fields if getattr(record, f) is None and f not in listed]
    if missing:
        raise ValueError(f"null fields not listed in unverified: {', '.join(missing)}")


class NameReading(_Frozen):
    """What a spec name spells (``c96m1600.8``); a reading, not a documented figure."""

    vcpu: Optional[int] = None
    memory_gib: Optional[int] = None
    gpu_count: Optional[int] = None


class StatedSpec(_Frozen):
    """What a team states about a Lingjun spec PAI does not document (``lingjun_specs.yaml`` in the
    catalog overlay directory), read from its account (DLC ListEcsSpecs, PAI Studio ListNodeTypes)
    or the console. Used only for a profile that names the spec (``dlc.quota_spec``)."""

    name: str
    gpu_model: str = Field(min_length=1, max_length=64, description="A GPU model of the catalog (gpus.yaml)")
    gpu_count: int = Field(ge=1, le=16)
    interconnect: Literal["nvlink", "nvswitch", "pcie"]
    gpu_memory_gib: Optional[float] = Field(None, gt=0, le=1024)
    vcpu: Optional[int] = Field(None, ge=1, le=4096)
    memory_gib: Optional[float] = Field(None, gt=0, le=65536)
    source: str = Field(min_length=1, max_length=500, description="Where the team read these facts")
    as_of: _dt.date


class LingjunSpec(_Frozen):
    """A Lingjun resource spec PAI documents by name (and what a team stated about it, if anything)."""

    name: str = Field(pattern=r"^ml\.[a-z0-9]+\.[a-z0-9.]+-[a-z0-9]+$")
    rdma: bool
    rdma_hca: Optional[str] = None
    nccl_preset: Optional[str] = None
    gpu_model: Optional[str] = None
    gpu_count: Optional[int] = None
    gpu_memory_gib: Optional[float] = None
    vcpu: Optional[int] = None
    memory_gib: Optional[float] = None
    interconnect: Optional[str] = None
    name_reading: Optional[NameReading] = None
    sources: tuple[str, ...]
    unverified: tuple[str, ...] = ()
    notes: Optional[str] = None
    stated: Optional[StatedSpec] = Field(None, description="The team's statement (catalog overlay), if any")

    @model_validator(mode="after")
    def _explicit(self) -> "LingjunSpec":
        _unknowns_listed(self, ("gpu_model", "gpu_count", "gpu_memory_gib", "vcpu", "memory_gib", "interconnect"))
        return self


class NcclPreset(_Frozen):
    """NCCL variables PAI sets on a kind of resource."""

    name: str
    source: str
    as_of: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    env: dict[str, str]
    keep: tuple[str, ...] = Field((), description="Variables a job may not set to another value")
    notes: Optional[str] = None

    @model_validator(mode="after")
    def _names(self) -> "NcclPreset":
        bad = [k for k in self.env if not re.fullmatch(r"NCCL_[A-Z0-9_]+", k)]
        if bad:
            raise ValueError(f"not NCCL variables: {', '.join(bad)}")
        if missing := sorted(set(self.keep) - set(self.env)):
            raise ValueError(f"keep names variables the preset does not set: {', '.join(missing)}")
        return self


class CustomImageRequirements(_Frozen):
    source: str
    min_cuda: str
    min_nccl: str
    notes: Optional[str] = None


class EnvVariable(_Frozen):
    name: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$")
    meaning: str
    example: Optional[str] = None


class JobEnv(_Frozen):
    """Variables DLC injects into every node of a job of one framework."""

    framework: str
    source: str
    as_of: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    variables: tuple[EnvVariable, ...]
    launcher_mapping: dict[str, str] = Field(default_factory=dict, description="launcher flag -> variable")
    notes: Optional[str] = None

    @model_validator(mode="after")
    def _mapping_uses_known_variables(self) -> "JobEnv":
        names = {v.name for v in self.variables}
        unknown = sorted(set(self.launcher_mapping.values()) - names)
        if unknown:
            raise ValueError(f"launcher_mapping names variables DLC does not set: {', '.join(unknown)}")
        return self

    def variable(self, name: str) -> EnvVariable:
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(f"DLC sets no {name} for {self.framework} jobs")


class OfficialImages(_Frozen):
    """How official DLC training images are found (AIWorkspace ListImages)."""

    source: str
    label_filter: tuple[str, ...]
    name_filter: str
    provider_label: str
    framework_label_pattern: str
    tag_pattern: str
    tag_groups: tuple[str, ...]
    label_keys: tuple[str, ...]
    cuda_label: Optional[str] = None
    unverified: tuple[str, ...] = ()
    frameworks: dict[str, str] = Field(default_factory=dict, description="DLC job type -> framework image name")
    repository_suffix: str = "-training"
    min_cuda_source: str
    min_cuda_by_architecture: dict[str, str]
    notes: Optional[str] = None

    @model_validator(mode="after")
    def _consistent(self) -> "OfficialImages":
        _unknowns_listed(self, ("cuda_label",))
        bad = [v for v in self.min_cuda_by_architecture.values() if not re.fullmatch(r"\d+\.\d+", v)]
        if bad:
            raise ValueError(f"min_cuda_by_architecture values must be versions like 11.8: {bad}")
        if re.compile(self.tag_pattern).groups != len(self.tag_groups):
            raise ValueError("tag_groups must name every group of tag_pattern")
        keys = set(self.label_keys)
        for pair in self.label_filter:
            key = pair.split("=", 1)[0]
            if "=" not in pair or (key not in keys and key != "system.official"):
                raise ValueError(f"label filter {pair!r} is not Key=Value over a ListImages key")
        return self

    def parse_tag(self, tag: str) -> Optional[dict[str, Optional[str]]]:
        """The parts of an official image tag, or None when the tag does not follow the pattern."""
        m = re.fullmatch(self.tag_pattern, tag)
        return dict(zip(self.tag_groups, m.groups())) if m else None


class DlcPrices(_Frozen):
    """Whether and where DLC prices are published."""

    published: bool
    source: str
    billing: str
    lingjun_billing_source: str
    spot_api: Optional[str] = None
    spot_api_source: Optional[str] = None
    price_api: Optional[str] = None
    unverified: tuple[str, ...] = ()
    notes: Optional[str] = None


class DlcFacts(_Frozen):
    lingjun_specs: tuple[LingjunSpec, ...]
    nccl_presets: tuple[NcclPreset, ...]
    custom_image_requirements: CustomImageRequirements
    job_env: tuple[JobEnv, ...]
    official_images: OfficialImages
    prices: DlcPrices

    def spec(self, name: str) -> LingjunSpec:
        for s in self.lingjun_specs:
            if s.name == name:
                return s
        raise KeyError(f"no Lingjun spec {name!r} in {DLC_FILE}")

    def preset(self, name: str) -> NcclPreset:
        for p in self.nccl_presets:
            if p.name == name:
                return p
        raise KeyError(f"no NCCL preset {name!r} in {DLC_FILE}")

    def env_for(self, framework: str) -> JobEnv:
        for e in self.job_env:
            if e.framework == framework:
                return e
        raise KeyError(f"no DLC job environment for {framework!r} in {DLC_FILE}")

    def cited_tags(self) -> set[str]:
        tags: set[str] = set()
        for s in self.lingjun_specs:
            tags.update(s.sources)
        tags.update(p.source for p in self.nccl_presets)
        tags.update(e.source for e in self.job_env)
        tags.update({self.custom_image_requirements.source, self.official_images.source,
                     self.official_images.min_cuda_source, self.prices.source, self.prices.lingjun_billing_source})
        if self.prices.spot_api_source:
            tags.add(self.prices.spot_api_source)
        return tags


def load_dlc_facts(data_dir: Path = DATA_DIR) -> DlcFacts:
    """Read ``dlc_specs.yaml`` and check its source tags and preset references."""
    raw: Any = read_data_yaml(data_dir / DLC_FILE)
    try:
        facts = DlcFacts.model_validate(raw)
    except ValidationError as exc:
        raise CatalogError(f"{DLC_FILE}: {exc}") from None
    tags = source_tags(data_dir)
    errors = [f"{DLC_FILE} cites unknown source {t!r}" for t in sorted(facts.cited_tags() - tags)]
    presets = {p.name for p in facts.nccl_presets}
    errors += [f"{DLC_FILE}: {s.name} names unknown NCCL preset {s.nccl_preset!r}"
               for s in facts.lingjun_specs if s.nccl_preset and s.nccl_preset not in presets]
    names = [s.name for s in facts.lingjun_specs]
    errors += [f"{DLC_FILE}: duplicate spec {n}" for n in sorted({n for n in names if names.count(n) > 1})]
    if errors:
        raise CatalogError("DLC facts are inconsistent:\n  " + "\n  ".join(errors))
    return facts


#: The team's statements about Lingjun specs, in the catalog overlay directory (``overlay_dir()``).
LINGJUN_OVERLAY = "lingjun_specs.yaml"


class _StatedFile(_Frozen):
    lingjun_specs: tuple[StatedSpec, ...] = Field(max_length=256)


def read_stated_specs(path: Path, facts: DlcFacts) -> tuple[StatedSpec, ...]:
    """``lingjun_specs.yaml``: every problem at once as an InputError naming the file and the entry."""
    doc = read_yaml_document(path, what="Lingjun spec overlay")
    try:
        parsed = _StatedFile.model_validate(doc)
    except ValidationError as exc:
        problems = [Problem(path=".".join(str(p) for p in e["loc"]).replace(".[", "["), file=str(path),
                            message=e["msg"].removeprefix("Value error, ")) for e in exc.errors()]
        raise InputError(f"{path}: {len(problems)} problem(s)", problems=problems,
                         hint="format: docs/dlc.md, \"Lingjun\"") from None
    known = [s.name for s in facts.lingjun_specs]
    gpus = load_catalog().gpus
    problems = []
    names: list[str] = []
    for i, st in enumerate(parsed.lingjun_specs):
        if st.name not in known:
            problems.append(Problem(path=f"lingjun_specs[{i}].name", message="not a Lingjun spec PAI documents "
                                    f"({DLC_FILE})", given=st.name, has_given=True, file=str(path),
                                    suggestions=did_you_mean(st.name, known)))
        if st.gpu_model not in gpus:
            problems.append(Problem(path=f"lingjun_specs[{i}].gpu_model", message="unknown GPU model",
                                    given=st.gpu_model, has_given=True, file=str(path),
                                    suggestions=did_you_mean(st.gpu_model, gpus)))
        if st.name in names:
            problems.append(Problem(path=f"lingjun_specs[{i}].name", message="stated twice", given=st.name,
                                    has_given=True, file=str(path)))
        names.append(st.name)
    if problems:
        raise InputError(f"{path}: {len(problems)} problem(s)", problems=problems,
                         hint="format: docs/dlc.md, \"Lingjun\"")
    return parsed.lingjun_specs


def with_stated(facts: DlcFacts, stated: Iterable[StatedSpec]) -> DlcFacts:
    by_name = {s.name: s for s in stated}
    if not by_name:
        return facts
    specs = tuple(s.model_copy(update={"stated": by_name.get(s.name)}) for s in facts.lingjun_specs)
    return facts.model_copy(update={"lingjun_specs": specs})


@functools.lru_cache(maxsize=1)
def _packaged() -> DlcFacts:
    return load_dlc_facts()


@functools.lru_cache(maxsize=8)
def _with_overlay(path: str, _mtime_ns: int, _size: int) -> DlcFacts:
    return with_stated(_packaged(), read_stated_specs(Path(path), _packaged()))


def dlc_facts() -> DlcFacts:
    """The packaged DLC facts, with the team's Lingjun statements of the catalog overlay directory."""
    path = overlay_dir() / LINGJUN_OVERLAY
    try:
        st = path.stat()
    except OSError:
        return _packaged()
    return _with_overlay(str(path), st.st_mtime_ns, st.st_size)
