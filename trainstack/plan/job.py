"""What runs on the nodes: the job, its secrets by reference, and the parallel layout it runs with."""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import Field, model_serializer

from .base import _Frozen



class JobSecretPlan(_Frozen):
    """A job secret by reference: read by the node at job start, never held by trainstack."""

    kms_secret: str
    kms_key_id: Optional[str] = None


class AlertsPlan(_Frozen):
    """Where the node agent posts the job's events (profile ``alerts``): the webhook by its KMS secret's
    name only (its value, the URL, is read on the node), the body format, the events, the way out."""

    kms_secret: str
    kms_key_id: Optional[str] = None
    format: Literal["dingtalk", "slack", "json"]
    events: tuple[str, ...]
    relay: Optional[str] = Field(None, description="IPv4:port of an HTTP(S) forward proxy inside the VPC")
    via: Literal["nat", "relay"] = Field(description="How a post leaves the VPC: the NAT gateway or the relay")


class ParallelLayout(_Frozen):
    """How the job's GPUs split it: tensor x pipeline x context x data parallel (expert parallelism
    splits the routed experts over that many of the data x context ranks). World size = the product of
    tensor, pipeline, context and data parallel."""

    tensor_parallel: int = Field(1, ge=1)
    pipeline_parallel: int = Field(1, ge=1)
    context_parallel: int = Field(1, ge=1)
    data_parallel: int = Field(1, ge=1)
    expert_parallel: int = Field(1, ge=1)
    virtual_pipeline_stages: int = Field(1, ge=1, description="Model chunks per pipeline rank (interleaved 1F1B)")

    @property
    def world_size(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.context_parallel * self.data_parallel

    @property
    def trivial(self) -> bool:
        return self.tensor_parallel == self.pipeline_parallel == self.context_parallel == 1

    @property
    def label(self) -> str:
        parts = [f"TP {self.tensor_parallel}"] if self.tensor_parallel > 1 else []
        if self.pipeline_parallel > 1:
            parts.append(f"PP {self.pipeline_parallel}"
                         + (f" (x{self.virtual_pipeline_stages} virtual)" if self.virtual_pipeline_stages > 1 else ""))
        if self.context_parallel > 1:
            parts.append(f"CP {self.context_parallel}")
        if self.expert_parallel > 1:
            parts.append(f"EP {self.expert_parallel}")
        return " x ".join(parts + [f"DP {self.data_parallel}"])


class LayoutOption(_Frozen):
    """One layout the resolver sized for the chosen instance type and node count."""

    layout: ParallelLayout
    required_gib_per_gpu: float
    tokens_per_second: Optional[float] = None
    fits: bool
    chosen: bool = False
    fit: Optional[Literal["fits", "at_risk", "does_not_fit"]] = Field(
        None, description="With the memory interval (issue 32): layouts that fits are preferred to at_risk ones")


class ParallelismPlan(_Frozen):
    """The chosen layout and how it was chosen (the layouts considered, the pipeline's micro-batches)."""

    layout: ParallelLayout = Field(default_factory=ParallelLayout)
    chosen_by: Literal["profile", "resolver"] = "profile"
    considered: tuple[LayoutOption, ...] = ()
    micro_batches: int = Field(1, ge=1, description="Micro-batches per optimizer step on each data-parallel rank")
    micro_batches_in_flight: float = Field(1.0, description="Micro-batches whose activations the fullest stage holds")
    bubble_fraction: float = Field(0.0, ge=0, le=1, description="Share of the step pipeline stages sit idle")
    layers_per_chunk: int = Field(0, ge=0, description="Decoder layers per pipeline model chunk (0: no pipeline)")


class JobPlan(_Frozen):
    command: str
    code_uri: Optional[str] = None
    env: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, JobSecretPlan] = Field(default_factory=dict, description="env name -> KMS secret")
    max_runtime_hours: Optional[float] = None
    #: the budget guard on the nodes (docs/status.md): resources.max_total_cost and deadline_hours
    max_total_cost_cny: Optional[float] = None
    deadline_hours: Optional[float] = None
    nproc_per_node: int = 1
    method: str
    precision: str
    zero_stage: int = 0
    gradient_checkpointing: Union[bool, Literal["selective"]] = False
    micro_batch_size: int = 1
    sequence_length: int = 2048
    gradient_accumulation_steps: int = Field(1, ge=1, description="Micro-batches per optimizer step (per rank)")
    parallel: ParallelLayout = Field(default_factory=ParallelLayout,
                                     description="The degrees the launcher passes (tensor, pipeline, context, ...)")
    global_batch_size: Optional[int] = Field(None, ge=1, description="training.global_batch_size, when stated "
                                             "(launchers/intent.py keeps it at the plan's node count)")
    alerts: Optional[AlertsPlan] = Field(None, description="Profile alerts: the node agent's webhook posts")

    @model_serializer(mode="wrap")
    def _omit_unstated(self, handler):  # absent unless stated: other plans stay byte-identical
        out = handler(self)
        for key in ("global_batch_size", "alerts"):
            if isinstance(out, dict) and out.get(key, 0) is None:
                del out[key]
        return out
