"""The GPU catalog: facts as data (``data/``), loaded and validated once.

``load_catalog()`` is what every other module uses. It reads the curated facts, the dated
price snapshot and any refresh overlays (``data/overlays/<region>.json``, written by
``trainstack catalog refresh``), validates them together and answers questions about them. ``service_limits()`` (cloud limits,
``data/service_limits.yaml``) and ``dlc_facts()`` (PAI-DLC facts, ``data/dlc_specs.yaml``) are
read the same way, each fact with a source tag.
"""

from __future__ import annotations

from .dlc_specs import DlcFacts, dlc_facts, load_dlc_facts
from .errors import CatalogError
from .limits import ServiceLimit, ServiceLimits, load_limits, service_limits
from .loader import Catalog, is_mainland_china, load_catalog
from .models import (
    TRAINING_INTERCONNECTS,
    TRAINING_RDMA,
    Citation,
    GpuModel,
    InstanceFamily,
    InstanceType,
    PriceQuote,
    RegionPrice,
    ResolvedInstance,
    SourceRef,
)

__all__ = [
    "Catalog", "CatalogError", "Citation", "DlcFacts", "GpuModel", "InstanceFamily", "InstanceType", "PriceQuote",
    "RegionPrice", "ResolvedInstance", "SourceRef", "TRAINING_INTERCONNECTS", "TRAINING_RDMA",
    "ServiceLimit", "ServiceLimits", "dlc_facts", "is_mainland_china", "load_catalog", "load_dlc_facts",
    "load_limits", "service_limits",
]
