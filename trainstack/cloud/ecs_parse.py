"""ECS API responses as plain records, each field checked against what the API documents (pure)."""

from __future__ import annotations

from typing import Any, Optional

from ..catalog import overlay as ov

class MalformedResponse(Exception):
    """A response that does not have the shape or values the API documents."""

    def __init__(self, api: str, message: str):
        super().__init__(f"{api}: {message}")
        self.api = api
        self.message = message


def _body(api: str, response: Any) -> Any:
    body = getattr(response, "body", response)  # a Response or its body
    if body is None:
        raise MalformedResponse(api, "the response has no body")
    return body


def _num(api: str, where: str, v: Any, *, integer: bool = False, optional: bool = True,
         low: float = 0) -> Optional[float]:
    if v is None:
        if optional:
            return None
        raise MalformedResponse(api, f"{where} is missing")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and float(v) != int(v)):
        raise MalformedResponse(api, f"{where} is {v!r}, not a {'whole ' if integer else ''}number")
    if v < low:
        raise MalformedResponse(api, f"{where} is {v!r} (negative)" if v < 0 else f"{where} is {v!r}")
    return int(v) if integer else float(v)


def parse_instance_types(response: Any) -> tuple[list[dict[str, Any]], Optional[str]]:
    """(facts per type, next token) from a DescribeInstanceTypes response."""
    api = "DescribeInstanceTypes"
    body = _body(api, response)
    holder = getattr(body, "instance_types", None)
    items = getattr(holder, "instance_type", None) if holder is not None else None
    if holder is None or not isinstance(items, list):
        raise MalformedResponse(api, "InstanceTypes.InstanceType is missing")
    out = []
    for item in items:
        name = getattr(item, "instance_type_id", None)
        fam = getattr(item, "instance_type_family", None)
        if not isinstance(name, str) or not name.startswith("ecs."):
            raise MalformedResponse(api, f"InstanceTypeId {name!r} is not an ECS type id")
        if not isinstance(fam, str) or not fam.startswith("ecs.") or not name.startswith(fam):
            raise MalformedResponse(api, f"{name}: InstanceTypeFamily {fam!r} does not match the type")
        gpus = _num(api, f"{name}: GPUAmount", getattr(item, "gpuamount", None), integer=True, optional=False)
        if gpus < 1:
            raise MalformedResponse(api, f"{name}: GPUAmount is {gpus}: GPU count mismatch for a GPU type")
        cards = getattr(getattr(item, "network_cards", None), "network_card_info", None)
        card_count = _num(api, f"{name}: NetworkCardQuantity", getattr(item, "network_card_quantity", None),
                          integer=True)
        if card_count is None and isinstance(cards, list) and cards:
            card_count = len(cards)
        rx = _num(api, f"{name}: InstanceBandwidthRx", getattr(item, "instance_bandwidth_rx", None))
        spec = getattr(item, "gpuspec", None)
        memory = _num(api, f"{name}: MemorySize", getattr(item, "memory_size", None))
        out.append({
            "name": name,
            "family": fam.removeprefix("ecs."),
            "gpu_count": int(gpus),
            "gpu_spec": spec if isinstance(spec, str) and spec else None,
            "gpu_memory_gib": _num(api, f"{name}: GPUMemorySize", getattr(item, "gpumemory_size", None)) or None,
            "vcpu": _num(api, f"{name}: CpuCoreCount", getattr(item, "cpu_core_count", None), integer=True,
                         low=1),
            "memory_gib": memory or None,
            "eri_count": _num(api, f"{name}: EriQuantity", getattr(item, "eri_quantity", None), integer=True),
            "network_card_count": card_count,
            # InstanceBandwidthRx is Kbit/s with 1 Gbit/s = 1,024,000 (ecs.g6.large: 1024000)
            "network_bandwidth_gbps": round(rx / 1_024_000, 3) if rx else None,
        })
    token = getattr(body, "next_token", None)
    return out, token or None


#: StatusCategory values that mean "can be bought now" (ClosedWithStock = low supply).
IN_STOCK = ("WithStock", "ClosedWithStock")


def parse_available(response: Any) -> dict[str, dict[str, str]]:
    """``{instance_type: {zone: status}}`` from DescribeAvailableResource (InstanceType level).

    ``status`` is the StatusCategory (``WithStock``, ``ClosedWithStock``, ``WithoutStock``,
    ``ClosedWithoutStock``), or ``Available``/``SoldOut`` when the category is absent.
    """
    api = "DescribeAvailableResource"
    body = _body(api, response)
    holder = getattr(body, "available_zones", None)
    if holder is None:
        return {}  # the API omits AvailableZones when nothing matches
    zones = getattr(holder, "available_zone", None)
    if not isinstance(zones, list):
        raise MalformedResponse(api, "AvailableZones.AvailableZone is not a list")
    out: dict[str, dict[str, str]] = {}
    for z in zones:
        zone = getattr(z, "zone_id", None)
        if not isinstance(zone, str) or not zone:
            raise MalformedResponse(api, "an AvailableZone has no ZoneId")
        resources = getattr(getattr(z, "available_resources", None), "available_resource", None) or []
        for res in resources:
            if getattr(res, "type", None) not in (None, "InstanceType"):
                continue
            for sr in getattr(getattr(res, "supported_resources", None), "supported_resource", None) or []:
                value = getattr(sr, "value", None)
                if not isinstance(value, str) or not value:
                    raise MalformedResponse(api, f"{zone}: a SupportedResource has no Value")
                status = getattr(sr, "status_category", None) or getattr(sr, "status", None) or "unknown"
                out.setdefault(value, {})[zone] = str(status)
    return out


def in_stock(status: Optional[str]) -> bool:
    return status in IN_STOCK or status == "Available"


def parse_price(response: Any, instance_type: str) -> tuple[str, float, Optional[float]]:
    """(currency, list price, trade price) per hour of the instance part of a DescribePrice answer."""
    api = "DescribePrice"
    body = _body(api, response)
    price = getattr(getattr(body, "price_info", None), "price", None)
    if price is None:
        raise MalformedResponse(api, f"{instance_type}: PriceInfo.Price is missing")
    currency = getattr(price, "currency", None)
    if currency not in ov.CURRENCIES:
        raise MalformedResponse(api, f"{instance_type}: Currency is {currency!r}, not CNY or USD")
    source = price
    for d in getattr(getattr(price, "detail_infos", None), "detail_info", None) or []:
        if str(getattr(d, "resource", "")).lower() == "instancetype":
            source = d  # the instance alone, without the system disk priced alongside
            break
    original = _num(api, f"{instance_type}: OriginalPrice", getattr(source, "original_price", None),
                    optional=False)
    trade = _num(api, f"{instance_type}: TradePrice", getattr(source, "trade_price", None))
    if original <= 0:
        raise MalformedResponse(api, f"{instance_type}: OriginalPrice is {original}: a price is never 0")
    return currency, original, trade


def parse_spot_history(response: Any, instance_type: str, zone: str
                       ) -> tuple[Optional[str], Optional[float], Optional[str], Optional[int]]:
    """(currency, latest price, its timestamp, next offset) of one DescribeSpotPriceHistory page."""
    api = "DescribeSpotPriceHistory"
    body = _body(api, response)
    holder = getattr(body, "spot_prices", None)
    items = getattr(holder, "spot_price_type", None) if holder is not None else []
    if not isinstance(items, list):
        raise MalformedResponse(api, f"{instance_type} in {zone}: SpotPrices.SpotPriceType is not a list")
    currency = getattr(body, "currency", None)
    if items and currency not in ov.CURRENCIES:
        raise MalformedResponse(api, f"{instance_type} in {zone}: Currency is {currency!r}, not CNY or USD")
    best: tuple[str, float] | None = None
    for it in items:
        if getattr(it, "zone_id", zone) not in (zone, None):
            continue
        if getattr(it, "instance_type", instance_type) not in (instance_type, None):
            continue
        stamp = getattr(it, "timestamp", None)
        if not isinstance(stamp, str) or not stamp:
            raise MalformedResponse(api, f"{instance_type} in {zone}: an entry has no Timestamp")
        value = _num(api, f"{instance_type} in {zone}: SpotPrice", getattr(it, "spot_price", None),
                     optional=False)
        if value <= 0:
            raise MalformedResponse(api, f"{instance_type} in {zone}: SpotPrice is {value}")
        if best is None or stamp > best[0]:
            best = (stamp, value)
    offset = getattr(body, "next_offset", None)
    return (currency if currency in ov.CURRENCIES else None, best[1] if best else None,
            best[0] if best else None,
            offset if isinstance(offset, int) and not isinstance(offset, bool) else None)
