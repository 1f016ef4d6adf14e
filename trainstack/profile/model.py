"""The whole training profile (field names are a contract, docs/DESIGN.md) and its cross-field rules.

Each section is a frozen, strictly-typed model of its own module (``training``, ``job``,
``resources``, ``infrastructure``); rules that need two sections or the model's shape live here;
rules that need the catalog or the resolved plan live in ``trainstack.rules``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Optional

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from ..models import Architecture
from ..parallel_degrees import Layout, layout_problems, unsupported_degrees
from .alerts import AlertsSpec
from .base import CONTROL, _Strict
from .infrastructure import AccessSpec, NetworkSpec, StorageSpec
from .job import JobSecret, JobSpec  # noqa: F401 - importable from here as before
from .resources import DlcSpec, ResourcesSpec
from .training import (  # noqa: F401 - the profile's sections, importable from here as before
    Checkpointing, Framework, LoraSpec, Loss, Method, ModelSpec, Precision, TrainingSpec, _base_dir, read_hf_config,
)

DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?\Z")  # \Z: "$" would accept a trailing newline
SCHEMA_URL_COMMENT = "# yaml-language-server: $schema=../../profile.schema.json"
#: a zone id is its region's id and one letter: cn-shenzhen-a, ap-southeast-1a (catalog zone lists)
ZONE_SUFFIX = re.compile(r"-?[a-z]")
#: what a prepared image may hold (``image_provides``): each removes one setup step of every boot
ImagePart = Literal["gpu-driver", "erdma", "pytorch"]


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
    image_provides: tuple[ImagePart, ...] = Field(
        (), strict=False,
        description="What the pinned image (image_id) already holds, so no node installs it at boot: gpu-driver "
                    "(NVIDIA driver and CUDA), erdma (the eRDMA software stack), pytorch (torchrun on PATH). A "
                    "self-healing replacement then trains minutes sooner (docs/self-healing.md)")
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
        if self.image_provides and not self.image_id:
            raise ValueError("image_provides describes a prepared image: set image_id to that image (a public image "
                             "looked up by family holds no driver or PyTorch)")
        if len(set(self.image_provides)) != len(self.image_provides):
            raise ValueError("image_provides lists a part twice")
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
        if self.storage.dataset_sync == "at-boot" and (r.target == "dlc" or r.target == "auto" and (
                self.dlc.workspace_id or self.dlc.resource_id)):
            raise ValueError("storage.dataset_sync: at-boot copies the dataset to ECS nodes' data disks; a PAI-DLC "
                             "job mounts storage.dataset_uri itself: use dataset_sync: stream, or resources.target: ecs")
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
