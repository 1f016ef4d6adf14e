"""PAI-DLC as a user meets it: the simplest profile plans, quota jobs plan with pods, hours and a
deadline, Lingjun keeps PAI's NCCL preset, DLC prices come from the price book and are compared with
ECS honestly, and ``validate`` and ``plan`` agree on every DLC rule (issue 18's done-when)."""

from __future__ import annotations

import json
import pathlib
import textwrap

import pytest

from trainstack.catalog import loader
from trainstack.datafile import load_data_yaml
from trainstack.cli import main
from trainstack.errors import InfeasibleError
from trainstack.placement import resolve, resolve_all
from trainstack.profile import load_profile, parse_profile
from trainstack.reasons import ReasonCode
from trainstack.rules import planned

ROOT = pathlib.Path(__file__).resolve().parents[2]
LINGJUN = "ml.gu7xf.c96m1600.8-gu108"


@pytest.fixture(autouse=True)
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRAINSTACK_TODAY", "2026-03-01")


@pytest.fixture
def overlays(tmp_path, monkeypatch):
    """An overlay directory where a team states what its Lingjun spec is."""
    d = tmp_path / "overlays"
    d.mkdir()
    monkeypatch.setenv(loader.OVERLAY_DIR_ENV, str(d))
    loader.clear_cache()
    (d / "lingjun_specs.yaml").write_text(textwrap.dedent(f"""\
        lingjun_specs:
          - name: {LINGJUN}
            gpu_model: H20
            gpu_count: 8
            interconnect: nvswitch
            source: ListEcsSpecs of our account
            as_of: 2026-02-01
        """))
    yield d
    loader.clear_cache()


def write(tmp_path, name, doc) -> pathlib.Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")  # JSON is YAML
    return path


BASE = {"name": "dlc-job", "region": "cn-wulanchabu", "model": {"preset": "qwen2.5-7b"},
        "training": {"method": "lora", "precision": "bf16", "gradient_checkpointing": True, "tokens": 1e8}}


def quota(**over):
    doc = {**BASE, "model": {"preset": "llama-3-8b"},
           "training": {"method": "full", "precision": "bf16-mixed", "gradient_checkpointing": True,
                        "zero_stage": 3, "tokens": 3e9},
           "resources": {"target": "dlc", "gpu_models": ["A100-80G"], "deadline_hours": 24},
           "dlc": {"workspace_id": "ws-123", "resource_id": "quota-abc"}}
    for k, v in over.items():
        doc[k] = {**doc.get(k, {}), **v} if isinstance(v, dict) else v
    return doc


# ---- the simplest DLC profile ----------------------------------------------------------------------

def test_target_dlc_alone_plans_with_the_image_resolved_at_deploy_time(tmp_path, capsys):
    path = write(tmp_path, "p.yaml", {**BASE, "resources": {"target": "dlc"}})
    assert main(["plan", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    spec = doc["dlc_request"]["body"]["JobSpecs"][0]
    assert spec["Image"].startswith("(resolved at deploy time: newest official PAI pytorch-training GPU image")
    assert doc["plan"]["dlc"]["image"] is None and doc["plan"]["dlc"]["image_lookup"]["min_cuda"]
    assert spec["EcsSpec"] and spec["PodCount"] == 1
    assert main(["validate", str(path)]) == 0


def test_a_pinned_tag_or_image_still_wins():
    p = parse_profile({**BASE, "resources": {"target": "dlc"}, "dlc": {"image_tag": "2.3-gpu-py311-cu121-u22"}})
    assert resolve(p).dlc.image.endswith("/pai/pytorch-training:2.3-gpu-py311-cu121-u22")
    p = parse_profile({**BASE, "resources": {"target": "dlc"}, "job": {"image": "registry-vpc.x/team/img:1"}})
    d = resolve(p).dlc
    assert (d.image, d.image_lookup, d.image_is_default) == ("registry-vpc.x/team/img:1", None, False)


# ---- quota jobs ------------------------------------------------------------------------------------

def test_a_quota_job_plans_with_pod_resources_hours_and_a_checked_deadline(tmp_path, capsys):
    path = write(tmp_path, "q.yaml", quota())
    assert main(["plan", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    plan, spec = doc["plan"], doc["dlc_request"]["body"]["JobSpecs"][0]
    assert plan["estimated_hours"] <= 24 and plan["dlc"]["resource_id"] == "quota-abc"
    cfg = spec["ResourceConfig"]
    assert int(cfg["GPU"]) == plan["gpus_per_node"] and int(cfg["CPU"]) > 0 and cfg["Memory"].endswith("Gi")
    assert any(lab.startswith("pod CPU and memory default: the GPU share") for lab in plan["labels"])
    # the deadline is checked: one pod of 8 would take longer than 24 h, so the plan uses more
    looser = planned(parse_profile(quota(resources={"deadline_hours": None})))
    assert looser.estimated_hours > 24 and looser.nodes < plan["nodes"]
    with pytest.raises(InfeasibleError) as err:
        resolve(parse_profile(quota(resources={"deadline_hours": 1, "max_nodes": 1})))
    assert "deadline" in err.value.message and "checkpointing" not in err.value.message


def test_fp8_on_an_a100_quota_names_fp8_and_suggests_bf16():
    with pytest.raises(InfeasibleError) as err:
        resolve(parse_profile(quota(training={"precision": "fp8-mixed"})))
    assert "has no FP8" in err.value.message and "checkpointing" not in err.value.message
    assert err.value.details["reason_codes"] == [ReasonCode.NO_FP8.value]
    assert any(s.startswith("train in BF16 with fp32 master weights (training.precision: bf16-mixed): ")
               for s in err.value.suggestions)
    assert not any("LoRA" in s for s in err.value.suggestions if "checkpointing" in s)


def test_quota_spec_sets_the_node_and_the_pod_share():
    plan = resolve(parse_profile(quota(resources={"gpu_models": [], "gpus": 4, "deadline_hours": None},
                                       dlc={"quota_spec": "ecs.ebmgn7ex.32xlarge"})))
    assert (plan.dlc.pod_count, plan.dlc.gpus_per_pod) == (1, 4)
    assert (plan.dlc.cpu_per_pod, plan.dlc.memory_gib_per_pod) == (64, 512)  # half of 128 vCPU / 1,024 GiB
    assert plan.dlc.quota_kind == "general" and plan.gpu_model == "A100-80G"


def test_a_quota_price_is_per_gpu_hour_from_the_price_book(tmp_path):
    (tmp_path / "prices.yaml").write_text("prices:\n  - {region: cn-wulanchabu, resource_id: quota-abc, "
                                          "on_demand_cny_per_hour: 12.5, as_of: 2026-01-01, source: finance}\n")
    doc = quota(price_book="prices.yaml")
    plan = planned(load_profile(write(tmp_path, "q.yaml", doc)))
    assert plan.hourly_cost_cny == pytest.approx(12.5 * plan.total_gpus)
    assert plan.total_cost_cny == pytest.approx(plan.hourly_cost_cny * plan.estimated_hours, rel=1e-3)
    assert (plan.prices.source, plan.prices.per, plan.prices.service) == ("price-book", "GPU", "dlc-quota")


# ---- Lingjun ---------------------------------------------------------------------------------------

def test_lingjun_plans_with_rdma_and_pais_nccl_preset_left_alone(overlays):
    p = parse_profile(quota(model={"preset": "llama-3-70b"}, resources={"gpu_models": [], "gpus": 32,
                                                                         "deadline_hours": None},
                            dlc={"quota_spec": LINGJUN}, job={"env": {"NCCL_DEBUG": "WARN"}}))
    plan = planned(p)
    d = plan.dlc
    assert d.quota_kind == "lingjun" and d.enable_rdma and d.nccl_preset == "lingjun-default"
    assert (d.pod_count, d.gpus_per_pod, plan.gpu_model) == (4, 8, "H20")
    assert not any(k.startswith("NCCL_IB") for k in d.envs)  # never the eRDMA set on Lingjun's mlx5 network
    from trainstack import dlc_job

    inputs = dlc_job.job_inputs(plan)
    assert inputs["envs"] == {"NCCL_DEBUG": "WARN"} and inputs["enable_rdma"] is True
    assert (inputs["cpu_per_pod"], inputs["memory_gib_per_pod"]) == (96, 1600)  # read from the spec's name
    assert any("as the team states it" in lab for lab in plan.labels)
    assert any("PAI's NCCL preset left alone" in lab for lab in plan.labels)


def test_lingjun_facts_have_sources():
    from trainstack.catalog import dlc_facts

    tags = {row["tag"] for row in load_data_yaml(loader.DATA_DIR / "sources.yaml")}
    facts = dlc_facts()
    assert all(set(s.sources) <= tags and s.nccl_preset == "lingjun-default" for s in facts.lingjun_specs)
    preset = facts.preset("lingjun-default")
    assert preset.source in tags and preset.env["NCCL_IB_HCA"] == "mlx5" and "NCCL_IB_HCA" in preset.keep


# ---- validate and plan agree on every DLC rule ----------------------------------------------------

RULES = [
    ("quota without a workspace", quota(dlc={"workspace_id": None}), "dlc.resource_id", "needs dlc.workspace_id"),
    ("unknown quota spec", quota(dlc={"quota_spec": "ecs.gn7e-c16g1.16xlrge"}), "dlc.quota_spec",
     "not an ECS type of the catalog or a Lingjun spec"),
    ("Lingjun spec nobody stated", quota(dlc={"quota_spec": "ml.gu8xf.8xlarge-gu108"}), "dlc.quota_spec",
     "Alibaba documents no GPU model"),
    ("pod fields without a quota", {**BASE, "resources": {"target": "dlc"}, "dlc": {"cpu_per_pod": 8}}, "dlc",
     "apply to a resource quota job"),
    ("pod larger than the node", quota(resources={"gpu_models": [], "gpus": 8, "deadline_hours": None},
                                       dlc={"quota_spec": "ecs.ebmgn7ex.32xlarge", "cpu_per_pod": 200}),
     "dlc.cpu_per_pod", "more than one ecs.ebmgn7ex.32xlarge node's 128 vCPU"),
    ("no image to look up for TFJob", {**BASE, "resources": {"target": "dlc"}, "dlc": {"job_type": "TFJob"}},
     "dlc.job_type", "no official image is looked up for TFJob"),
    ("secrets on DLC", {**BASE, "resources": {"target": "dlc"}, "job": {"secrets": {"HF_TOKEN": {"kms_secret": "t"}}}},
     "job.secrets", "works on ECS nodes only"),
]


@pytest.mark.parametrize("what, doc, path, words", RULES, ids=[r[0] for r in RULES])
def test_validate_and_plan_refuse_the_same_way(tmp_path, capsys, what, doc, path, words):
    profile = write(tmp_path, "p.yaml", doc)
    errors = []
    for command in ("validate", "resolve", "plan"):
        assert main([command, str(profile)]) == 2, command
        errors.append(capsys.readouterr().err)
    assert words in errors[0] and f": {path}" in errors[0], errors[0]
    first = errors[0].splitlines()[0]
    assert all(first in e for e in errors), errors


def test_lingjun_rules_with_the_overlay(overlays, tmp_path, capsys):
    erdma = quota(resources={"gpu_models": [], "gpus": 16}, dlc={"quota_spec": LINGJUN},
                  job={"env": {"NCCL_IB_HCA": "erdma"}})
    path = write(tmp_path, "lj.yaml", erdma)
    for command in ("validate", "plan"):
        assert main([command, str(path)]) == 2
        err = capsys.readouterr().err
        assert "job.env.NCCL_IB_HCA: PAI presets NCCL_IB_HCA=mlx5" in err and "allowed: mlx5" in err
    (overlays / "lingjun_specs.yaml").write_text("lingjun_specs:\n  - {name: ml.gu7xf.c96m1600.8-gu10, gpu_model: "
                                                 "H2O, gpu_count: 8, interconnect: nvlink, source: x, as_of: 2026-01-01}\n")
    assert main(["validate", str(write(tmp_path, "ok.yaml", quota(dlc={"quota_spec": LINGJUN})))]) == 2
    err = capsys.readouterr().err
    assert "lingjun_specs.yaml: lingjun_specs[0].name: not a Lingjun spec" in err and "lingjun_specs[0].gpu_model" in err


# ---- DLC prices and the honest comparison with ECS -------------------------------------------------

def test_dlc_cost_from_the_price_book_compared_with_ecs(tmp_path, capsys):
    auto = {**BASE, "region": "cn-shenzhen", "resources": {"target": "auto", "gpus": 1, "spot": "never"},
            "dlc": {"workspace_id": "ws-123"}}
    spec = resolve(parse_profile(auto)).dlc.ecs_spec
    (tmp_path / "prices.yaml").write_text(
        f"prices:\n  - {{region: cn-shenzhen, dlc_spec: {spec}, on_demand_cny_per_hour: 6.0, as_of: 2026-02-01, "
        "source: PAI console job creation}\n")
    path = write(tmp_path, "auto.yaml", {**auto, "price_book": "prices.yaml"})
    plan = planned(load_profile(path))
    assert plan.target == "dlc" and plan.hourly_cost_cny == 6.0 and plan.total_cost_cny is not None
    assert plan.prices.source == "price-book" and plan.prices.service == "dlc"
    (compare,) = [lab for lab in plan.labels if lab.startswith("cost: best ECS plan")]
    assert f"vs DLC {plan.total_cost_cny:,.2f} CNY" in compare and "cheaper by" in compare
    assert "`target: auto`" in compare
    assert main(["resolve", str(path), "--all", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    targets = {c["target"] for c in doc["considered"] if c["feasible"] and c["total_cost_cny"] is not None}
    assert targets == {"ecs", "dlc"}  # both sides, each at a known cost
    assert main(["resolve", str(path), "--all"]) == 0
    table = capsys.readouterr().out
    assert "dlc     " in table and "ecs     " in table


def test_dlc_budget_is_checked_against_a_known_dlc_price(tmp_path):
    (tmp_path / "prices.yaml").write_text(
        "prices:\n  - {region: cn-shenzhen, dlc_spec: ecs.gn7i-c8g1.2xlarge, on_demand_cny_per_hour: 80, "
        "as_of: 2026-02-01, source: console}\n")
    doc = {**BASE, "region": "cn-shenzhen", "price_book": "prices.yaml",
           "training": {**BASE["training"], "sequence_length": 1024},
           "resources": {"target": "dlc", "gpus": 1, "max_hourly_cost": 50}}
    plan = planned(load_profile(write(tmp_path, "b.yaml", doc)))
    assert plan.dlc.ecs_spec != "ecs.gn7i-c8g1.2xlarge"  # over budget at its DLC price: another spec runs it
    unpriced = resolve_all(parse_profile({**doc, "price_book": None}))
    assert unpriced.plan.dlc.ecs_spec == "ecs.gn7i-c8g1.2xlarge" and unpriced.plan.hourly_cost_cny is None


# ---- suggestions respect the method -----------------------------------------------------------------

def test_a_public_limit_failure_suggests_a_quota_or_ecs_with_their_plans_and_never_lora_for_pretraining():
    p = parse_profile({**BASE, "region": "cn-shenzhen", "model": {"preset": "llama-3-8b"},
                       "training": {"method": "pretrain", "precision": "bf16-mixed", "gradient_checkpointing": True,
                                    "zero_stage": 3, "tokens": 1e9},
                       "resources": {"target": "dlc", "gpus": 8}})
    with pytest.raises(InfeasibleError) as err:
        resolve(p)
    assert "public-resource spec fits within 2 GPUs and 8 vCPU" in err.value.message
    s = err.value.suggestions
    assert any(x.startswith("use a PAI resource quota") and "pod(s) x 8 A100-80G per pod" in x for x in s), s
    assert any(x.startswith("run on ECS GPU nodes (resources.target: ecs): 1 x ecs.") for x in s), s
    assert any("dlc.public_limits_raised: true" in x for x in s), s
    assert not any("LoRA" in x or "lora" in x for x in s)
