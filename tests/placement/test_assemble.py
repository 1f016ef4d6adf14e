"""The one Plan assembler: both targets through it, every problem collected, RDMA decided once."""

from __future__ import annotations

import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainstack.errors import InfeasibleError, InputError
from trainstack.placement import assemble_ecs, resolve, resolve_all
from trainstack.placement.assembly import Collector
from trainstack.profile import parse_profile
from trainstack.reasons import ReasonCode
from trainstack.rules import planned

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = {"name": "asm", "region": "cn-shenzhen", "model": {"preset": "qwen2.5-7b"},
        "training": {"method": "lora", "precision": "bf16", "gradient_checkpointing": True, "tokens": 1e8},
        "job": {"command": "python train.py"}}


def _profile(**over):
    return parse_profile({**BASE, **over}, file="asm.yaml")


def _quota(gpus, rdma=None, spec=None):
    dlc = {"workspace_id": "ws-1", "resource_id": "quota-abc", "enable_rdma": rdma, "quota_spec": spec}
    return _profile(region="cn-wulanchabu", resources={"target": "dlc", "gpus": gpus, "gpu_models": ["A100-80G"]},
                    dlc={k: v for k, v in dlc.items() if v is not None},
                    job={"command": "python train.py", "image": "registry-vpc.cn-wulanchabu.aliyuncs.com/t/x:v1"})


def test_the_collector_keeps_every_failing_step():
    c = Collector()

    def fail(message):
        raise InputError(message)

    assert c.run(lambda: 1, "a") == 1 and c.error() is None
    assert c.run(lambda: fail("network: no room"), "network") is None
    assert c.error().message == "network: no room"
    c.run(lambda: fail("storage: too big"), "storage")
    err = c.error()
    assert [(p.path, p.message) for p in err.problems] == [("network", "network: no room"),
                                                          ("storage", "storage: too big")]
    assert err.message == "network: no room (and 1 more)"


def test_every_problem_of_a_plan_is_reported_at_once_in_the_profiles_file(monkeypatch):
    def broken(what):
        def step(*args, **kwargs):
            raise InputError(f"{what} cannot be laid out (test)")
        return step

    monkeypatch.setattr(assemble_ecs, "candidate_storage", broken("storage"))
    monkeypatch.setattr(assemble_ecs, "plan_image", broken("image"))
    profile = _profile(resources={"target": "ecs", "gpus": 1})
    with pytest.raises(InputError) as info:
        resolve(profile)
    assert {p.path for p in info.value.problems} == {"storage", "image"}
    with pytest.raises(InputError) as info:
        planned(profile, file="asm.yaml")
    assert info.value.exit_code == 2 and {p.file for p in info.value.problems} == {"asm.yaml"}


def test_both_targets_get_the_layout_the_engine_searched():
    for profile in (_profile(resources={"target": "ecs", "gpus": 1}), _quota(8)):
        plan = resolve(profile)
        chosen = [o for o in plan.parallelism.considered if o.chosen]
        assert [o.layout for o in chosen] == [plan.parallelism.layout] == [plan.job.parallel]
        assert any(r.startswith(f"layout {plan.parallelism.layout.label}") for r in plan.reasons)


@settings(max_examples=12, derandomize=True, deadline=None)
@given(gpus=st.sampled_from([8, 16, 24, 32, "auto"]), rdma=st.sampled_from([None, True, False]),
       spec=st.sampled_from([None, "ecs.ebmgn7ex.32xlarge", "ecs.gn7e-c16g1.32xlarge"]))
def test_several_pods_always_get_rdma_and_false_is_refused_by_the_engine(gpus, rdma, spec):
    """Decided once: a multi-pod plan has RDMA on (what multi-node-requires-rdma asks), and
    ``enable_rdma: false`` never plans several pods: those candidates are rejected with a typed reason."""
    profile = _quota(gpus, rdma, spec)
    try:
        res = resolve_all(profile)
    except InfeasibleError as exc:
        assert exc.details["reason_codes"]
        return
    plan = res.plan
    assert plan.dlc is not None
    if plan.dlc.pod_count > 1:
        assert plan.dlc.enable_rdma and rdma is not False
    for c in res.candidates:
        if c.target == "dlc" and c.nodes > 1 and rdma is False:
            assert not c.feasible and c.reason_code == ReasonCode.MULTI_NODE_WITHOUT_RDMA


def test_public_resources_refuse_two_pods_without_rdma_too():
    profile = _profile(resources={"target": "dlc", "gpus": 2}, dlc={"enable_rdma": False, "public_limits_raised": True},
                       job={"command": "python train.py", "image": "registry-vpc.cn-shenzhen.aliyuncs.com/t/x:v1"})
    res = resolve_all(profile)
    assert res.plan.dlc.pod_count == 1  # one 2-GPU pod, never two 1-GPU pods
    two = [c for c in res.candidates if c.target == "dlc" and c.nodes == 2]
    assert two and all(c.reason_code == ReasonCode.MULTI_NODE_WITHOUT_RDMA for c in two)
