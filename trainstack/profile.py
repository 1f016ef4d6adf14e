"""The training profile: what a team wants to train, as a frozen, strictly-typed model.

``load_profile(path)`` is the only way in from a file: it turns every user mistake (missing
file, bad YAML, wrong field, misspelt key or preset, secret in plain text) into an
:class:`~trainstack.errors.InputError` listing one problem per line with the field path, the
value given and what is allowed. Rules that need the catalog live in the resolver.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml
from pydantic import (
    BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator,
)

from .architecture import Architecture, derive_architecture, presets
from .errors import InputError, Problem, did_you_mean
from .secrets import find_secrets

DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
MAX_PROFILE_BYTES = 1 << 20
SCHEMA_URL_COMMENT = "# yaml-language-server: $schema=../../profile.schema.json"


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelSpec(_Strict):
    """Exactly one of ``preset``, ``architecture`` or ``params_b``."""

    preset: Optional[str] = Field(None, description="A name from `trainstack schema` presets, e.g. llama-3-8b")
    architecture: Optional[Architecture] = None
    params_b: Optional[float] = Field(None, gt=0, le=2000, description="Size in billions; shape derived")

    @model_validator(mode="after")
    def _exactly_one(self) -> "ModelSpec":
        given = [k for k in ("preset", "architecture", "params_b") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of preset, architecture, params_b (got {given or 'none'})")
        if self.preset is not None and self.preset not in presets():
            raise ValueError(f"unknown preset {self.preset!r}")
        return self

    def resolved_architecture(self) -> Architecture:
        if self.architecture is not None:
            return self.architecture
        if self.preset is not None:
            return presets()[self.preset].architecture
        return derive_architecture(float(self.params_b))  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        if self.preset:
            return self.preset
        if self.params_b is not None:
            return f"{self.params_b:g}B (derived shape)"
        return "custom architecture"


class LoraSpec(_Strict):
    rank: int = Field(16, ge=1, le=1024)
    targets: Literal["attention", "all-linear"] = "attention"
    alpha: Optional[float] = Field(None, gt=0, description="Defaults to 2 x rank")


Method = Literal["full", "lora", "qlora", "pretrain"]
Precision = Literal["bf16", "bf16-mixed", "fp16-mixed", "fp8-mixed"]


class TrainingSpec(_Strict):
    method: Method = "full"
    precision: Precision = "bf16-mixed"
    optimizer: Literal["adamw", "adamw-8bit", "sgd", "adafactor"] = "adamw"
    micro_batch_size: int = Field(1, ge=1, le=4096)
    sequence_length: int = Field(2048, ge=16, le=1 << 20)
    gradient_checkpointing: bool = False
    lora: Optional[LoraSpec] = None
    zero_stage: int = Field(0, ge=0, le=3)
    tokens: Optional[float] = Field(None, gt=0, le=1e15, description="Total tokens to process")

    @model_validator(mode="after")
    def _lora_only_with_adapters(self) -> "TrainingSpec":
        if self.lora is not None and self.method not in ("lora", "qlora"):
            raise ValueError(f"a lora block is only valid with method lora or qlora, not {self.method!r}")
        return self

    @property
    def adapters(self) -> Optional[LoraSpec]:
        """The LoRA settings in force (defaults when a LoRA method omits the block)."""
        if self.method in ("lora", "qlora"):
            return self.lora or LoraSpec()
        return None


class JobSpec(_Strict):
    command: str = Field("python train.py", min_length=1, max_length=4096)
    image: Optional[str] = Field(None, max_length=512)
    code_uri: Optional[str] = Field(None, max_length=1024)
    env: dict[str, str] = Field(default_factory=dict)
    max_runtime_hours: Optional[float] = Field(None, gt=0, le=24 * 90, description="Hard stop; nodes stop billing")

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
                raise ValueError(f"environment variable name {k!r} is not a valid shell name")
        return v


class ResourcesSpec(_Strict):
    target: Literal["auto", "ecs", "dlc"] = "auto"
    gpus: Union[Literal["auto"], int] = "auto"
    gpu_models: tuple[str, ...] = ()
    instance_types: tuple[str, ...] = Field((), description="Optional allow-list of ECS types")
    max_nodes: int = Field(8, ge=1, le=512)
    spot: Literal["never", "allow", "require"] = "allow"
    objective: Literal["cost", "time"] = "cost"
    deadline_hours: Optional[float] = Field(None, gt=0, le=24 * 365)
    max_hourly_cost: Optional[float] = Field(None, gt=0, description="CNY per hour")
    max_total_cost: Optional[float] = Field(None, gt=0, description="CNY")
    self_healing: bool = Field(
        False, description="Spot only: run the node in an ESS scaling group that replaces a reclaimed spot "
                           "node (1-node plans; checkpoints on oss or cpfs)")

    @field_validator("self_healing")
    @classmethod
    def _self_healing_needs_spot(cls, v: bool, info: ValidationInfo) -> bool:
        spot = info.data.get("spot")
        if v and spot == "never":
            raise ValueError("self_healing replaces reclaimed spot nodes; it needs resources.spot: allow or "
                             "require (spot is never)")
        return v

    @field_validator("gpus")
    @classmethod
    def _positive(cls, v: Any) -> Any:
        if isinstance(v, int) and not 1 <= v <= 8192:
            raise ValueError("gpus must be 'auto' or a whole number from 1 to 8192")
        return v


class DlcSpec(_Strict):
    workspace_id: Optional[str] = Field(None, max_length=128)
    resource_id: Optional[str] = Field(None, max_length=128, description="Resource quota ID (Lingjun/general)")
    job_type: Literal["PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "ElasticBatchJob", "RayJob"] = "PyTorchJob"
    image_tag: Optional[str] = Field(None, max_length=128, description="Tag of the PAI pytorch-training image")
    enable_rdma: Optional[bool] = None
    public_limits_raised: bool = Field(
        False, description="Your account manager raised PAI-DLC's public-resource limits (2 GPUs, 8 vCPU)")


class StorageSpec(_Strict):
    dataset_gib: float = Field(0, ge=0, le=10_000_000)
    dataset_uri: Optional[str] = Field(None, max_length=1024)
    checkpoint: Literal["cpfs", "oss", "essd"] = "oss"
    checkpoint_gib: Optional[float] = Field(None, gt=0, le=1_000_000)
    retain_on_destroy: bool = True

    @field_validator("dataset_uri")
    @classmethod
    def _uri(cls, v: Optional[str]) -> Optional[str]:
        if v and not re.match(r"^(oss|cpfs|nas)://\S+$", v):
            raise ValueError("dataset_uri must start with oss://, cpfs:// or nas://")
        return v


class NetworkSpec(_Strict):
    vpc_cidr: str = "10.0.0.0/16"
    vswitch_cidr: Optional[str] = None
    internet_egress: bool = False

    @field_validator("vpc_cidr", "vswitch_cidr")
    @classmethod
    def _private(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        net = ipaddress.ip_network(v, strict=True)
        if net.version != 4 or not net.is_private:
            raise ValueError("must be a private IPv4 CIDR such as 10.0.0.0/16")
        if not 8 <= net.prefixlen <= 29:
            raise ValueError("prefix length must be between /8 and /29")
        return v

    @model_validator(mode="after")
    def _inside(self) -> "NetworkSpec":
        if self.vswitch_cidr and not ipaddress.ip_network(self.vswitch_cidr).subnet_of(
                ipaddress.ip_network(self.vpc_cidr)):
            raise ValueError(f"vswitch_cidr {self.vswitch_cidr} is not inside vpc_cidr {self.vpc_cidr}")
        return self


class AccessSpec(_Strict):
    ssh_cidrs: tuple[str, ...] = ()
    key_pair: Optional[str] = Field(None, max_length=128)

    @field_validator("ssh_cidrs")
    @classmethod
    def _cidrs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for c in v:
            net = ipaddress.ip_network(c, strict=False)
            if net.prefixlen == 0:
                raise ValueError(f"{c} opens SSH to the whole internet; list your office or VPN CIDRs")
            if not net.is_private and net.prefixlen < (16 if net.version == 4 else 32):
                raise ValueError(f"{c} opens SSH to {net.num_addresses:,} public addresses; use a /16 or "
                                 "narrower office or VPN range")
        return v


class TrainingProfile(_Strict):
    """A whole profile. Field names are a contract (docs/DESIGN.md)."""

    name: str = Field(description="DNS-safe: lowercase letters, digits, '-'; at most 63")
    region: str = "cn-shenzhen"
    zone: Optional[str] = None
    model: ModelSpec
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    job: JobSpec = Field(default_factory=JobSpec)
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)
    dlc: DlcSpec = Field(default_factory=DlcSpec)
    storage: StorageSpec = Field(default_factory=StorageSpec)
    network: NetworkSpec = Field(default_factory=NetworkSpec)
    access: AccessSpec = Field(default_factory=AccessSpec)
    image_id: Optional[str] = Field(None, max_length=128)
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not DNS_LABEL.match(v):
            raise ValueError("must be DNS-safe: lowercase letters, digits and '-', starting with a letter, at most 63")
        return v

    @field_validator("region")
    @classmethod
    def _region_shape(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z]{2}-[a-z0-9-]+", v):
            raise ValueError("must look like cn-shenzhen")
        return v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if k.startswith(("trainstack:", "aliyun", "acs:")):
                raise ValueError(f"tag {k!r} uses a reserved prefix (trainstack:, aliyun, acs:)")
        return v

    @model_validator(mode="after")
    def _cross_field(self) -> "TrainingProfile":
        t, r = self.training, self.resources
        if r.gpus == 1 and t.zero_stage > 0:
            raise ValueError(f"zero_stage {t.zero_stage} shards over data-parallel GPUs; with gpus: 1 use zero_stage: 0")
        if self.zone and not self.zone.startswith(self.region):
            raise ValueError(f"zone {self.zone} is not in region {self.region}")
        if r.self_healing and r.target == "dlc":
            raise ValueError("resources.self_healing applies to ECS nodes; PAI-DLC (target: dlc) restarts jobs itself")
        if r.self_healing and self.storage.checkpoint == "essd":
            raise ValueError("resources.self_healing needs storage.checkpoint: oss or cpfs; a replacement node "
                             "cannot reach checkpoints on the reclaimed node's ESSD")
        if r.target == "dlc" and r.instance_types and self.dlc.resource_id:
            raise ValueError("resources.instance_types does not apply to a DLC quota job (dlc.resource_id)")
        return self

    @property
    def architecture(self) -> Architecture:
        return self.model.resolved_architecture()


# ---- loading ------------------------------------------------------------------------------

class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys instead of silently keeping the last."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen[key] = True
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_yaml_document(path: Union[str, Path], what: str = "profile") -> dict[str, Any]:
    """Read one YAML mapping from a file; every failure is an InputError naming the file."""
    p = Path(path)
    name = str(path)

    def fail(msg: str, hint: Optional[str] = None) -> InputError:
        return InputError(f"{name}: {msg}", problems=[Problem(path="", message=msg, file=name)], hint=hint)

    if not p.exists():
        raise fail(f"{what} file not found", hint="check the path; sample profiles live in stacks/profiles/")
    if p.is_dir():
        raise fail(f"is a directory, not a {what} file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror}") from None
    if len(raw) > MAX_PROFILE_BYTES:
        raise fail(f"{len(raw)} bytes is too large for a {what} (limit {MAX_PROFILE_BYTES})")
    if b"\x00" in raw:
        raise fail(f"is a binary file, not a YAML {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise fail("is not UTF-8 text") from None
    if not text.strip():
        raise fail(f"is empty; a {what} needs at least `name` and `model`")
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise fail(f"is not valid YAML{where}: {exc.problem or exc.context}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise fail(f"is not valid YAML: {exc}") from None
    if doc is None:
        raise fail(f"is empty; a {what} needs at least `name` and `model`")
    if not isinstance(doc, dict):
        raise fail(f"must be a YAML mapping (key: value), not a {type(doc).__name__}")
    return doc


def load_profile(path: Union[str, Path]) -> TrainingProfile:
    """Load and validate a profile file."""
    return parse_profile(read_yaml_document(path), file=str(path))


def parse_profile(doc: Any, file: Optional[str] = None) -> TrainingProfile:
    """Validate an already-parsed document; all problems are reported together."""
    if not isinstance(doc, dict):
        raise InputError("profile must be a mapping", problems=[
            Problem(path="", message="profile must be a YAML mapping", file=file,
                    given=type(doc).__name__, has_given=True)])
    secret_problems = [Problem(path=p, message=m, file=file) for p, m in find_secrets(doc)]
    try:
        profile = TrainingProfile.model_validate(doc)
    except ValidationError as exc:
        problems = secret_problems + [_problem_from(e, doc, file) for e in exc.errors()]
        raise InputError(f"{file or 'profile'}: {len(problems)} problem(s)", problems=_dedupe(problems)) from None
    except (RecursionError, OverflowError) as exc:
        raise InputError(f"{file or 'profile'}: unusable value ({type(exc).__name__})",
                         problems=[Problem(path="", message=f"unusable value: {exc}", file=file)]) from None
    if secret_problems:
        raise InputError(f"{file or 'profile'}: secrets in plain text", problems=secret_problems,
                         hint="use the Alibaba Cloud credentials chain (env, ~/.alibabacloud/credentials.ini or ~/.aliyun/config.json, "
                              "RAM role) or `pulumi config set --secret`")
    return profile


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        key = (p.path, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _model_at(loc: tuple) -> Optional[type[BaseModel]]:
    """The pydantic model class that owns the location ``loc`` (for 'did you mean')."""
    model: Any = TrainingProfile
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        ann = field.annotation
        for cand in getattr(ann, "__args__", ()) or (ann,):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                ann = cand
                break
        model = ann
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _value_at(doc: Any, loc: tuple) -> tuple[bool, Any]:
    cur = doc
    for part in loc:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and part < len(cur):
            cur = cur[part]
        else:
            return False, None
    return True, cur


def _allowed_for(err: dict) -> Optional[str]:
    ctx = err.get("ctx") or {}
    typ = err["type"]
    if "expected" in ctx:
        return str(ctx["expected"])
    bounds = {"greater_than": "> {gt}", "greater_than_equal": ">= {ge}", "less_than": "< {lt}",
              "less_than_equal": "<= {le}"}
    if typ in bounds:
        return bounds[typ].format(**ctx)
    return {"int_parsing": "a whole number", "int_type": "a whole number", "float_parsing": "a number",
            "float_type": "a number", "bool_parsing": "true or false", "bool_type": "true or false",
            "string_type": "a string", "dict_type": "a mapping", "model_type": "a mapping",
            "int_from_float": "a whole number"}.get(typ)


_UNION_TAG = re.compile(r"^(literal\[.*\]|int|str|float|bool|none|function-after\[.*\]|.*\[.*\])$")


def _document_loc(raw: tuple, doc: Any) -> tuple:
    """pydantic's error location with union-member tags (``int``, ``literal['auto']``) removed.

    A part is kept when the document has it at that depth (so a user's key named ``str`` or
    ``a[0]`` survives); a part the document lacks is dropped only if it looks like a union tag.
    """
    out, cur = [], doc
    for part in raw:
        if isinstance(cur, dict) and part in cur:
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
        elif isinstance(part, str) and _UNION_TAG.match(part):
            continue
        else:
            out.append(part)
            cur = None
    return tuple(out)


def _problem_from(err: dict, doc: dict, file: Optional[str]) -> Problem:
    loc = _document_loc(tuple(err["loc"]), doc)
    path = ".".join(str(p) for p in loc)
    typ = err["type"]
    if typ == "extra_forbidden" and loc:
        owner = _model_at(loc[:-1])
        names = list(owner.model_fields) if owner else []
        return Problem(path=path, message="unknown field", file=file,
                       allowed=", ".join(names) if names else None,
                       suggestions=did_you_mean(str(loc[-1]), names))
    if typ == "missing":
        return Problem(path=path, message="required field is missing", file=file)
    found, given = _value_at(doc, loc) if loc else (False, None)  # whole-profile rules: no "given"
    if found and isinstance(given, (dict, list)) and typ in ("value_error", "assertion_error"):
        found = False  # a section-level rule: the message says what is wrong, the dump would not
    msg = err["msg"].removeprefix("Value error, ")
    suggestions: list[str] = []
    allowed = _allowed_for(err)
    if path == "model" and "unknown preset" in msg:
        given = (doc.get("model") or {}).get("preset")
        found = True
        path = "model.preset"
        msg = "unknown model preset"
        allowed = ", ".join(sorted({p.name for p in presets().values()}))
        suggestions = did_you_mean(str(given), presets())
    elif typ == "literal_error" and found and isinstance(given, (str, bool)):
        options = [o.strip(" '") for o in str((err.get("ctx") or {}).get("expected", "")).replace(" or ", ",").split(",")]
        suggestions = did_you_mean(str(given), [o for o in options if o])
        if isinstance(given, bool):
            msg += " (YAML read yes/no/on/off as a boolean: quote the word)"
    return Problem(path=path, message=msg, file=file, given=given, has_given=found,
                   allowed=allowed, suggestions=suggestions)


def profile_json_schema() -> dict[str, Any]:
    """JSON Schema of the profile, for editors (`trainstack schema`)."""
    schema = TrainingProfile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "trainstack training profile"
    schema.setdefault("$defs", {})
    schema["properties"]["model"]["description"] = (
        "Exactly one of preset, architecture or params_b. Presets: "
        + ", ".join(sorted(presets())))
    return schema
