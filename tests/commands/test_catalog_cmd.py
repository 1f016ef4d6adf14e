"""`trainstack catalog [show]`: table, filters, JSON, price age, errors; and the text-table renderer."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest

from trainstack import cli
from trainstack.commands import catalog as catalog_cmd
from trainstack.textable import display_width, render_table


@pytest.fixture(autouse=True)
def fresh_prices(monkeypatch):
    """Pretend today is ten days after the snapshot unless a test says otherwise."""
    monkeypatch.setattr(catalog_cmd, "_today", lambda: dt.date(2024, 11, 17))


def run(capsys, *argv):
    rc = cli.main(["catalog", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *argv):
    rc, out, err = run(capsys, *argv, "--json")
    assert rc == 0, err
    return json.loads(out), err


def table_rows(out: str) -> list[list[str]]:
    """Rows of the printed table: lines that carry an ecs.* type, split on 2+ spaces."""
    return [re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if " ecs." in line]


# ---- the table ---------------------------------------------------------------------------------

def test_default_table_lists_training_types_with_prices(capsys):
    rc, out, err = run(capsys)
    assert rc == 0
    assert err == ""  # prices are 10 days old here: no warning
    header = next(line for line in out.splitlines() if line.startswith("GPU ") and "QTY" in line)
    for col in ("QTY", "INSTANCE TYPE", "GiB/GPU", "vCPU", "RAM GiB", "INTERCONNECT", "RDMA", "BOOT",
                "ON-DEMAND", "SPOT"):
        assert col in header
    assert "cn-shenzhen" in out and "2024-11-07" in out and "10 days old" in out
    rows = {r[2]: r for r in table_rows(out)}
    a10 = rows["ecs.gn7i-c8g1.2xlarge"]
    assert a10[:7] == ["A10", "1", "ecs.gn7i-c8g1.2xlarge", "21.99", "8", "30", "PCIe"]
    assert a10[8] == "-" and a10[9] == "9.53" and a10[10] == "~4.77 (est.)"  # boot mode not stated
    # the boot mode a family doc states, with its source tag (issue 35: ebmgn7ix boots UEFI only)
    assert rows["ecs.ebmgn7ix.32xlarge"][8] == "UEFI [EBM-ZH]" and rows["ecs.ebmgn7ex.32xlarge"][8] == "UEFI [EBM-ZH]"
    assert "BOOT: the boot mode the family doc states" in out
    assert rows["ecs.gn7e-c16g1.32xlarge"][6] == "NVLink"
    assert rows["ecs.gn7-c13g1.26xlarge"][6] == "NVSwitch"
    assert rows["ecs.ebmgn7ex.32xlarge"][7] == "eRDMA 160G"
    # non-training families only with --all
    assert "ecs.gn7r-c16g1.4xlarge" not in rows and "ecs.gn5i-c2g1.large" not in rows
    assert "ecs.gn9gc.4xlarge" not in rows and "ecs.gn8ia.8xlarge" not in rows


def test_unknown_is_a_dash_never_zero(capsys):
    rc, out, _ = run(capsys, "--all")
    assert rc == 0
    for row in table_rows(out):
        for cell in row[3:11]:
            assert not re.fullmatch(r"~?0(\.0+)?\*?( \(est\.\))?", cell), row
    gn7s = {r[2]: r for r in table_rows(out)}["ecs.gn7s-c8g1.2xlarge"]
    assert gn7s[9] == "-" and gn7s[10] == "-"  # no price anywhere for gn7s (A30)
    gn8ia = {r[2]: r for r in table_rows(out)}["ecs.gn8ia.8xlarge"]
    assert gn8ia[0] == "-" and gn8ia[4] == "-" and gn8ia[5] == "-"


def test_show_is_the_default_action(capsys):
    assert run(capsys) == run(capsys, "show")
    _, before, _ = run(capsys, "--gpu", "A10", "show")
    _, after, _ = run(capsys, "show", "--gpu", "A10")
    assert before == after and {r[0] for r in table_rows(after)} == {"A10"}


def test_all_includes_non_training_families(capsys):
    _, out, _ = run(capsys, "--all")
    rows = {r[2]: r for r in table_rows(out)}
    assert {"ecs.gn7r-c16g1.4xlarge", "ecs.gn8ia.8xlarge", "ecs.gn9gc.4xlarge", "ecs.gn5i-c2g1.large"} <= set(rows)
    assert "not for training" in rows["ecs.gn7r-c16g1.4xlarge"][-1]
    assert not any(r[2].startswith(("ecs.sgn", "ecs.vgn")) for r in table_rows(out))


# ---- filters -----------------------------------------------------------------------------------

def test_gpu_filter(capsys):
    data, _ = run_json(capsys, "--gpu", "A10")
    assert data["rows"] and {r["gpu"] for r in data["rows"]} == {"A10"}
    assert {r["family"] for r in data["rows"]} == {"gn7i", "ebmgn7i", "ebmgn7ix"}
    data, _ = run_json(capsys, "--gpu", "a100")  # a bare family name selects both A100s
    assert {r["gpu"] for r in data["rows"]} == {"A100-40G", "A100-80G"}
    data, _ = run_json(capsys, "--gpu", "T4,V100-32G")
    assert {r["gpu"] for r in data["rows"]} == {"T4", "V100-32G"}
    data, _ = run_json(capsys, "--gpu", "NVIDIA A100 80GB")
    assert {r["gpu"] for r in data["rows"]} == {"A100-80G"}


def test_gpu_sold_nowhere_gives_an_empty_table(capsys):
    rc, out, _ = run(capsys, "--gpu", "H100")
    assert rc == 0 and "No instance types match" in out and "estimates only" in out
    assert table_rows(out) == []


def test_min_gpu_memory_filter_uses_memory_as_sold(capsys):
    # users ask for "80 GB cards": an A100 80 GB (79.35 GiB usable) must be listed
    data, _ = run_json(capsys, "--min-gpu-memory", "80")
    assert data["rows"] and "A100-80G" in {r["gpu"] for r in data["rows"]}
    assert not {"A100-40G", "A10", "L20"} & {r["gpu"] for r in data["rows"]}
    data, _ = run_json(capsys, "--min-gpu-memory", "40")
    assert {"A100-40G", "A100-80G", "L20", "H20"} <= {r["gpu"] for r in data["rows"]}
    assert "A10" not in {r["gpu"] for r in data["rows"]}


def test_interconnect_filter(capsys):
    data, _ = run_json(capsys, "--interconnect", "nvlink", "--interconnect", "nvswitch")
    assert {r["interconnect"] for r in data["rows"]} == {"nvlink", "nvswitch"}
    assert all(r["multi_gpu_training_ok"] for r in data["rows"])
    data, _ = run_json(capsys, "--interconnect", "pcie")
    assert all(not r["multi_gpu_training_ok"] for r in data["rows"])
    assert "ecs.gn7i-8x.32xlarge" in {r["instance_type"] for r in data["rows"]}


def test_filters_combine(capsys):
    data, _ = run_json(capsys, "--gpu", "A100-80G", "--interconnect", "nvlink", "--region", "cn-hongkong")
    names = {r["instance_type"] for r in data["rows"]}
    assert "ecs.gn7e-c16g1.32xlarge" in names and "ecs.sccgn7ex.32xlarge" not in names


# ---- JSON and prices ---------------------------------------------------------------------------

def test_json_output(capsys):
    data, err = run_json(capsys)
    assert err == ""
    assert data["region"] == "cn-shenzhen" and data["price_date"] == "2024-11-07"
    assert data["price_age_days"] == 10 and data["prices_stale"] is False
    assert data["spot_estimate_fraction"] == 0.5 and data["count"] == len(data["rows"])
    row = next(r for r in data["rows"] if r["instance_type"] == "ecs.gn7e-c16g1.4xlarge")
    assert row["gpu"] == "A100-80G" and row["usable_gib_per_gpu"] == pytest.approx(79.15)
    assert row["on_demand_cny_per_hour"] == pytest.approx(34.742)
    assert row["spot_estimated"] is True and row["spot_cny_per_hour"] == pytest.approx(17.371)
    assert row["seen_in_region"] is True and row["zones"]
    for r in data["rows"]:
        assert r["on_demand_cny_per_hour"] is None or r["on_demand_cny_per_hour"] > 0
        assert r["spot_cny_per_hour"] is None or r["spot_cny_per_hour"] > 0


def test_borrowed_price_is_labelled(capsys):
    # ebmgn7ex has no cn-shanghai row in the 2024-11 snapshot (every A10 type has one now)
    data, _ = run_json(capsys, "--region", "cn-shanghai", "--gpu", "A100-80G")
    row = next(r for r in data["rows"] if r["instance_type"] == "ecs.ebmgn7ex.32xlarge")
    assert row["on_demand_from_region"] and row["on_demand_from_region"].startswith("cn-")
    assert row["seen_in_region"] is False
    assert any("estimated from" in label for label in row["labels"])
    _, out, _ = run(capsys, "--region", "cn-shanghai", "--gpu", "A100-80G")
    cell = {r[2]: r for r in table_rows(out)}["ecs.ebmgn7ex.32xlarge"][9]
    assert cell.endswith("*")
    assert "median of the other mainland-China regions" in out


def test_stale_prices_warn_on_stderr(capsys, monkeypatch):
    monkeypatch.setattr(catalog_cmd, "_today", lambda: dt.date(2025, 11, 7))
    rc, out, err = run(capsys)
    assert rc == 0 and "365 days old" in out
    assert "warning" in err and "365 days old" in err and "catalog refresh" in err
    data, err = run_json(capsys)
    assert data["prices_stale"] is True and "warning" in err
    rc, _, err = run(capsys, "--max-age-days", "400")
    assert rc == 0 and err == ""
    monkeypatch.setattr(catalog_cmd, "_today", lambda: dt.date(2024, 11, 17))
    rc, _, err = run(capsys, "--max-age-days", "5")
    assert rc == 0 and "10 days old" in err


# ---- user mistakes: exit 2 with "did you mean" --------------------------------------------------

def test_unknown_gpu_exits_2_with_did_you_mean(capsys):
    rc, out, err = run(capsys, "--gpu", "A1O")
    assert rc == 2 and out == ""
    assert "unknown GPU model" in err and "did you mean" in err and "'A10'" in err
    rc, out, _ = run(capsys, "--gpu", "l40", "--json")
    assert rc == 2
    problem = json.loads(out)["problems"][0]
    assert problem["path"] == "--gpu" and "L40S" in problem["did_you_mean"]


def test_unknown_region_exits_2_with_did_you_mean(capsys):
    rc, _, err = run(capsys, "--region", "cn-shenzen")
    assert rc == 2 and "unknown region" in err and "did you mean 'cn-shenzhen'" in err


def test_bad_flags_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["catalog", "--interconnect", "infiniband"])
    assert exc.value.code == 2
    rc, _, err = run(capsys, "--min-gpu-memory", "-1")
    assert rc == 2 and "--min-gpu-memory" in err


def test_refresh_has_a_place_to_plug_in():
    assert "refresh" in catalog_cmd.ACTIONS


# ---- textable ------------------------------------------------------------------------------------

def test_render_table_aligns_columns():
    text = render_table(["GPU", "QTY", "NOTE"], [["A10", 1, None], ["A100-80G", 8, "nvlink"]], align="lr")
    assert text.splitlines() == [
        "GPU       QTY  NOTE",
        "A10         1",
        "A100-80G    8  nvlink",
    ]


def test_render_table_centre_short_rows_and_errors():
    text = render_table(["A", "B"], [["x"], ["long", "yy"]], align="cl")
    assert text.splitlines() == [" A    B", " x", "long  yy"]
    assert render_table(["only"], []) == "only"
    with pytest.raises(ValueError):
        render_table(["a"], [["1", "2"]])
    with pytest.raises(ValueError):
        render_table(["a"], [["1"]], align="x")


def test_render_table_counts_wide_characters():
    assert display_width("华北2") == 5
    text = render_table(["region", "n"], [["华北2", "1"], ["cn-x", "2"]])
    first, second = text.splitlines()[1:]
    assert display_width(first.split("  ")[0] + "  ") == display_width("华北2  ")
    assert first.endswith("1") and second.endswith("2")
    assert display_width(first) == display_width(second)


# ---- the team's price book ------------------------------------------------------------------------

def test_price_book_prices_are_marked_as_the_teams_and_its_pai_prices_listed(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINSTACK_TODAY", "2024-12-01")
    book = tmp_path / "prices.yaml"
    book.write_text("prices:\n"
                    "  - {region: cn-beijing, instance_type: ecs.gn8v-8x.48xlarge, on_demand_cny_per_hour: 160,"
                    " spot_cny_per_hour: 48, as_of: 2024-11-20, source: account manager}\n"
                    "  - {region: cn-wulanchabu, resource_id: quota1a2b, on_demand_cny_per_hour: 19.5,"
                    " as_of: 2024-11-01, source: subscription / 730 h}\n")
    rc, out, err = run(capsys, "--region", "cn-beijing", "--gpu", "H20", "--price-book", str(book))
    assert rc == 0, err
    row = next(r for r in table_rows(out) if r[2] == "ecs.gn8v-8x.48xlarge")
    assert row[9] == "160.00+" and row[10] == "48.00"  # spot from the book: never "est."
    assert "+: the team's price from price book" in out
    assert "quota1a2b" in out and "subscription / 730 h" in out and "GPU" in out
    doc, _ = run_json(capsys, "--region", "cn-beijing", "--gpu", "H20", "--price-book", str(book))
    gn8v = next(r for r in doc["rows"] if r["instance_type"] == "ecs.gn8v-8x.48xlarge")
    assert gn8v["price_source"] == "price-book" and gn8v["price_as_of"] == "2024-11-20"
    assert {e["kind"] for e in doc["price_book"]["entries"]} == {"instance_type", "resource_id"}
    book.write_text("prices:\n  - {region: cn-beijing}\n")
    rc, _, err = run(capsys, "--price-book", str(book))
    assert rc == 2 and "prices[0]" in err
