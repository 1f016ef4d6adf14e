"""The Plan: everything trainstack decided, as pure, frozen, JSON-serialisable data.

The resolver builds it; the Pulumi components, the DLC job, the bootstrap renderer, the
policies and the offline preview only read it. ``Plan.model_dump(mode="json")`` is the
``resolve --json`` contract of docs/DESIGN.md (top-level ``target``, ``instance_type``, ``nodes``,
``gpus_per_node``, ``spot``, ``spot_price_limit``, ``zone``, ``hourly_cost_cny``,
``estimated_hours``, ``total_cost_cny``, ``labels``, ``alternatives``, ``rejected``).

Modules: ``model`` (Plan, candidates, price provenance), ``parts`` (estimate, storage, network,
image, spot pool, DLC job), ``cost`` (the cost breakdown), ``job`` (the job and its parallel layout), ``base`` (shared limits and
price rounding), ``schema`` (the one schema version and how older saved plans are read).
"""

from .cost import CostBreakdown, CostItem
from .base import DEPLOYMENT_SET_MAX, ESSD_MAX_GIB, ESSD_MIN_GIB, ess_price_limit, spot_price_limit
from .job import AlertsPlan, JobPlan, JobSecretPlan, LayoutOption, ParallelismPlan, ParallelLayout
from .model import (
    CapacityPlan, Candidate, FallbackCandidate, Plan, PlannedPrice, PolicyException, PriceProvenance, Rejection,
    ReservationPlan,
)
from .parts import (
    CpfsPlan, DataDiskPlan, DlcPlan, EstimateSummary, ImageLookup, ImagePlan, NetworkPlan, OssPlan, SpotPoolPlan,
    StoragePlan,
)
from .replacement import ReplacementEstimate, ReplacementPhase
from .schema import PLAN_SCHEMA_VERSION

__all__ = [
    "CapacityPlan", "Candidate", "CostBreakdown", "CostItem", "CpfsPlan", "FallbackCandidate", "DEPLOYMENT_SET_MAX", "DataDiskPlan", "DlcPlan", "ESSD_MAX_GIB", "ESSD_MIN_GIB",
    "AlertsPlan", "EstimateSummary", "ImageLookup", "ImagePlan", "JobPlan", "JobSecretPlan", "LayoutOption", "NetworkPlan",
    "OssPlan", "PLAN_SCHEMA_VERSION", "ParallelLayout", "ParallelismPlan", "Plan", "PlannedPrice", "PolicyException", "PriceProvenance", "Rejection", "ReservationPlan",
    "ReplacementEstimate", "ReplacementPhase", "SpotPoolPlan", "StoragePlan", "ess_price_limit", "spot_price_limit",
]
