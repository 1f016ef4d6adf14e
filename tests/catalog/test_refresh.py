"""`trainstack catalog refresh`: API answers built with the SDK's own models, played through a fake client.

No network: every response is an ``alibabacloud_ecs20140526.models.*Response().from_map(...)``
and every error an SDK exception class; the sleep between retries is a recorder.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from alibabacloud_ecs20140526 import models as ecs
from alibabacloud_tea_openapi import exceptions as sdk_errors

from trainstack import cli
from trainstack import refresh
from trainstack.catalog import loader, overlay as ov
from trainstack.cloud import ecs as ecs_api, retry
from trainstack.catalog.loader import build_catalog

REGION = "cn-shenzhen"
NOW = dt.datetime(2025, 3, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


# ---- API answers, as the SDK models them ---------------------------------------------------------

def api_type(name: str, family: str, gpus: int, spec: str, gpu_mem: float, vcpu: int, mem: float,
             eri: int = 0, bw_gbps: float = 16, cards: int = 1) -> dict[str, Any]:
    return {"InstanceTypeId": name, "InstanceTypeFamily": family, "GPUAmount": gpus, "GPUSpec": spec,
            "GPUMemorySize": gpu_mem, "CpuCoreCount": vcpu, "MemorySize": mem, "EriQuantity": eri,
            "InstanceBandwidthRx": int(bw_gbps * 1_024_000), "InstanceBandwidthTx": int(bw_gbps * 1_024_000),
            "NetworkCardQuantity": cards,
            "NetworkCards": {"NetworkCardInfo": [{"NetworkCardIndex": i} for i in range(cards)]},
            "CpuArchitecture": "X86", "InstanceCategory": "GPU-accelerated"}


A10 = api_type("ecs.gn7i-c8g1.2xlarge", "ecs.gn7i", 1, "NVIDIA A10", 24, 8, 30)
A100 = api_type("ecs.gn7e-c16g1.4xlarge", "ecs.gn7e", 1, "NVIDIA A100", 80, 16, 125, bw_gbps=8)
NEW = api_type("ecs.gn9x-c16g1.8xlarge", "ecs.gn9x", 2, "NVIDIA H20", 96, 32, 256, eri=1, bw_gbps=32)
SLICE = api_type("ecs.vgn7i-vws-m4.xlarge", "ecs.vgn7i", 1, "NVIDIA A10", 6, 4, 30)


def stock_map(region: str, rows: dict[str, dict[str, str]], zone: Optional[str] = None,
              instance_type: Optional[str] = None) -> dict[str, Any]:
    """A DescribeAvailableResource body: rows = {type: {zone: StatusCategory}}."""
    zones: dict[str, list[dict[str, Any]]] = {}
    for t, per_zone in rows.items():
        if instance_type and t != instance_type:
            continue
        for z, cat in per_zone.items():
            if zone and z != zone:
                continue
            status = "Available" if cat in ("WithStock", "ClosedWithStock") else "SoldOut"
            zones.setdefault(z, []).append({"Value": t, "Status": status, "StatusCategory": cat})
    return {"RequestId": "req", "AvailableZones": {"AvailableZone": [
        {"ZoneId": z, "RegionId": region, "Status": "Available", "StatusCategory": "WithStock",
         "AvailableResources": {"AvailableResource": [
             {"Type": "InstanceType", "SupportedResources": {"SupportedResource": res}}]}}
        for z, res in sorted(zones.items())]}}


class FakeEcs:
    """Answers the four calls from tables; ``hooks[api](n, request)`` may raise or replace the answer."""

    def __init__(self, types=(A10, A100, NEW, SLICE), *, on_demand=None, spot_stock=None, prices=None,
                 spot=None, currency="CNY", page_size=2):
        self.types = list(types)
        self.on_demand = on_demand if on_demand is not None else {
            A10["InstanceTypeId"]: {"cn-shenzhen-d": "WithStock", "cn-shenzhen-e": "WithStock",
                                    "cn-shenzhen-f": "WithoutStock"},
            A100["InstanceTypeId"]: {"cn-shenzhen-e": "ClosedWithStock"},
            NEW["InstanceTypeId"]: {"cn-shenzhen-f": "WithStock"},
            "ecs.g7.large": {"cn-shenzhen-e": "WithStock"},  # not a GPU type: ignored
        }
        self.spot_stock = spot_stock if spot_stock is not None else {
            A10["InstanceTypeId"]: {"cn-shenzhen-d": "WithStock", "cn-shenzhen-e": "WithStock"},
        }
        self.prices = prices if prices is not None else {
            A10["InstanceTypeId"]: (10.0, 9.0), A100["InstanceTypeId"]: (34.742, 30.0),
            NEW["InstanceTypeId"]: (60.0, 55.0)}
        self.spot = spot if spot is not None else {
            (A10["InstanceTypeId"], "cn-shenzhen-d"): 2.5, (A10["InstanceTypeId"], "cn-shenzhen-e"): 2.1}
        self.currency = currency
        self.page_size = page_size
        self.calls: list[tuple[str, Any]] = []
        self.hooks: dict[str, Callable[[int, Any], Optional[dict]]] = {}

    def _hook(self, api: str, req: Any) -> Optional[dict]:
        self.calls.append((api, req))
        n = sum(1 for a, _ in self.calls if a == api)
        if api in self.hooks:
            return self.hooks[api](n, req)
        return None

    def count(self, api: str) -> int:
        return sum(1 for a, _ in self.calls if a == api)

    def describe_instance_types(self, req: ecs.DescribeInstanceTypesRequest):
        body = self._hook("DescribeInstanceTypes", req)
        if body is None:
            items = [t for t in self.types
                     if (req.instance_type_family is None or t["InstanceTypeFamily"] == req.instance_type_family)
                     and (req.minimum_gpuamount is None or t["GPUAmount"] >= req.minimum_gpuamount)]
            start = int(req.next_token or 0)
            page = items[start:start + min(self.page_size, req.max_results)]
            more = start + len(page) < len(items)
            body = {"RequestId": "req", "NextToken": str(start + len(page)) if more else "",
                    "InstanceTypes": {"InstanceType": page}}
        return ecs.DescribeInstanceTypesResponse().from_map({"statusCode": 200, "headers": {}, "body": body})

    def describe_available_resource(self, req: ecs.DescribeAvailableResourceRequest):
        body = self._hook("DescribeAvailableResource", req)
        if body is None:
            rows = self.on_demand if req.spot_strategy in (None, "NoSpot") else self.spot_stock
            body = stock_map(req.region_id, rows, req.zone_id, req.instance_type)
        return ecs.DescribeAvailableResourceResponse().from_map({"statusCode": 200, "headers": {}, "body": body})

    def describe_price(self, req: ecs.DescribePriceRequest):
        body = self._hook("DescribePrice", req)
        if body is None:
            original, trade = self.prices[req.instance_type]
            disk = 0.3
            body = {"RequestId": "req", "PriceInfo": {"Price": {
                "Currency": self.currency, "OriginalPrice": original + disk, "TradePrice": trade + disk,
                "DiscountPrice": original - trade,
                "DetailInfos": {"DetailInfo": [
                    {"Resource": "instanceType", "OriginalPrice": original, "TradePrice": trade,
                     "DiscountPrice": original - trade},
                    {"Resource": "systemDisk", "OriginalPrice": disk, "TradePrice": disk, "DiscountPrice": 0}]}},
                "Rules": {"Rule": []}}}
        return ecs.DescribePriceResponse().from_map({"statusCode": 200, "headers": {}, "body": body})

    def describe_spot_price_history(self, req: ecs.DescribeSpotPriceHistoryRequest):
        body = self._hook("DescribeSpotPriceHistory", req)
        if body is None:
            latest = self.spot.get((req.instance_type, req.zone_id))
            entries = []
            if latest is not None:
                entries = [  # older first, as the API lists them
                    {"ZoneId": req.zone_id, "InstanceType": req.instance_type, "SpotPrice": latest * 2,
                     "OriginPrice": 10.0, "Timestamp": "2025-03-01T09:00:00Z", "NetworkType": "vpc",
                     "IoOptimized": "optimized"},
                    {"ZoneId": req.zone_id, "InstanceType": req.instance_type, "SpotPrice": latest,
                     "OriginPrice": 10.0, "Timestamp": "2025-03-01T11:00:00Z", "NetworkType": "vpc",
                     "IoOptimized": "optimized"}]
            body = {"RequestId": "req", "Currency": self.currency, "NextOffset": 0,
                    "SpotPrices": {"SpotPriceType": entries}}
        return ecs.DescribeSpotPriceHistoryResponse().from_map({"statusCode": 200, "headers": {}, "body": body})


def throttled(code: str = "Throttling.User") -> Exception:
    return sdk_errors.ThrottlingException(status_code=400, code=code, message="Request was denied due to user "
                                          "flow control.", request_id="r1", retry_after=None, data={})


def client_error(code: str, status: int = 403, message: str = "denied") -> Exception:
    return sdk_errors.ClientException(status_code=status, code=code, message=message, request_id="r2", data={})


# ---- fixtures -------------------------------------------------------------------------------------

@pytest.fixture()
def overlays(tmp_path, monkeypatch) -> Path:
    """An empty overlay directory used by the loader; the repo's data dir is never written."""
    d = tmp_path / "overlays"
    d.mkdir()
    monkeypatch.setenv(loader.OVERLAY_DIR_ENV, str(d))
    loader._cached.cache_clear()
    yield d
    loader._cached.cache_clear()


@pytest.fixture()
def sleeps(monkeypatch) -> list[float]:
    record: list[float] = []
    monkeypatch.setattr(ecs_api, "_sleep", record.append)
    return record


@pytest.fixture()
def fake(monkeypatch) -> FakeEcs:
    client = FakeEcs()
    monkeypatch.setattr(refresh, "make_client", lambda region: client)
    monkeypatch.setattr(refresh, "_utcnow", lambda: NOW)
    return client


def run_cli(capsys, *argv: str):
    rc = cli.main(["catalog", "refresh", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def snapshot_files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


# ---- a refresh that adds a type and changes a price -----------------------------------------------

def test_refresh_adds_a_type_and_changes_a_price(capsys, overlays, fake, sleeps):
    rc, out, err = run_cli(capsys, "--region", REGION)
    assert rc == 0, err
    # the summary names the new type and the price move
    assert "+ ecs.gn9x-c16g1.8xlarge: new type (2 x H20" in out and "interconnect unverified" in out
    assert "price ecs.gn7i-c8g1.2xlarge: on-demand 9.5326 -> 10 CNY/h (+4.9%)" in out
    assert "price ecs.gn7i-c8g1.2xlarge: spot 2.1 CNY/h (observed; was an estimate)" in out
    assert ": trade" not in out  # the snapshot had no trade prices: no "move"
    assert "no longer offered:" in out  # the snapshot's other Shenzhen types
    assert f"wrote {overlays / 'cn-shenzhen.json'}" in out
    assert sleeps == []

    rec = json.loads((overlays / "cn-shenzhen.json").read_text(encoding="utf-8"))
    assert rec["schema_version"] == 1 and rec["region"] == REGION and rec["currency"] == "CNY"
    assert rec["fetched_at"] == "2025-03-01T12:00:00Z" and rec["usd_to_cny_rate"] is None
    assert "DescribeSpotPriceHistory" in rec["source"] and rec["source_tag"] == "ECS-API"
    names = [t["name"] for t in rec["instance_types"]]
    assert names == sorted(names) and "ecs.vgn7i-vws-m4.xlarge" not in names  # vGPU slices stay out
    new = next(t for t in rec["instance_types"] if t["name"] == "ecs.gn9x-c16g1.8xlarge")
    assert new == {"name": "ecs.gn9x-c16g1.8xlarge", "family": "gn9x", "gpu_count": 2, "gpu_spec": "NVIDIA H20",
                   "gpu_memory_gib": 96.0, "vcpu": 32, "memory_gib": 256.0, "eri_count": 1,
                   "network_card_count": 1, "network_bandwidth_gbps": 32.0, "gpu": "H20"}
    a10 = rec["prices"]["ecs.gn7i-c8g1.2xlarge"]
    # the instance part of the price (the system disk priced alongside is left out); list and trade kept
    assert a10 == {"on_demand": 10.0, "trade": 9.0, "zones": ["cn-shenzhen-d", "cn-shenzhen-e"],
                   "spot_zones": ["cn-shenzhen-d", "cn-shenzhen-e"],
                   "spot_by_zone": {"cn-shenzhen-d": 2.5, "cn-shenzhen-e": 2.1}}  # latest entry per zone
    assert rec["prices"]["ecs.gn7e-c16g1.4xlarge"]["zones"] == ["cn-shenzhen-e"]  # ClosedWithStock counts
    assert set(rec["prices"]) == {"ecs.gn7i-c8g1.2xlarge", "ecs.gn7e-c16g1.4xlarge", "ecs.gn9x-c16g1.8xlarge"}
    assert not list(overlays.glob("*.tmp")) and not list(overlays.glob(".*"))

    # the merged catalog: the new type, unverified interconnect, never multi-GPU training; the new price
    cat = build_catalog(overlays=[rec])
    r = cat.instance("ecs.gn9x-c16g1.8xlarge")
    assert r.interconnect == "unverified" and not r.multi_gpu_training_ok
    assert r.gpu is not None and r.gpu.name == "H20" and r.rdma == "erdma"
    assert r.family.sources == ("ECS-API",) and "interconnect" in r.family.unverified
    q = cat.quote(REGION, "ecs.gn7i-c8g1.2xlarge")
    assert q.on_demand_cny_per_hour == 10.0 and q.spot_cny_per_hour == 2.1 and not q.spot_estimated
    assert cat.seen_in(REGION, "ecs.gn7i-c8g1.2xlarge").trade_cny_per_hour == 9.0
    assert cat.newest_price_date == "2025-03-01" and cat.snapshot_date == "2024-11-07"  # oldest row in use: [PRICE-VS]
    # curated facts the API lacks stay
    assert cat.instance("ecs.gn7e-c16g1.4xlarge").interconnect == "nvlink"
    assert "ECS-API" in cat.instance_types["ecs.gn7i-c8g1.2xlarge"].sources
    # and the default loader now sees the overlay
    assert loader.load_catalog().quote(REGION, "ecs.gn9x-c16g1.8xlarge").on_demand_cny_per_hour == 60.0


def test_the_requests_are_the_documented_ones(overlays, fake, sleeps):
    refresh.refresh([REGION], out_dir=overlays, dry_run=True, client_factory=lambda r: fake, now=NOW)
    types = [r for a, r in fake.calls if a == "DescribeInstanceTypes"]
    families = {r.instance_type_family for r in types if r.instance_type_family}
    assert {"ecs.gn7i", "ecs.gn7e", "ecs.ebmgn7ex"} <= families and "ecs.vgn7i" not in families
    gpu_query = [r for r in types if r.minimum_gpuamount == 1]
    assert len(gpu_query) == 2 and gpu_query[1].next_token == "2"  # 3 GPU types + 1 slice, pages of 2
    assert all(r.max_results == 100 for r in types)
    stock = [r for a, r in fake.calls if a == "DescribeAvailableResource"]
    assert [r.spot_strategy for r in stock] == ["NoSpot", "SpotAsPriceGo"]
    assert all(r.destination_resource == "InstanceType" and r.region_id == REGION and
               r.instance_charge_type == "PostPaid" for r in stock)
    price = [r for a, r in fake.calls if a == "DescribePrice"]
    assert sorted(r.instance_type for r in price) == ["ecs.gn7e-c16g1.4xlarge", "ecs.gn7i-c8g1.2xlarge",
                                                      "ecs.gn9x-c16g1.8xlarge"]
    assert all(r.price_unit == "Hour" and r.resource_type == "instance" for r in price)
    spot = [(r.instance_type, r.zone_id) for a, r in fake.calls if a == "DescribeSpotPriceHistory"]
    assert spot == [("ecs.gn7i-c8g1.2xlarge", "cn-shenzhen-d"), ("ecs.gn7i-c8g1.2xlarge", "cn-shenzhen-e")]
    r = next(r for a, r in fake.calls if a == "DescribeSpotPriceHistory")
    assert r.start_time == "2025-02-28T12:00:00Z" and r.end_time == "2025-03-01T12:00:00Z"


def test_dry_run_writes_nothing_and_json_summary(capsys, overlays, fake, sleeps):
    rc, out, _ = run_cli(capsys, "--region", REGION, "--dry-run", "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["dry_run"] is True and data["written"] is False
    assert data["types_added"][0]["instance_type"] == "ecs.gn9x-c16g1.8xlarge"
    assert data["types_added"][0]["interconnect"] == "unverified"
    moves = {(m["instance_type"], m["kind"]): m for m in data["regions"][0]["price_moves"]}
    assert moves[("ecs.gn7i-c8g1.2xlarge", "on-demand")]["new"] == 10.0
    assert moves[("ecs.gn7i-c8g1.2xlarge", "on-demand")]["percent"] == 4.9
    assert data["catalog_date"] == "2025-03-01"
    assert list(overlays.iterdir()) == []


def test_out_dir_and_second_refresh_diffs_against_the_first(capsys, overlays, fake, sleeps, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    rc, _, err = run_cli(capsys, "--region", REGION, "--out-dir", str(elsewhere))
    assert rc == 0, err and (elsewhere / "cn-shenzhen.json").is_file()
    assert list(overlays.iterdir()) == []
    fake.prices["ecs.gn9x-c16g1.8xlarge"] = (66.0, 60.0)
    fake.on_demand["ecs.gn7i-c8g1.2xlarge"]["cn-shenzhen-f"] = "WithStock"
    rc, out, _ = run_cli(capsys, "--region", REGION, "--out-dir", str(elsewhere))
    assert rc == 0
    assert "+ ecs.gn9x" not in out and "no longer offered" not in out  # known since the first refresh
    assert "price ecs.gn9x-c16g1.8xlarge: on-demand 60 -> 66 CNY/h (+10.0%)" in out
    assert "zones ecs.gn7i-c8g1.2xlarge: +cn-shenzhen-f" in out


def test_a_type_the_api_drops_is_removed(capsys, overlays, fake, sleeps):
    assert run_cli(capsys, "--region", REGION)[0] == 0
    fake.types = [A10, A100]
    del fake.on_demand["ecs.gn9x-c16g1.8xlarge"]
    rc, out, _ = run_cli(capsys, "--region", REGION)
    assert rc == 0
    assert "- ecs.gn9x-c16g1.8xlarge: no longer reported" in out
    assert "no longer offered: ecs.gn9x-c16g1.8xlarge" in out


def test_spot_history_is_paged_and_the_latest_entry_wins(overlays, fake, sleeps):
    def hook(n, req):
        entry = {"ZoneId": req.zone_id, "InstanceType": req.instance_type, "NetworkType": "vpc"}
        if req.offset is None:
            return {"RequestId": "r", "Currency": "CNY", "NextOffset": 1, "SpotPrices": {"SpotPriceType": [
                dict(entry, SpotPrice=3.0, Timestamp="2025-03-01T08:00:00Z")]}}
        return {"RequestId": "r", "Currency": "CNY", "NextOffset": 0, "SpotPrices": {"SpotPriceType": [
            dict(entry, SpotPrice=1.7, Timestamp="2025-03-01T11:30:00Z"),
            dict(entry, SpotPrice=9.9, Timestamp="2025-03-01T10:00:00Z")]}}

    fake.hooks["DescribeSpotPriceHistory"] = hook
    res = refresh.refresh([REGION], out_dir=overlays, dry_run=True, client_factory=lambda r: fake, now=NOW)
    spot = res.records[REGION]["prices"]["ecs.gn7i-c8g1.2xlarge"]["spot_by_zone"]
    assert spot == {"cn-shenzhen-d": 1.7, "cn-shenzhen-e": 1.7}
    assert fake.count("DescribeSpotPriceHistory") == 4  # two pages per zone


def test_progress_bar_only_on_a_terminal(overlays, fake, sleeps, monkeypatch):
    monkeypatch.setattr("trainstack.progress.under_tests", lambda: False)  # progress is off under pytest otherwise
    class Tty:
        def __init__(self, tty):
            self.text, self.tty = "", tty

        def isatty(self):
            return self.tty

        def write(self, s):
            self.text += s

        def flush(self):
            pass

    for tty in (True, False):
        stream = Tty(tty)
        refresh.refresh([REGION], out_dir=overlays, dry_run=True, client_factory=lambda r: fake, now=NOW,
                        progress=refresh.fetch.Progress(stream, delay=0))
        if tty:
            assert "\r" in stream.text and "DescribePrice 3/3" in stream.text
            assert "DescribeSpotPriceHistory 2/2" in stream.text
        else:
            assert stream.text == ""


# ---- retries ----------------------------------------------------------------------------------------

def test_a_throttled_call_is_retried_with_backoff(capsys, overlays, fake, sleeps):
    def hook(n, req):
        if n <= 3:
            raise throttled("Throttling.User" if n < 3 else "ServiceUnavailable")
        return None

    fake.hooks["DescribePrice"] = hook
    rc, _, err = run_cli(capsys, "--region", REGION)
    assert rc == 0, err
    assert fake.count("DescribePrice") == 3 + 3  # three refused attempts, then one per type
    assert sleeps == [0.5, 1.0, 2.0]
    assert (overlays / "cn-shenzhen.json").is_file()


def test_server_errors_retry_and_the_backoff_is_capped(sleeps):
    calls = []

    def flaky(req):
        calls.append(req)
        if len(calls) < 8:
            raise sdk_errors.ServerException(status_code=503, code="ServiceUnavailable", message="busy",
                                             request_id="r", data={})
        return "ok"

    policy = retry.RetryPolicy(attempts=8, base_s=1, cap_s=4)
    assert ecs_api.call_api("DescribePrice", flaky, "req", region=REGION, policy=policy) == "ok"
    assert sleeps == [1, 2, 4, 4, 4, 4, 4]


def test_throttling_that_never_ends_is_exit_5(capsys, overlays, fake, sleeps):
    def hook(n, req):
        raise throttled()

    fake.hooks["DescribeAvailableResource"] = hook
    rc, _, err = run_cli(capsys, "--region", REGION)
    assert rc == 5
    assert "DescribeAvailableResource" in err and "after 5 attempts" in err and "retry later" in err
    assert len(sleeps) == 4 and list(overlays.iterdir()) == []


# ---- failures leave the old catalog untouched ------------------------------------------------------

def _old_overlay(d: Path) -> bytes:
    rec = {"schema_version": 1, "region": REGION, "source": ov.SOURCE, "source_tag": "ECS-API",
           "fetched_at": "2025-01-01T00:00:00Z", "currency": "CNY", "usd_to_cny_rate": None,
           "instance_types": [{"name": "ecs.gn7i-c8g1.2xlarge", "family": "gn7i", "gpu_count": 1, "vcpu": 8,
                               "memory_gib": 30.0}],
           "prices": {"ecs.gn7i-c8g1.2xlarge": {"on_demand": 9.9, "trade": 9.0, "zones": ["cn-shenzhen-e"],
                                                "spot_zones": [], "spot_by_zone": {}}}}
    text = json.dumps(rec, indent=1)  # deliberately not our formatting: bytes must survive as they are
    (d / "cn-shenzhen.json").write_text(text, encoding="utf-8")
    (d / "cn-beijing.json").write_text(text.replace(REGION, "cn-beijing"), encoding="utf-8")
    return text.encode()


def test_a_failure_half_way_leaves_the_old_catalog_byte_for_byte(capsys, overlays, fake, sleeps):
    _old_overlay(overlays)
    before = snapshot_files(overlays)

    def hook(n, req):
        if n == 2:  # instance types and stock succeeded, the first price too
            raise client_error("Forbidden.RAM", message="User not authorized to operate on the specified resource.")
        return None

    fake.hooks["DescribePrice"] = hook
    rc, out, err = run_cli(capsys, "--region", REGION, "--region", "cn-beijing")
    assert rc == 5 and out == ""
    assert "DescribePrice" in err and "permission denied" in err and "Forbidden.RAM" in err
    assert "ecs:DescribePrice" in err and "AliyunECSReadOnlyAccess" in err  # the fix
    assert "nothing was written" in err
    assert snapshot_files(overlays) == before  # byte for byte, no temporary files left behind
    assert fake.count("DescribePrice") == 2  # a permanent error is not retried
    assert sleeps == []


def test_a_second_region_failing_writes_no_region(capsys, overlays, fake, sleeps):
    def hook(n, req):
        if req.region_id == "cn-beijing":
            raise client_error("InvalidRegionId.NotFound", status=404, message="The specified RegionId does not exist.")
        return None

    fake.hooks["DescribeAvailableResource"] = hook
    rc, _, err = run_cli(capsys, "--region", f"{REGION},cn-beijing")
    assert rc == 5 and "DescribeAvailableResource (cn-beijing" in err and "region" in err
    assert list(overlays.iterdir()) == []  # cn-shenzhen succeeded but is not written alone


def test_missing_credentials_are_exit_5_with_the_fix(capsys, overlays, monkeypatch, sleeps):
    from alibabacloud_credentials.exceptions import CredentialException

    class NoCreds(FakeEcs):
        def describe_instance_types(self, req):
            raise CredentialException("unable to load credentials from any of the providers in the chain")

    monkeypatch.setattr(refresh, "make_client", lambda region: NoCreds())
    rc, _, err = run_cli(capsys, "--region", REGION)
    assert rc == 5
    assert "DescribeInstanceTypes" in err and "credentials" in err
    assert "ALIBABA_CLOUD_ACCESS_KEY_ID" in err and "~/.alibabacloud/credentials" in err and "RAM role" in err
    assert sleeps == [] and list(overlays.iterdir()) == []


def test_credentials_failing_inside_the_sdk_are_not_retried(capsys, overlays, fake, sleeps):
    """The SDK wraps a credential-chain failure in Tea's UnretryableException: unwrap it, do not retry."""
    from alibabacloud_credentials.exceptions import CredentialException
    from Tea.exceptions import UnretryableException

    def hook(n, req):
        raise UnretryableException(None, CredentialException(
            "unable to load credentials from any of the providers in the chain: [...]"))

    fake.hooks["DescribeInstanceTypes"] = hook
    rc, _, err = run_cli(capsys, "--region", REGION)
    assert rc == 5 and "credentials were rejected or not found" in err and "ALIBABA_CLOUD_ACCESS_KEY_ID" in err
    assert fake.count("DescribeInstanceTypes") == 1 and sleeps == []


def test_an_unreachable_endpoint_is_retried_then_exit_5(capsys, overlays, fake, sleeps):
    from Tea.exceptions import UnretryableException

    def hook(n, req):
        raise UnretryableException(None, ConnectionError("Name or service not known"))

    fake.hooks["DescribeInstanceTypes"] = hook
    rc, _, err = run_cli(capsys, "--region", REGION)
    assert rc == 5 and "cannot reach the ECS API" in err and "check network access" in err
    assert fake.count("DescribeInstanceTypes") == 5 and sleeps == [0.5, 1.0, 2.0, 4.0]


def test_rejected_access_key_is_exit_5(capsys, overlays, fake, sleeps):
    fake.hooks["DescribeInstanceTypes"] = lambda n, req: (_ for _ in ()).throw(
        client_error("InvalidAccessKeyId.NotFound", status=404, message="Specified access key is not found."))
    rc, _, err = run_cli(capsys, "--region", REGION)
    assert rc == 5 and "InvalidAccessKeyId.NotFound" in err and "ALIBABA_CLOUD_ACCESS_KEY_ID" in err


def test_the_real_client_factory_builds_without_network():
    client = ecs_api.make_client("cn-wulanchabu")
    assert client._endpoint == "ecs.cn-wulanchabu.aliyuncs.com"
    for name in ("describe_instance_types", "describe_available_resource", "describe_price",
                 "describe_spot_price_history"):
        assert callable(getattr(client, name))


# ---- malformed answers are rejected before writing ------------------------------------------------

@pytest.mark.parametrize("api,body,expect", [
    ("DescribeInstanceTypes", {"RequestId": "r", "NextToken": ""}, "InstanceTypes.InstanceType is missing"),
    ("DescribeInstanceTypes", {"RequestId": "r", "InstanceTypes": {"InstanceType": [
        dict(A10, GPUAmount=0)]}}, "GPUAmount is 0"),
    ("DescribeInstanceTypes", {"RequestId": "r", "InstanceTypes": {"InstanceType": [
        dict(A10, GPUAmount=2)]}}, "GPU count mismatch with the curated catalog"),
    ("DescribeInstanceTypes", {"RequestId": "r", "InstanceTypes": {"InstanceType": [
        dict(A10, MemorySize="lots")]}}, "MemorySize is 'lots'"),
    ("DescribePrice", {"RequestId": "r", "PriceInfo": {"Price": {"Currency": "CNY", "OriginalPrice": -3.0,
                                                                  "TradePrice": -3.0}}}, "negative"),
    ("DescribePrice", {"RequestId": "r"}, "PriceInfo.Price is missing"),
    ("DescribePrice", {"RequestId": "r", "PriceInfo": {"Price": {"Currency": "EUR", "OriginalPrice": 3.0}}},
     "not CNY or USD"),
    ("DescribeSpotPriceHistory", {"RequestId": "r", "Currency": "CNY", "SpotPrices": {"SpotPriceType": [
        {"ZoneId": "cn-shenzhen-d", "InstanceType": "ecs.gn7i-c8g1.2xlarge", "SpotPrice": -1.0,
         "Timestamp": "2025-03-01T11:00:00Z"}]}}, "SpotPrice is -1.0"),
])
def test_a_malformed_response_is_rejected(capsys, overlays, fake, sleeps, api, body, expect):
    old = _old_overlay(overlays)
    fake.hooks[api] = lambda n, req: body
    rc, out, err = run_cli(capsys, "--region", REGION)
    assert rc == 5, err
    assert api in err and "malformed" in err and expect in err and "nothing was written" in err
    assert (overlays / "cn-shenzhen.json").read_bytes() == old


def test_mixed_currencies_are_rejected(capsys, overlays, fake, sleeps):
    fake.hooks["DescribeSpotPriceHistory"] = lambda n, req: {
        "RequestId": "r", "Currency": "USD", "SpotPrices": {"SpotPriceType": [
            {"ZoneId": req.zone_id, "InstanceType": req.instance_type, "SpotPrice": 0.3,
             "Timestamp": "2025-03-01T11:00:00Z"}]}}
    rc, _, err = run_cli(capsys, "--region", REGION)
    assert rc == 5 and "several currencies" in err and list(overlays.iterdir()) == []


def test_endless_paging_is_rejected(capsys, overlays, fake, sleeps):
    fake.hooks["DescribeInstanceTypes"] = lambda n, req: {
        "RequestId": "r", "NextToken": "same", "InstanceTypes": {"InstanceType": []}}
    rc, _, err = run_cli(capsys, "--region", REGION)
    assert rc == 5 and "NextToken 'same' repeats" in err


def test_a_type_without_a_price_is_recorded_as_unknown(capsys, overlays, fake, sleeps):
    def hook(n, req):
        if req.instance_type == "ecs.gn9x-c16g1.8xlarge":
            raise client_error("InvalidInstanceType.ValueNotSupported", status=400, message="not sold here")
        return None

    fake.hooks["DescribePrice"] = hook
    rc, out, err = run_cli(capsys, "--region", REGION)
    assert rc == 0, err
    assert "ecs.gn9x-c16g1.8xlarge: DescribePrice gives no pay-as-you-go price" in out
    rec = json.loads((overlays / "cn-shenzhen.json").read_text(encoding="utf-8"))
    assert rec["prices"]["ecs.gn9x-c16g1.8xlarge"]["on_demand"] is None  # unknown, never 0


# ---- currency -----------------------------------------------------------------------------------------

def test_usd_prices_are_recorded_and_used_only_with_a_stated_rate(capsys, overlays, monkeypatch, sleeps):
    client = FakeEcs(currency="USD", prices={A10["InstanceTypeId"]: (1.4, 1.3), A100["InstanceTypeId"]: (5.0, 4.5),
                                             NEW["InstanceTypeId"]: (8.0, 7.5)},
                     spot={(A10["InstanceTypeId"], "cn-shenzhen-d"): 0.4})
    monkeypatch.setattr(refresh, "make_client", lambda region: client)
    rc, out, _ = run_cli(capsys, "--region", REGION, "--dry-run")
    assert rc == 0 and "no --usd-rate" in out and "price ecs" not in out
    res = refresh.refresh([REGION], out_dir=overlays, dry_run=True, client_factory=lambda r: client, now=NOW)
    rec = res.records[REGION]
    assert rec["currency"] == "USD" and rec["usd_to_cny_rate"] is None
    assert rec["prices"]["ecs.gn7i-c8g1.2xlarge"]["on_demand"] == 1.4  # recorded as USD
    # not used as CNY: the snapshot's CNY price stays; the new type is still added
    assert res.after.quote(REGION, "ecs.gn7i-c8g1.2xlarge").on_demand_cny_per_hour == pytest.approx(9.5326)
    assert res.after.knows("ecs.gn9x-c16g1.8xlarge")

    res = refresh.refresh([REGION], out_dir=overlays, usd_rate=7.2, client_factory=lambda r: client, now=NOW)
    rec = json.loads((overlays / "cn-shenzhen.json").read_text(encoding="utf-8"))
    assert rec["currency"] == "USD" and rec["usd_to_cny_rate"] == 7.2
    row = res.after.seen_in(REGION, "ecs.gn7i-c8g1.2xlarge")
    assert row.on_demand_cny_per_hour == pytest.approx(10.08) and row.trade_cny_per_hour == pytest.approx(9.36)
    assert row.spot_cny_per_hour == pytest.approx(2.88) and row.currency == "CNY"


def test_usd_rate_is_ignored_for_cny_prices(capsys, overlays, fake, sleeps):
    rc, out, _ = run_cli(capsys, "--region", REGION, "--usd-rate", "7.1", "--dry-run")
    assert rc == 0 and "--usd-rate ignored" in out


# ---- user mistakes --------------------------------------------------------------------------------------

def test_unknown_region_is_exit_2_with_did_you_mean(capsys, overlays, fake):
    rc, _, err = run_cli(capsys, "--region", "cn-shenzen")
    assert rc == 2 and "did you mean 'cn-shenzhen'" in err and fake.calls == []


def test_region_is_required(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["catalog", "refresh"])
    assert exc.value.code == 2


def test_bad_usd_rate_is_exit_2(capsys, overlays, fake):
    rc, _, err = run_cli(capsys, "--region", REGION, "--usd-rate", "-1")
    assert rc == 2 and "--usd-rate" in err


def test_a_broken_overlay_file_is_exit_2(capsys, overlays, fake):
    (overlays / "cn-shenzhen.json").write_text("{not json", encoding="utf-8")
    rc, _, err = run_cli(capsys, "--region", REGION)
    assert rc == 2 and "cn-shenzhen.json" in err and "delete the file" in err


# ---- a price book from the account's trade prices --------------------------------------------------

def test_refresh_writes_the_accounts_trade_prices_as_a_price_book(capsys, overlays, fake, sleeps, tmp_path,
                                                                   monkeypatch):
    from trainstack.catalog.price_book import read_price_book

    monkeypatch.setenv("TRAINSTACK_TODAY", "2025-03-02")
    book = tmp_path / "prices.yaml"
    book.write_text("prices:\n"
                    "  - {region: cn-shenzhen, instance_type: ecs.gn7e-c16g1.4xlarge, on_demand_cny_per_hour: 20,"
                    " as_of: 2025-02-01, source: negotiated by hand}\n"
                    "  - {region: cn-beijing, dlc_spec: ecs.gn7i-c8g1.2xlarge, on_demand_cny_per_hour: 8,"
                    " as_of: 2025-02-01, source: PAI console}\n")
    rc, out, err = run_cli(capsys, "--region", REGION, "--price-book", str(book))
    assert rc == 0, err
    assert f"price book: wrote 3 trade price(s) to {book}" in out
    entries = read_price_book(book, loader.load_catalog()).entries
    by = {(e.kind, e.region, e.subject): e for e in entries}
    a10 = by[("instance_type", REGION, "ecs.gn7i-c8g1.2xlarge")]
    assert a10.on_demand_cny_per_hour == 9.0 and str(a10.as_of) == "2025-03-01"  # TradePrice, not the list 10.0
    assert a10.source.startswith("DescribePrice TradePrice") and "list price 10" in a10.source
    # hand-written rows survive, and win over the trade price of the same type
    assert by[("instance_type", REGION, "ecs.gn7e-c16g1.4xlarge")].source == "negotiated by hand"
    assert ("dlc_spec", "cn-beijing", "ecs.gn7i-c8g1.2xlarge") in by
    assert len(entries) == 4
    # a second refresh replaces its own rows instead of adding duplicates
    rc, out, err = run_cli(capsys, "--region", REGION, "--price-book", str(book))
    assert rc == 0 and len(read_price_book(book, loader.load_catalog()).entries) == 4


def test_a_broken_price_book_stops_the_refresh_before_any_call(capsys, overlays, fake, sleeps, tmp_path):
    book = tmp_path / "prices.yaml"
    book.write_text("prices:\n  - {region: cn-shenzhen}\n")
    rc, out, err = run_cli(capsys, "--region", REGION, "--price-book", str(book))
    assert rc == 2 and "prices[0]" in err and fake.calls == []
    assert book.read_text() == "prices:\n  - {region: cn-shenzhen}\n"
    assert not list(overlays.iterdir())


def test_dry_run_writes_no_price_book(capsys, overlays, fake, sleeps, tmp_path):
    book = tmp_path / "prices.yaml"
    rc, out, _ = run_cli(capsys, "--region", REGION, "--price-book", str(book), "--dry-run", "--json")
    assert rc == 0 and not book.exists()
    assert json.loads(out)["price_book"]["trade_prices"] == 3
