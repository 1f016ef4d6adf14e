"""What every part of the Plan shares: frozen models, the service limits plan fields obey, price rounding."""

from __future__ import annotations

from decimal import ROUND_FLOOR, Decimal

from pydantic import BaseModel, ConfigDict

from ..catalog.limits import service_limits

_LIMITS = service_limits()
#: Minimum ESSD size per performance level and the largest ESSD (GiB): data/service_limits.yaml.
ESSD_MIN_GIB: dict[str, int] = {k: int(v) for k, v in _LIMITS.value("ecs.essd.min_gib").items()}  # type: ignore[union-attr]
ESSD_MAX_GIB = int(_LIMITS.number("ecs.essd.max_gib"))
#: Alibaba LowLatency deployment sets hold at most this many instances (one zone).
DEPLOYMENT_SET_MAX = int(_LIMITS.number("ecs.deployment_set.low_latency.max_instances"))


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _floor(price: float, places: int) -> float:
    """``price`` rounded down to ``places`` decimals, on its shortest decimal form (so 0.3 stays 0.3 and
    1.999999999999993 becomes 1.999: never above the price given)."""
    return float(Decimal(repr(price)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_FLOOR))


def spot_price_limit(price: float) -> float:
    """A spot bid: at most 3 decimals, rounded down (never above the price given)."""
    return _floor(price, 3)


def ess_price_limit(price: float) -> float:
    """An ESS scaling configuration's spot bid: at most 2 decimals (pulumi-alicloud 4.0
    ``ScalingConfigurationSpotPriceLimitArgs.price_limit``), rounded down."""
    return _floor(price, 2)
