"""The training profile's fields: frozen, strictly-typed models (names are a contract, docs/DESIGN.md).

Field-level and cross-field rules that need nothing but the profile live here; rules that need the
catalog or the resolved plan live in ``trainstack.rules``.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from ..models import Architecture
from .alerts import AlertsSpec
from .base import CONTROL, KMS_KEY_ID, KMS_SECRET_NAME, _no_control, _Strict  # noqa: F401 (as before)
from .training import (  # noqa: F401 - the profile's sections, importable from here as before
    Checkpointing, Framework, LoraSpec, Loss, Method, ModelSpec, Precision, TrainingSpec, _base_dir, read_hf_config,
)

DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?\Z")  # \Z: "$" would accept a trailing newline
SCHEMA_URL_COMMENT = "# yaml-language-server: $schema=../../profile.schema.json"
#: a zone id is its region's id and one letter: cn-shenzhen-a, ap-southeast-1a (catalog zone lists)
ZONE_SUFFIX = re.compile(r"-?[a-z]")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _no_nul(value: str, what: str) -> None:
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL character, which no shell argument or variable can hold")


class JobSecret(_Strict):
    """Where the node reads one secret at job start (with its RAM role); the value never
    passes through trainstack. KMS Secrets Manager is the store; others may be added as keys."""

    kms_secret: str = Field(description="Name of a KMS Secrets Manager secret in the job's region")
    kms_key_id: Optional[str] = Field(
        None, description="The KMS key that encrypts the secret, if it is your own key: the node role then "
                          "also gets kms:Decrypt on it (GetSecretValue requires that)")

    @field_validator("kms_secret")
    @classmethod
    def _secret_name(cls, v: str) -> str:
        if not KMS_SECRET_NAME.fullmatch(v):
            raise ValueError("a KMS secret name is 1-192 letters, digits and _ / + = . @ -")
        return v

    @field_validator("kms_key_id")
    @classmethod
    def _key_id(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not KMS_KEY_ID.fullmatch(v):
            raise ValueError("a KMS key id looks like key-xxxxxxxx (an alias cannot name a RAM policy resource)")
        return v


class JobSpec(_Strict):
    command: str = Field("python train.py", min_length=1, max_length=4096)
    image: Optional[str] = Field(None, max_length=512)
    code_uri: Optional[str] = Field(None, max_length=1024)
    env: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, JobSecret] = Field(
        default_factory=dict, description="Environment name the trainer sees -> where the node reads the value "
                                          "at job start ({kms_secret: NAME}); ECS nodes only")
    max_runtime_hours: Optional[float] = Field(None, gt=0, le=24 * 90, description="Hard stop; nodes stop billing")

    @field_validator("image", "code_uri")
    @classmethod
    def _uri_text(cls, v: Optional[str]) -> Optional[str]:
        _no_control(v, "URI")
        if v is not None and (not v.strip() or any(c.isspace() for c in v)):
            raise ValueError("must be one URI or image reference without spaces")
        if v is not None and v.startswith("oss://"):
            from ..ossuri import OssUriError, parse_oss_uri

            try:
                parse_oss_uri(v)
            except OssUriError as exc:
                raise ValueError(f"oss:// URI {exc}") from None
        return v

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for k, value in v.items():
            if not ENV_NAME.fullmatch(k):
                raise ValueError(f"environment variable name {k!r} is not a valid shell name")
            _no_nul(value, f"job.env {k}")
        return v

    @field_validator("command", "code_uri")
    @classmethod
    def _shell_text(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        if v is not None:
            _no_nul(v, f"job.{info.field_name}")
        return v

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, v: dict[str, JobSecret]) -> dict[str, JobSecret]:
        for k in v:
            if not ENV_NAME.fullmatch(k):
                raise ValueError(f"secret environment name {k!r} is not a valid shell name")
        return v

    @model_validator(mode="after")
    def _secret_or_env(self) -> "JobSpec":
        if both := sorted(set(self.env) & set(self.secrets)):
            raise ValueError(f"{', '.join(both)} set in both job.env and job.secrets; keep one")
        return self


class ResourcesSpec(_Strict):
    target: Literal["auto", "ecs", "dlc"] = "auto"
    gpus: Union[Literal["auto"], int] = "auto"
    gpu_models: tuple[str, ...] = ()
    instance_types: tuple[str, ...] = Field((), description="Optional allow-list of ECS types")
    max_nodes: int = Field(8, ge=1, le=512)
    spot: Literal["never", "allow", "require"] = "allow"
    objective: Literal["cost", "time"] = "cost"
    deadline_hours: Optional[float] = Field(None, gt=0, le=24 * 365)
    max_hourly_cost: Optional[float] = Field(None, gt=0, le=1e6, description="CNY per hour")
    max_total_cost: Optional[float] = Field(None, gt=0, le=1e10, description="CNY")
    memory_margin_percent: float = Field(
        3.0, ge=0, le=50, description="GPU memory (share of usable) a plan must leave free after the estimate's "
                                      "required memory; below it a GPU does not fit")
    self_healing: bool = Field(
        False, description="Spot only: an ESS scaling group replaces a reclaimed spot node (checkpoints on oss or "
                           "cpfs). Several nodes: node 0 runs on-demand and hosts torchrun's elastic rendezvous, the "
                           "others are spot in the group; needs spot: allow, checkpoints on cpfs and a torchrun launch "
                           "(docs/self-healing.md)")
    spot_price_limit: Optional[float] = Field(
        None, gt=0, le=100_000, description="Spot only: the most to pay per node, CNY/h (default: the on-demand "
                                            "price, kept after creation; a stated limit is managed and changing it "
                                            "replaces the spot nodes)")
    capacity: Literal["never", "reserve"] = Field(
        "never", description="reserve: an immediate capacity reservation for the plan's type, zone and nodes, made "
                             "before the nodes; it bills the pay-as-you-go rate while it exists and covers on-demand "
                             "nodes only (docs/capacity.md)")

    @field_validator("capacity")
    @classmethod
    def _reserve_on_demand_ecs(cls, v: str, info: ValidationInfo) -> str:
        spot, target = info.data.get("spot"), info.data.get("target")
        if v == "reserve" and spot != "never":  # Alibaba: capacity reservations cover pay-as-you-go, never spot
            raise ValueError(f"reserve covers on-demand (pay-as-you-go) nodes only, never spot, and resources.spot is "
                             f"{spot}; allowed: never, or reserve with resources.spot: never")
        if v == "reserve" and target == "dlc":
            raise ValueError("reserve holds ECS capacity and resources.target is dlc (PAI schedules on its own pools); "
                             "allowed: never, or reserve with resources.target: ecs or auto")
        return v

    @field_validator("self_healing")
    @classmethod
    def _self_healing_needs_spot(cls, v: bool, info: ValidationInfo) -> bool:
        spot = info.data.get("spot")
        if v and spot == "never":
            raise ValueError("self_healing replaces reclaimed spot nodes; it needs resources.spot: allow or "
                             "require (spot is never)")
        return v

    @field_validator("spot_price_limit")
    @classmethod
    def _limit_needs_spot(cls, v: Optional[float], info: ValidationInfo) -> Optional[float]:
        if v is not None and info.data.get("spot") == "never":
            raise ValueError("spot_price_limit applies to spot nodes; resources.spot is never")
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
    image_tag: Optional[str] = Field(None, max_length=128, description="Tag of the PAI pytorch-training image; "
                                                                      "unset: the newest official image at deploy time")
    enable_rdma: Optional[bool] = None
    public_limits_raised: bool = Field(
        False, description="Your account manager raised PAI-DLC's public-resource limits (2 GPUs, 8 vCPU)")
    quota_spec: Optional[str] = Field(
        None, min_length=1, max_length=128,
        description="Node spec of the resource quota: an ECS type (general computing) or a Lingjun spec "
                    "(ml.gu7xf.c96m1600.8-gu108); sizes pods and sets the GPU. Needs dlc.resource_id")
    cpu_per_pod: Optional[int] = Field(
        None, ge=1, le=4096, description="vCPUs per pod of a quota job; default: the GPU share of the quota's node")
    memory_gib_per_pod: Optional[float] = Field(
        None, gt=0, le=65536, description="Memory (GiB) per pod of a quota job; default: the GPU share of the "
                                          "quota's node")

    @model_validator(mode="after")
    def _quota_fields(self) -> "DlcSpec":
        given = [k for k in ("quota_spec", "cpu_per_pod", "memory_gib_per_pod") if getattr(self, k) is not None]
        if given and not self.resource_id:
            raise ValueError(f"{', '.join('dlc.' + k for k in given)} apply to a resource quota job: set "
                             "dlc.resource_id (public-resource pods get the ECS spec's own CPU and memory)")
        return self


class StorageSpec(_Strict):
    dataset_gib: float = Field(0, ge=0, le=10_000_000)
    dataset_uri: Optional[str] = Field(None, max_length=1024)
    checkpoint: Literal["cpfs", "oss", "essd"] = "oss"
    checkpoint_gib: Optional[float] = Field(None, gt=0, le=1_000_000)
    retain_on_destroy: bool = True

    @field_validator("dataset_uri")
    @classmethod
    def _uri(cls, v: Optional[str]) -> Optional[str]:
        if v and not re.fullmatch(r"(oss|cpfs|nas)://[^\s\x00-\x1f\x7f]+", v):
            raise ValueError("dataset_uri must start with oss://, cpfs:// or nas:// (one URI, no spaces or "
                             "control characters)")
        if v and v.startswith("oss://"):
            from ..ossuri import OssUriError, parse_oss_uri

            try:
                parse_oss_uri(v)
            except OssUriError as exc:
                raise ValueError(f"oss:// URI {exc}") from None
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
        # /28 at most: nodes take fixed addresses from host .10 on and Alibaba reserves 4 per vSwitch
        if not 8 <= net.prefixlen <= 28:
            raise ValueError("prefix length must be between /8 and /28 (nodes take fixed addresses from host .10 "
                             "on; a /29 has no room for one)")
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

    @field_validator("key_pair")
    @classmethod
    def _key_pair_name(cls, v: Optional[str]) -> Optional[str]:
        # ECS KeyPairName: 2-128 characters, a letter first, then letters, digits, '.', '_', '-', ':'
        if v is not None and not re.fullmatch(r"[A-Za-z\u0080-\uffff][\w.:-]{1,127}", v):
            raise ValueError("must be an ECS key pair name: 2-128 characters, a letter first, then letters, "
                             "digits, '.', '_', '-' or ':'")
        return v

    @field_validator("ssh_cidrs")
    @classmethod
    def _cidrs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        from ..cidrs import ssh_source_problem

        for c in v:
            problem = ssh_source_problem(c)
            if problem:
                raise ValueError(problem)
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
    alerts: Optional[AlertsSpec] = Field(
        None, description="Post job start, preemption, replacement, job end and guard stops to a webhook from KMS "
                          "(ECS; needs network.internet_egress or alerts.relay: docs/alerts.md)")
    image_id: Optional[str] = Field(None, max_length=128)
    tags: dict[str, str] = Field(default_factory=dict)
    price_book: Optional[str] = Field(
        None, min_length=1, max_length=4096,
        description="The team's prices (YAML, README \"Prices\"), relative to the profile file; used over the "
                    "public snapshot and labelled as the team's price")
    _base_dir: Optional[Path] = PrivateAttr(None)

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        # the name becomes resource names, DNS labels, ECS host names (no '--': RunInstances HostName)
        # and a value in cloud-init YAML: one DNS label, matched whole (a trailing newline is not)
        if not DNS_LABEL.fullmatch(v) or "--" in v:
            raise ValueError("must be DNS-safe: lowercase letters, digits and single '-', starting with a letter, "
                             "ending with a letter or digit, at most 63")
        return v

    @field_validator("region")
    @classmethod
    def _region_shape(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z]{2}-[a-z0-9]+(-[a-z0-9]+)*", v):
            raise ValueError("must look like cn-shenzhen")
        return v

    @field_validator("zone")
    @classmethod
    def _zone_shape(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not re.fullmatch(r"[a-z]{2}-[a-z0-9]+(-[a-z0-9]+)*", v):
            raise ValueError("must be a zone id such as cn-shenzhen-a")
        return v

    @field_validator("image_id")
    @classmethod
    def _image_id(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}", v):
            raise ValueError("must be an ECS image id such as m-wz9..., or an image name without spaces")
        return v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: dict[str, str]) -> dict[str, str]:
        # ECS/OSS tag rules: key 1-128 and value 0-128 characters, neither containing http:// or
        # https://, keys not starting with aliyun or acs: (Alibaba "Tag" docs); trainstack: is ours
        for k, val in v.items():
            if k.startswith(("trainstack:", "aliyun", "acs:")):
                raise ValueError(f"tag {k!r} uses a reserved prefix (trainstack:, aliyun, acs:)")
            if not 1 <= len(k) <= 128 or len(val) > 128:
                raise ValueError("tag keys are 1-128 characters and values at most 128")
            if CONTROL.search(k) or CONTROL.search(val):
                raise ValueError("tags must not hold control characters (a newline?)")
            if any(s in (k + " " + val).lower() for s in ("http://", "https://")):
                raise ValueError("tags must not contain http:// or https://")
        return v

    @model_validator(mode="after")
    def _remember_folder(self, info: ValidationInfo) -> "TrainingProfile":
        self._base_dir = _base_dir(info)
        return self

    @property
    def base_dir(self) -> Optional[Path]:
        """The profile file's folder: where its relative paths (hf_config, price_book) start."""
        return self._base_dir

    def price_book_file(self) -> Optional[Path]:
        """``price_book`` as a path (relative to the profile's folder, else the working directory)."""
        if self.price_book is None:
            return None
        p = Path(self.price_book).expanduser()
        return p if p.is_absolute() or self._base_dir is None else self._base_dir / p

    @model_validator(mode="after")
    def _cross_field(self) -> "TrainingProfile":
        t, r = self.training, self.resources
        if r.gpus == 1 and t.zero_stage > 0:
            raise ValueError(f"zero_stage {t.zero_stage} shards over data-parallel GPUs; with gpus: 1 use zero_stage: 0")
        if self.zone and not (self.zone.startswith(self.region)
                              and ZONE_SUFFIX.fullmatch(self.zone[len(self.region):])):
            raise ValueError(f"zone {self.zone} is not in region {self.region} (a zone id is the region id "
                             f"and a letter, e.g. {self.region}-a)")
        lora = t.adapters
        if lora is not None:
            try:
                hidden = self.architecture.hidden_size
            except (KeyError, ValueError):  # an unknown preset is reported by ModelSpec
                hidden = None
            if hidden is not None and lora.rank > hidden:
                raise ValueError(f"training.lora.rank {lora.rank} is above the model's hidden size {hidden}: "
                                 "an adapter that wide has more parameters than the layer it adapts")
        if r.capacity == "reserve" and r.target == "auto" and (self.dlc.workspace_id or self.dlc.resource_id):
            raise ValueError("resources.capacity: reserve holds ECS capacity, but a named dlc workspace or quota plans a "
                             "PAI-DLC job (target: auto): set resources.target: ecs, or capacity: never")
        if r.self_healing and r.target == "dlc":
            raise ValueError("resources.self_healing applies to ECS nodes; PAI-DLC (target: dlc) restarts jobs itself")
        if r.self_healing and self.storage.checkpoint == "essd":
            raise ValueError("resources.self_healing needs storage.checkpoint: oss or cpfs; a replacement node "
                             "cannot reach checkpoints on the reclaimed node's ESSD")
        arch = self.architecture
        _check_layout(arch, t, r.gpus if isinstance(r.gpus, int) else None)
        dp = t.data_parallel(r.gpus) if isinstance(r.gpus, int) else None
        on = "" if t.model_parallel == 1 else f" data-parallel ranks (of {r.gpus} GPUs)"
        if t.gradient_accumulation_steps is not None and t.global_batch_size is not None:
            if dp is None:
                raise ValueError("give gradient_accumulation_steps or global_batch_size, not both: with gpus: auto "
                                 "the other follows from the GPU count the resolver picks")
            if t.global_batch(dp) != t.global_batch_size:
                raise ValueError(f"global_batch_size {t.global_batch_size} != micro_batch_size {t.micro_batch_size} "
                                 f"x gradient_accumulation_steps {t.gradient_accumulation_steps} x "
                                 f"{'gpus' if not on else 'data-parallel ranks'} {dp}; give one of the two")
        if t.global_batch_size is not None and dp is not None and \
                t.global_batch_size % (t.micro_batch_size * dp):
            raise ValueError(f"global_batch_size {t.global_batch_size} is not a whole number of micro-batches "
                             f"({t.micro_batch_size}) on {dp}{on or ' GPUs'}")
        if t.expert_parallel > 1:
            if not arch.is_moe:
                raise ValueError("training.expert_parallel > 1 needs a Mixture-of-Experts model")
            if arch.num_experts % t.expert_parallel:
                raise ValueError(f"expert_parallel {t.expert_parallel} must divide the model's {arch.num_experts} experts")
            if isinstance(r.gpus, int) and r.gpus % t.expert_parallel:
                raise ValueError(f"expert_parallel {t.expert_parallel} must divide resources.gpus ({r.gpus})")
            if dp is not None and (dp * (t.context_parallel or 1)) % t.expert_parallel:
                raise ValueError(f"expert_parallel {t.expert_parallel} must divide the {dp * (t.context_parallel or 1)} "
                                 "ranks that hold the same weights (data x context parallel)")
        if t.images_per_sample and arch.vision is None:
            raise ValueError("training.images_per_sample needs a vision-language model (one with a vision tower)")
        if r.target == "dlc" and r.instance_types and self.dlc.resource_id:
            raise ValueError("resources.instance_types does not apply to a DLC quota job (dlc.resource_id)")
        return self

    @property
    def architecture(self) -> Architecture:
        return self.model.resolved_architecture()


def _check_layout(arch: Architecture, t: TrainingSpec, gpus: Optional[int]) -> None:
    """The parallel degrees the profile gives: ones its framework can run, dividing the heads, the layers,
    the sequence and the world size (trainstack.sizing.parallel.layout_problems). One error per field,
    located at ``training.<field>`` with the value given."""
    from ..parallel_degrees import Layout, layout_problems, unsupported_degrees

    errors: list[tuple[str, str]] = [(f, why) for f, why in unsupported_degrees(t)]
    if t.virtual_pipeline_stages > 1 and (t.pipeline_parallel or 1) == 1:
        errors.append(("virtual_pipeline_stages", "virtual_pipeline_stages > 1 (interleaved 1F1B) needs "
                                                  "pipeline_parallel > 1"))
    lay = Layout(tp=t.tensor_parallel or 1, pp=t.pipeline_parallel or 1, cp=t.context_parallel or 1,
                 vp=t.virtual_pipeline_stages)
    errors += layout_problems(arch, lay, t.sequence_length, gpus, even_stages=t.framework != "torchtitan")
    seen: dict[str, str] = {}
    for f, why in errors:
        seen.setdefault(f, why)
    if seen:
        raise ValidationError.from_exception_data("TrainingProfile", [
            InitErrorDetails(type=PydanticCustomError("value_error", "{why}", {"why": why}),
                             loc=("training", f), input=getattr(t, f)) for f, why in seen.items()])
