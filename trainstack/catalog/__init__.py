"""The GPU catalog: facts as data (``data/``), loaded and validated once.

``load_catalog()`` is what every other module uses. It reads the curated facts, the dated
price snapshot and any refresh overlays (``data/overlays/<region>.json``, written by
``trainstack catalog refresh``), validates them together and answers questions about them.
"""

from __future__ import annotations

from .loader import Catalog, CatalogError, is_mainland_china, load_catalog
from .models import (
    GpuModel,
    InstanceFamily,
    InstanceType,
    PriceQuote,
    RegionPrice,
    ResolvedInstance,
    SourceRef,
    TRAINING_INTERCONNECTS,
)

__all__ = [
    "Catalog", "CatalogError", "GpuModel", "InstanceFamily", "InstanceType", "PriceQuote",
    "RegionPrice", "ResolvedInstance", "SourceRef", "TRAINING_INTERCONNECTS",
    "is_mainland_china", "load_catalog",
]
