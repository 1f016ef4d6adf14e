"""The deploy-time lookups of a DLC job: which official image is chosen, and what a quota can run."""

from __future__ import annotations

import pytest
from alibabacloud_paistudio20220112 import models as ps

from trainstack.cloud.dlc_images import choose_image, default_workspace_client
from trainstack.cloud.dlc_quota import default_quota_client, quantity, quota_problems

LOOKUP = {"labels": ["system.official=true"], "name": "pytorch", "repository": "pytorch-training",
          "min_cuda": "11.8", "architecture": "hopper"}
REPO = "dsw-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/pai"


def img(tag, created="2025-01-01", repo="pytorch-training"):
    return {"ImageUri": f"{REPO}/{repo}:{tag}", "GmtCreateTime": created}


@pytest.mark.parametrize("images, chosen", [
    ([img("2.1-gpu-py310-cu121-ubuntu22.04"), img("2.3-gpu-py311-cu124-ubuntu22.04")], "2.3-gpu-py311-cu124-ubuntu22.04"),
    # CUDA 11.7 cannot build for Hopper; 11.8 can
    ([img("2.0-gpu-py310-cu117-ubuntu20.04"), img("1.13-gpu-py39-cu118-ubuntu20.04")], "1.13-gpu-py39-cu118-ubuntu20.04"),
    # same framework version: the newer CUDA, then the newer image
    ([img("2.3-gpu-py311-cu121-u22", "2025-01-01"), img("2.3-gpu-py311-cu124-u22", "2024-01-01")], "2.3-gpu-py311-cu124-u22"),
    ([img("2.3-gpu-py311-cu121-u22", "2024-01-01"), img("2.3-gpu-py310-cu121-u22", "2025-01-01")], "2.3-gpu-py310-cu121-u22"),
    # CPU builds, variants, other repositories and untagged images are never the default
    ([img("2.5-cpu-py311-ubuntu22.04"), img("2.5-accl-gpu-py311-cu124-u22"), img("2.5-gpu-py311-cu124-u22",
      repo="pytorch-inference"), {"ImageUri": f"{REPO}/pytorch-training"}, img("2.2-gpu-py310-cu121-u22")],
     "2.2-gpu-py310-cu121-u22"),
    ([img("2.0-gpu-py310-cu117-u20")], None),
])
def test_the_newest_plain_gpu_release_with_enough_cuda_is_chosen(images, chosen):
    got = choose_image(images, LOOKUP)
    assert got == (None if chosen is None else f"{REPO}/pytorch-training:{chosen}")


@pytest.mark.parametrize("text, value", [("96", 96), ("500m", 0.5), ("1600Gi", 1600 * 2 ** 30), ("2Ti", 2 * 2 ** 40),
                                         ("", None), ("lots", None), (None, None)])
def test_quantities(text, value):
    assert quantity(text) == value


def quota(kind="ECS", nodes=("ecs.ebmgn7ex.32xlarge",), gpu="32", cpu="512", memory="4096Gi"):
    return ps.GetQuotaResponseBody().from_map({
        "ResourceType": kind, "Min": {"NodeSpecs": [{"Type": n, "Count": 4} for n in nodes]},
        "QuotaDetails": {"AllocatableQuota": {"GPU": gpu, "CPU": cpu, "Memory": memory}}})


JOB = {"resource_id": "q1", "quota_kind": "general", "quota_spec": "ecs.ebmgn7ex.32xlarge", "pod_count": 4,
       "gpus_per_pod": 8, "cpu_per_pod": 128, "memory_gib_per_pod": 1024}


def test_a_quota_that_fits_has_no_problems_and_each_mismatch_is_named():
    assert quota_problems(quota(), JOB) == []
    assert quota_problems(quota(), {**JOB, "quota_spec": None, "quota_kind": "unknown"}) == []
    assert "is a Lingjun quota" in quota_problems(quota(kind="Lingjun"), JOB)[0]
    assert "planned for Lingjun" in quota_problems(quota(), {**JOB, "quota_kind": "lingjun"})[0]
    (p,) = quota_problems(quota(cpu="256"), JOB)
    assert p == "the job needs 512 vCPU (4 pod(s) x 128); quota q1 can allocate 256"


def test_clients_build_without_network():
    from alibabacloud_aiworkspace20210204.client import Client as Ws
    from alibabacloud_paistudio20220112.client import Client as Studio

    assert isinstance(default_workspace_client("cn-wulanchabu"), Ws)
    assert isinstance(default_quota_client("cn-wulanchabu"), Studio)
