"""Names a profile takes from the catalog (trainstack.rules.check_profile) and the catalog flags a real
resolved plan uses (LowLatency deployment sets): the user-facing side of the catalog data."""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from trainstack.catalog import load_catalog, service_limits
from trainstack.cli import main
from trainstack.errors import InputError
from trainstack.profile import parse_profile
from trainstack.placement import resolve
from trainstack.rules import check_profile as check_catalog_names

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = {"name": "p", "region": "cn-shenzhen", "model": {"preset": "llama-3-8b"},
        "training": {"method": "lora", "precision": "bf16-mixed"}}


def profile(**resources):
    return parse_profile({**BASE, "resources": resources})


def problems_of(**resources):
    with pytest.raises(InputError) as exc:
        check_catalog_names(profile(**resources), load_catalog(), file="p.yaml")
    return exc.value.problems


@pytest.mark.parametrize("name,suggest", [("H800", "H20"), ("h100", "H20"), ("H200", "H20"), ("L40S", "L20")])
def test_estimate_only_gpus_are_not_sold_on_ecs(name, suggest):
    (p,) = problems_of(gpu_models=[name])
    assert p.path == "resources.gpu_models[0]" and p.file == "p.yaml"
    assert "not sold on Alibaba ECS" in p.message and p.suggestions[0] == suggest
    assert "H800" not in p.allowed and "H20" in p.allowed  # allowed lists sold GPUs only
    assert "did you mean" in p.render()


def test_unknown_gpu_suggests_only_sold_gpus():
    (p,) = problems_of(gpu_models=["A100-80"])
    assert p.message == "unknown GPU model" and "A100-80G" in p.suggestions
    sold = {g.name for g in load_catalog().gpus.values() if not g.estimate_only}
    assert set(p.suggestions) <= sold


def test_sold_gpus_and_known_types_pass_and_report_regions_as_warnings():
    cat = load_catalog()
    ok = profile(gpu_models=["a100-80g", "L20"], instance_types=["ecs.gn7i-c8g1.2xlarge"])
    assert check_catalog_names(ok, cat) == []
    # ebmgn7ex was not seen offered in cn-shanghai: a warning, not an error
    away = parse_profile({**BASE, "region": "cn-shanghai", "resources": {"instance_types": ["ecs.ebmgn7ex.32xlarge"]}})
    (w,) = check_catalog_names(away, cat, file="p.yaml")
    assert w.path == "resources.instance_types[0]" and "not seen offered in cn-shanghai" in w.message
    assert w.file == "p.yaml"


def test_instance_types_no_sold_type_matches_are_errors_with_same_family_suggestions():
    typo, excluded = problems_of(instance_types=["ecs.gn7-xlarge", "ecs.sgn7i-vws-m2.xlarge"])
    assert typo.path == "resources.instance_types[0]" and typo.message == "unknown instance type"
    assert typo.suggestions and all(s.startswith("ecs.gn7-") for s in typo.suggestions)
    assert excluded.path == "resources.instance_types[1]" and "vGPU slice" in excluded.message


def test_validate_exits_2_for_h800_and_warns_for_a_region(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**BASE, "resources": {"gpu_models": ["H800"]}}))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not sold on Alibaba ECS" in err and "did you mean 'H20'" in err and "bad.yaml" in err
    warn = tmp_path / "warn.yaml"
    warn.write_text(yaml.safe_dump({**BASE, "region": "cn-shanghai",
                                    "resources": {"instance_types": ["ecs.ebmgn7ex.32xlarge"]}}))
    assert main(["validate", str(warn), "--json"]) == 0
    out, err = capsys.readouterr()
    assert "warning:" in err and "not seen offered in cn-shanghai" in err
    assert json.loads(out)["warnings"][0]["path"] == "resources.instance_types[0]"


def test_resolve_refuses_h800_with_the_same_message(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**BASE, "resources": {"gpu_models": ["H800"]}}))
    assert main(["resolve", str(bad)]) == 2
    assert "not sold on Alibaba ECS" in capsys.readouterr().err


# ---- a real resolved plan reaches the deployment-set path ------------------------------------------------

def test_the_70b_sample_stack_uses_a_low_latency_deployment_set():
    doc = yaml.safe_load((ROOT / "stacks" / "profiles" / "llama3-70b-full.yaml").read_text(encoding="utf-8"))
    plan = resolve(parse_profile(doc))
    fam = load_catalog().instance(plan.instance_type).family
    assert plan.nodes > 1 and fam.name == "ebmgn7ex" and fam.deployment_set_low_latency
    assert plan.network.deployment_set == "LowLatency"
    limit = service_limits().number("ecs.deployment_set.low_latency.max_instances")
    assert plan.network.deployment_set_groups == -(-plan.nodes // limit)


def test_spot_plans_on_low_latency_families_get_no_set():
    doc = yaml.safe_load((ROOT / "stacks" / "profiles" / "llama3-70b-full.yaml").read_text(encoding="utf-8"))
    doc["resources"] = {**doc["resources"], "spot": "require"}
    plan = resolve(parse_profile(doc))
    assert plan.instance_type == "ecs.ebmgn7ex.32xlarge" and plan.nodes > 1
    assert service_limits().value("ecs.deployment_set.spot_instances_allowed") is False
    assert plan.network.deployment_set is None
    assert any("spot instances in a deployment set" in n for n in plan.network.notes)
