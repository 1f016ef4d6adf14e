"""The Plan itself, the candidates considered for it and whose price it rests on."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, model_validator

from ..reasons import Reason, ReasonCode
from .base import _Frozen
from .job import JobPlan, ParallelismPlan, ParallelLayout
from .parts import DlcPlan, EstimateSummary, ImagePlan, NetworkPlan, SpotPoolPlan, StoragePlan
from .schema import PLAN_SCHEMA_VERSION



class PriceProvenance(_Frozen):
    """Whose price a plan rests on, how old it is, and whether the type and zone were seen offered.

    The ``prices`` block of ``resolve``/``plan``/``diff`` JSON (``prices.as_of``, ``prices.age_days``,
    ``prices.source``); ``headline`` is the line every text output prints first.
    """

    source: Literal["snapshot", "borrowed-region", "price-book", "refresh", "none"]
    as_of: Optional[str] = Field(None, description="ISO date of the price")
    age_days: Optional[int] = Field(None, description="Days from as_of to the day the plan was made")
    stale: bool = Field(False, description="Older than the catalog's price_max_age_days")
    max_age_days: int = 90
    priced: str = Field(description="What is priced: ECS type, DLC spec or resource quota id")
    on_demand_cny_per_hour: Optional[float] = Field(
        None, description="The on-demand price per ``per`` (node, pod or GPU) the plan rests on; None: unknown")
    service: Literal["ecs", "dlc", "dlc-quota"] = "ecs"
    per: Literal["node", "pod", "GPU"] = "node"
    whose: str = Field(description="Whose figure it is, in words")
    borrowed_from: Optional[str] = None
    type_seen_in_region: Optional[bool] = Field(None, description="Type seen offered in the region (ECS only)")
    zone: Optional[str] = None
    zone_seen: Optional[bool] = Field(None, description="Zone seen offered for the type; None: chosen at deploy")
    spot_estimated: Optional[bool] = Field(
        None, description="The spot price shown is an estimate (False: price book or refresh); None: no spot price")
    headline: str


class PlannedPrice(_Frozen):
    """The on-demand price per machine-hour (node, or DLC pod) a plan rests on, and whose it is: what
    policies read from the node (trainstack.tags.planned_price)."""

    cny_per_hour: float = Field(ge=0)
    source: str


class PolicyException(_Frozen):
    """A policy config's exception a plan rests on: which policy let which instance type through, by
    which setting, granted in which file (plan JSON ``policy_exceptions[]``)."""

    policy: str
    instance_type: str
    setting: Literal["allowed_types", "enforcementLevel"] = Field(
        description="allowed_types: the type is listed; enforcementLevel: the policy is disabled")
    source: str = Field(description="The policy config file that grants it")


class Candidate(_Frozen):
    """One considered way to run the job (chosen, alternative or rejected)."""

    target: Literal["ecs", "dlc"] = "ecs"
    instance_type: Optional[str]
    gpu_model: Optional[str] = None
    nodes: int
    gpus_per_node: int
    spot: bool = False
    zone: Optional[str] = None
    hourly_cost_cny: Optional[float] = None
    estimated_hours: Optional[float] = None
    total_cost_cny: Optional[float] = None
    objective: Optional[float] = Field(None, description="Value minimised (CNY or hours)")
    memory_margin_gib: Optional[float] = None
    tokens_per_second: Optional[float] = None
    layout: Optional[ParallelLayout] = Field(None, description="The parallel layout sized for this candidate")
    fit: Optional[Literal["fits", "at_risk", "does_not_fit"]] = Field(
        None, description="The memory verdict with the estimate's interval (ranked: fits before at_risk)")
    feasible: bool = True
    reason: Optional[str] = Field(None, description="Why it was rejected, in the user's words")
    reason_code: Optional[ReasonCode] = Field(None, description="Which rule rejected it (for programs)")
    labels: tuple[str, ...] = ()

    def rejected_by(self, why: Optional[Reason]) -> "Candidate":
        """This candidate with its verdict: feasible when ``why`` is None."""
        return self.model_copy(update={"feasible": why is None, "reason": why.message if why else None,
                                       "reason_code": why.code if why else None})


class Rejection(_Frozen):
    """Why a family (or type) could not host the job; one line per family in the output."""

    family: str
    instance_types: tuple[str, ...] = ()
    reason: str
    reason_codes: tuple[ReasonCode, ...] = Field((), description="The rules behind ``reason``, most common first")


class FallbackCandidate(_Frozen):
    """One place `trainstack up` may deploy, in fallback order: the plan's own type and zone first."""

    instance_type: str
    zone: Optional[str] = Field(None, description="None: chosen at deploy time from stock")
    nodes: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1)
    gpu_model: Optional[str] = None
    spot: bool = False
    hourly_cost_cny: Optional[float] = None
    total_cost_cny: Optional[float] = None
    planned: bool = Field(False, description="The plan's own type and zone")


class ReservationPlan(_Frozen):
    """An immediate capacity reservation (profile ``resources.capacity: reserve``), on-demand nodes only."""

    instance_type: str
    instances: int = Field(ge=1)
    hourly_cny: Optional[float] = Field(
        None, description="Billed per hour while it exists, also with no node running: the pay-as-you-go rate of "
                          "instances x type (a node it holds is billed as the node, not twice)")
    price_source: str = ""


class CapacityPlan(_Frozen):
    """Where an ECS plan may land (``candidates``, in the order `trainstack up` tries them) and what it holds."""

    zone_pinned: bool = Field(False, description="The profile or trainstack:zone states the zone: never picked by stock")
    candidates: tuple[FallbackCandidate, ...] = ()
    reservation: Optional[ReservationPlan] = None


class Plan(_Frozen):
    schema_version: int = PLAN_SCHEMA_VERSION
    name: str
    region: str
    zone: Optional[str] = Field(None, description="None: chosen at deploy time from stock")
    target: Literal["ecs", "dlc"]
    instance_type: Optional[str]
    gpu_model: Optional[str] = None
    nodes: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1)
    total_gpus: int = Field(ge=1)
    spot: bool = False
    spot_price_limit: Optional[float] = None
    spot_price_limit_source: Optional[Literal["on-demand price", "profile"]] = Field(
        None, description="on-demand price: picked by trainstack (kept after creation); profile: stated, managed")
    spot_strategy: Literal["NoSpot", "SpotWithPriceLimit"] = "NoSpot"
    spot_interruption_behavior: Literal["Terminate", "Stop"] = "Terminate"
    spot_duration_hours: int = Field(1, ge=0, le=6)
    hourly_cost_cny: Optional[float] = None
    estimated_hours: Optional[float] = None
    total_cost_cny: Optional[float] = None
    objective: Literal["cost", "time"] = "cost"
    estimate: EstimateSummary
    storage: StoragePlan
    network: NetworkPlan
    image: ImagePlan
    job: JobPlan
    parallelism: ParallelismPlan = Field(default_factory=ParallelismPlan)
    dlc: Optional[DlcPlan] = None
    spot_pool: Optional[SpotPoolPlan] = Field(
        None, description="Self-healing spot pool (ESS) instead of plain instances (all of a 1-node plan; "
                          "nodes 1.. of a multi-node plan, whose node 0 is an on-demand anchor)")
    self_healing: bool = Field(False, description="The profile asks for self-healing (resources.self_healing)")
    tags: dict[str, str] = Field(default_factory=dict)
    labels: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    alternatives: tuple[Candidate, ...] = ()
    rejected: tuple[Rejection, ...] = ()
    catalog_date: Optional[str] = None
    prices: Optional[PriceProvenance] = Field(None, description="Whose price, how old, seen offered or not")
    capacity: Optional[CapacityPlan] = Field(None, description="ECS plans: fallback order and capacity reservation")
    policy_exceptions: tuple[PolicyException, ...] = Field(
        (), description="Exceptions of the policy config the chosen type needs (none: the engine's own rules)")

    @model_validator(mode="after")
    def _spot_pool_fits(self) -> "Plan":
        pool = self.spot_pool
        if pool is not None and not (self.target == "ecs" and self.spot):
            raise ValueError("spot_pool (self-healing) needs an ECS spot plan")
        if pool is not None and pool.max_size != (self.nodes - 1 if pool.anchor else self.nodes):
            raise ValueError(f"spot_pool holds {pool.max_size} node(s) of a {self.nodes}-node plan")
        return self

    @property
    def elastic(self) -> bool:
        """A multi-node self-healing plan: torchrun elastic, ranks from the rendezvous on node 0."""
        return self.spot_pool is not None and self.spot_pool.anchor

    def instance_ranks(self) -> list[int]:
        """The nodes that are plain ``ecs.Instance``s (the rest are the pool's)."""
        if self.spot_pool is None:
            return list(range(self.nodes))
        return [0] if self.spot_pool.anchor else []

    def node_spot_strategy(self, rank: int) -> str:
        """A plain node's spot strategy: the plan's, except an anchor node, which is on-demand."""
        return "NoSpot" if (self.elastic and rank == 0) else self.spot_strategy

    @property
    def is_multi_node(self) -> bool:
        return self.nodes > 1

    def node_private_ips(self) -> list[str]:
        return self.network.node_private_ips(self.nodes)

    def node_names(self) -> list[str]:
        return [f"{self.name}-node-{i}" for i in range(self.nodes)]

    def pool_node_name(self) -> str:
        """The name every pool node of a multi-node self-healing plan shares (ESS launches them all from
        one scaling configuration; each reports its heartbeat under its instance id)."""
        return f"{self.name}-pool"

    def summary(self) -> dict[str, object]:
        """The few numbers a reviewer reads first (exports, PR comments)."""
        return {
            "target": self.target, "instance_type": self.instance_type, "gpu_model": self.gpu_model,
            "nodes": self.nodes, "gpus_per_node": self.gpus_per_node, "zone": self.zone,
            "spot": self.spot, "spot_price_limit": self.spot_price_limit,
            "memory_margin_gib": self.estimate.memory_margin_gib,
            "tokens_per_second": self.estimate.tokens_per_second,
            "estimated_hours": self.estimated_hours, "hourly_cost_cny": self.hourly_cost_cny,
            "total_cost_cny": self.total_cost_cny,
        }
