"""`trainstack preflight PROFILE`: the planned type in stock (0), out of stock with suggestions (3),
API or credential errors (5). The plan is handed in; ECS answers are SDK models from a fake client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest
from alibabacloud_ecs20140526 import models as ecs
from alibabacloud_tea_openapi import exceptions as sdk_errors

from plan_factory import dlc_plan, multi_node_erdma_plan, single_gpu_lora_plan, spot_plan
from trainstack import cli
from trainstack.cloud import credentials, ecs as ecs_api
from trainstack.errors import CloudApiError
from trainstack.commands import preflight
from trainstack.plan import Candidate

ROOT = Path(__file__).resolve().parents[2]
PROFILE = str(ROOT / "stacks" / "profiles" / "llama3-8b-lora.yaml")
A10 = "ecs.gn7i-c8g1.2xlarge"
A10_BIG = "ecs.gn7i-c16g1.4xlarge"
A100 = "ecs.gn7e-c16g1.4xlarge"
#: the plans below pin the zone these tests stock (a profile's `zone:`)
PINNED = {"zone": "cn-shenzhen-e"}


def available(rows: dict[str, dict[str, str]], zone: Optional[str], instance_type: Optional[str]) -> dict:
    zones: dict[str, list[dict[str, Any]]] = {}
    for t, per_zone in rows.items():
        for z, cat in per_zone.items():
            if (instance_type and t != instance_type) or (zone and z != zone):
                continue
            status = "Available" if cat in ("WithStock", "ClosedWithStock") else "SoldOut"
            zones.setdefault(z, []).append({"Value": t, "Status": status, "StatusCategory": cat})
    return {"RequestId": "req", "AvailableZones": {"AvailableZone": [
        {"ZoneId": z, "RegionId": "cn-shenzhen", "Status": "Available", "StatusCategory": "WithStock",
         "AvailableResources": {"AvailableResource": [
             {"Type": "InstanceType", "SupportedResources": {"SupportedResource": res}}]}}
        for z, res in sorted(zones.items())]}}


class FakeStock:
    """DescribeAvailableResource from two tables: pay-as-you-go and spot stock per type and zone."""

    def __init__(self, on_demand: dict, spot: Optional[dict] = None, errors: tuple = ()):
        self.on_demand, self.spot = on_demand, spot or {}
        self.errors = list(errors)
        self.requests: list[ecs.DescribeAvailableResourceRequest] = []

    def describe_available_resource(self, req: ecs.DescribeAvailableResourceRequest):
        self.requests.append(req)
        if self.errors:
            raise self.errors.pop(0)
        rows = self.on_demand if req.spot_strategy in (None, "NoSpot") else self.spot
        return ecs.DescribeAvailableResourceResponse().from_map(
            {"statusCode": 200, "headers": {}, "body": available(rows, req.zone_id, req.instance_type)})


@pytest.fixture()
def sleeps(monkeypatch) -> list[float]:
    record: list[float] = []
    monkeypatch.setattr(ecs_api, "_sleep", record.append)
    return record


def use(monkeypatch, plan, client) -> None:
    monkeypatch.setattr(preflight, "resolve_plan", lambda profile, file=None: plan)
    monkeypatch.setattr(ecs_api, "make_client", lambda region: client)


def run(capsys, *argv: str):
    rc = cli.main(["preflight", PROFILE, *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def alternative(instance_type: str, gpu: str, hourly: float, zone: str = "cn-shenzhen-e", spot: bool = False,
                nodes: int = 1, gpus: int = 1) -> Candidate:
    return Candidate(instance_type=instance_type, gpu_model=gpu, nodes=nodes, gpus_per_node=gpus, spot=spot,
                     zone=zone, hourly_cost_cny=hourly)


# ---- in stock ---------------------------------------------------------------------------------------

def test_in_stock_exits_0_and_names_the_catalog_date(capsys, monkeypatch, sleeps):
    client = FakeStock({A10: {"cn-shenzhen-e": "WithStock", "cn-shenzhen-f": "WithoutStock"}})
    use(monkeypatch, single_gpu_lora_plan(profile=PINNED, catalog_date="2025-03-01"), client)
    rc, out, err = run(capsys)
    assert rc == 0, err
    assert f"{A10} (on-demand) is in stock in cn-shenzhen-e [WithStock]" in out
    assert "catalog date: 2025-03-01" in out
    req, region = client.requests  # the planned type, then the region once for the fallback order
    assert (req.region_id, req.instance_type, req.destination_resource, req.resource_type,
            req.instance_charge_type, req.spot_strategy) == (
        "cn-shenzhen", A10, "InstanceType", "instance", "PostPaid", "NoSpot")
    assert (region.instance_type, region.zone_id, region.spot_strategy) == (None, None, "NoSpot")
    assert sleeps == []


def test_in_stock_json(capsys, monkeypatch):
    use(monkeypatch, single_gpu_lora_plan(profile=PINNED, catalog_date="2024-10-09"),
        FakeStock({A10: {"cn-shenzhen-e": "ClosedWithStock"}}))
    rc, out, _ = run(capsys, "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["in_stock"] is True and data["checked"] is True and data["status"] == "ClosedWithStock"
    assert data["zone"] == "cn-shenzhen-e" and data["zones_in_stock"] == ["cn-shenzhen-e"]
    assert data["catalog_date"] == "2024-10-09"
    assert any("supply is low" in n for n in data["notes"])


def test_zone_left_to_deploy_time_checks_the_region(capsys, monkeypatch):
    client = FakeStock({A10: {"cn-shenzhen-d": "WithStock", "cn-shenzhen-e": "WithStock"}})
    use(monkeypatch, single_gpu_lora_plan(profile=PINNED, zone=None), client)
    rc, out, _ = run(capsys)
    assert rc == 0 and "cn-shenzhen (cn-shenzhen-d, cn-shenzhen-e)" in out and "pin one with `zone:`" in out
    assert client.requests[0].zone_id is None


def test_multi_node_notes_that_capacity_is_not_reserved(capsys, monkeypatch):
    use(monkeypatch, multi_node_erdma_plan(profile=PINNED, nodes=4),
        FakeStock({"ecs.ebmgn7ex.32xlarge": {"cn-shenzhen-e": "WithStock"}}))
    rc, out, _ = run(capsys)
    assert rc == 0 and "4 nodes are not reserved" in out


def test_spot_plans_ask_for_spot_stock(capsys, monkeypatch):
    client = FakeStock({}, spot={"ecs.gn7e-c16g1.16xlarge": {"cn-shenzhen-e": "WithStock"}})
    use(monkeypatch, spot_plan(profile=PINNED), client)
    rc, out, _ = run(capsys)
    assert rc == 0 and "(spot) is in stock" in out
    assert client.requests[0].spot_strategy == "SpotWithPriceLimit" and client.requests[0].spot_duration == 1


def test_dlc_plans_are_not_checked(capsys, monkeypatch):
    client = FakeStock({})
    use(monkeypatch, dlc_plan(profile=PINNED), client)
    rc, out, _ = run(capsys)
    assert rc == 0 and "not checked" in out and "PAI" in out
    assert client.requests == []


# ---- out of stock: exit 3 with suggestions ------------------------------------------------------------

def test_out_of_stock_suggests_another_zone_and_type(capsys, monkeypatch):
    plan = single_gpu_lora_plan(profile=PINNED, alternatives=(
        alternative(A10, "A10", 9.53, spot=True),                # same type: not a suggestion
        alternative(A10_BIG, "A10", 12.0),                       # sold out too
        alternative(A100, "A100-80G", 34.742, zone="cn-shenzhen-e"),
    ))
    client = FakeStock({A10: {"cn-shenzhen-e": "WithoutStock", "cn-shenzhen-d": "WithStock"},
                        A10_BIG: {"cn-shenzhen-e": "ClosedWithoutStock"},
                        A100: {"cn-shenzhen-e": "WithStock"}})
    use(monkeypatch, plan, client)
    rc, out, err = run(capsys)
    assert rc == 3
    # stdout: the order `trainstack up` would try, with the planned row's stock
    assert out.startswith("  first fallback row in stock now: no\n") and f"1. {A10} in cn-shenzhen-e" in out
    assert f"{A10} (on-demand) is not in stock in cn-shenzhen-e (DescribeAvailableResource: WithoutStock)" in err
    assert "set `zone: cn-shenzhen-d` in the profile" in err
    assert f"{A100} (1 x 1 A100-80G, on-demand, 34.742 CNY/h) is in stock in cn-shenzhen-e" in err
    assert f"resources.instance_types: [{A100}]" in err
    assert A10_BIG not in err


def test_out_of_stock_json(capsys, monkeypatch):
    plan = single_gpu_lora_plan(profile=PINNED, alternatives=(alternative(A100, "A100-80G", 34.742),))
    use(monkeypatch, plan, FakeStock({A10: {"cn-shenzhen-e": "WithoutStock"}, A100: {"cn-shenzhen-f": "WithStock"}}))
    rc, out, _ = run(capsys, "--json")
    assert rc == 3
    data = json.loads(out)
    assert data["exit_code"] == 3 and "not in stock" in data["error"]
    assert any(A100 in s and "cn-shenzhen-f" in s for s in data["suggestions"])
    assert data["preflight"]["in_stock"] is False and data["preflight"]["alternatives_in_stock"] == [A100]


def test_spot_sold_out_suggests_on_demand(capsys, monkeypatch):
    client = FakeStock({"ecs.gn7e-c16g1.16xlarge": {"cn-shenzhen-e": "WithStock"}},
                       spot={"ecs.gn7e-c16g1.16xlarge": {"cn-shenzhen-e": "WithoutStock"}})
    use(monkeypatch, spot_plan(profile=PINNED), client)
    rc, _, err = run(capsys)
    assert rc == 3 and "(spot) is not in stock" in err
    assert "on-demand ecs.gn7e-c16g1.16xlarge is in stock in cn-shenzhen-e" in err and "resources.spot" in err


def test_nothing_in_stock_says_retry_or_another_region(capsys, monkeypatch):
    use(monkeypatch, single_gpu_lora_plan(profile=PINNED), FakeStock({}))
    rc, _, err = run(capsys)
    assert rc == 3 and "not offered" in err and "retry later, or choose another region" in err


# ---- API and credential errors: exit 5 ------------------------------------------------------------------

def test_credential_errors_exit_5(capsys, monkeypatch, sleeps):
    from alibabacloud_credentials.exceptions import CredentialException

    client = FakeStock({}, errors=(CredentialException("unable to load credentials from any of the providers"),))
    use(monkeypatch, single_gpu_lora_plan(profile=PINNED), client)
    rc, _, err = run(capsys)
    assert rc == 5
    assert "DescribeAvailableResource" in err and "ALIBABA_CLOUD_ACCESS_KEY_ID" in err
    assert sleeps == []


def test_permission_errors_exit_5_with_the_fix(capsys, monkeypatch):
    err_ = sdk_errors.ClientException(status_code=403, code="Forbidden.RAM", message="not authorized",
                                      request_id="r", data={})
    use(monkeypatch, single_gpu_lora_plan(profile=PINNED), FakeStock({}, errors=(err_,)))
    rc, out, err = run(capsys, "--json")
    assert rc == 5
    data = json.loads(out)
    assert data["exit_code"] == 5 and "DescribeAvailableResource" in data["error"]
    assert "ecs:DescribeAvailableResource" in data["hint"]


def test_client_that_cannot_be_built_exits_5(capsys, monkeypatch):
    def broken(region):
        raise CloudApiError("cannot create the ECS API client", hint=credentials.CREDENTIALS_FIX)

    monkeypatch.setattr(preflight, "resolve_plan", lambda profile, file=None: single_gpu_lora_plan(profile=PINNED))
    monkeypatch.setattr(ecs_api, "make_client", broken)
    rc, _, err = run(capsys)
    assert rc == 5 and "~/.alibabacloud/credentials" in err


def test_throttling_is_retried(capsys, monkeypatch, sleeps):
    throttled = sdk_errors.ThrottlingException(status_code=400, code="Throttling", message="slow down",
                                               request_id="r", data={})
    client = FakeStock({A10: {"cn-shenzhen-e": "WithStock"}}, errors=(throttled, throttled))
    use(monkeypatch, single_gpu_lora_plan(profile=PINNED), client)
    rc, _, err = run(capsys)
    assert rc == 0, err
    assert len(client.requests) == 4 and sleeps == [0.5, 1.0]  # 2 retried + the region for the fallback order


def test_a_bad_profile_is_exit_2(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nregion: cn-shenzhen\n", encoding="utf-8")
    assert cli.main(["preflight", str(bad)]) == 2


# ---- the fallback order (what `trainstack up` tries), and --stack ------------------------------------------

def test_every_check_lists_the_fallback_order_with_its_stock(capsys, monkeypatch):
    plan = single_gpu_lora_plan()  # unpinned: the A10 in e then f, then the other types
    client = FakeStock({A10: {"cn-shenzhen-e": "WithoutStock", "cn-shenzhen-f": "WithStock"},
                        A10_BIG: {"cn-shenzhen-e": "ClosedWithStock"}})
    use(monkeypatch, plan, client)
    rc, out, _ = run(capsys, "--json")
    data = json.loads(out)
    # the planned zone e has none, but the zone is not pinned: a first deploy takes f (components/zone.py)
    assert rc == 0 and data["in_stock"] is True and data["first_candidate_in_stock"] is False
    assert any("a first deploy takes cn-shenzhen-f" in n for n in data["notes"])
    rows = {(r["instance_type"], r["zone"]): r for r in data["fallback"]}
    assert data["fallback_order"][:3] == [f"{A10}@cn-shenzhen-e", f"{A10}@cn-shenzhen-f", f"{A10_BIG}@cn-shenzhen-e"]
    assert rows[(A10, "cn-shenzhen-e")]["in_stock"] is False and rows[(A10, "cn-shenzhen-e")]["planned"] is True
    assert rows[(A10, "cn-shenzhen-f")]["status"] == "WithStock"
    assert rows[(A10_BIG, "cn-shenzhen-e")]["in_stock"] is True
    assert rows[(A10_BIG, "cn-shenzhen-f")]["status"] == "not offered"
    assert [r["rank"] for r in data["fallback"]] == list(range(1, len(plan.capacity.candidates) + 1))


def test_the_text_output_prints_the_fallback_order(capsys, monkeypatch):
    use(monkeypatch, single_gpu_lora_plan(profile=PINNED), FakeStock({A10: {"cn-shenzhen-e": "WithStock"}}))
    rc, out, _ = run(capsys)
    assert rc == 0 and "fallback order (`trainstack up` tries these in order):" in out
    assert f"1. {A10} in cn-shenzhen-e (on-demand, 1 node) [planned]: WithStock" in out


def test_out_of_stock_names_the_fallback_rows_too(capsys, monkeypatch):
    use(monkeypatch, single_gpu_lora_plan(profile=PINNED), FakeStock({A10: {"cn-shenzhen-e": "WithoutStock"}}))
    rc, out, _ = run(capsys, "--json")
    data = json.loads(out)
    assert rc == 3 and data["preflight"]["first_candidate_in_stock"] is False
    assert data["preflight"]["fallback"][0]["status"] == "WithoutStock"


def test_stack_checks_the_stacks_plan(capsys, monkeypatch):
    client = FakeStock({A10: {"cn-shenzhen-e": "WithStock"}})
    monkeypatch.setattr(ecs_api, "make_client", lambda region: client)
    rc = cli.main(["preflight", "--stack", "llama3-8b-lora", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert json.loads(out)["instance_type"] == A10


def test_neither_profile_nor_stack_is_exit_2(capsys):
    assert cli.main(["preflight"]) == 2
    assert "PROFILE path or --stack NAME" in capsys.readouterr().err
