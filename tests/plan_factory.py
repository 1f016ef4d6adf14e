"""Hand-built Plans for tests of code that only reads a Plan (components, policies, DLC).

They mirror what the resolver produces for the sample stacks, so component tests do not
depend on pricing or sizing details.
"""

from __future__ import annotations

from trainstack.plan import (
    CpfsPlan, DataDiskPlan, DlcPlan, EstimateSummary, ImagePlan, JobPlan, NetworkPlan, OssPlan,
    Plan, SpotPoolPlan, StoragePlan, ess_price_limit,
)

ERDMA_NCCL = {"NCCL_IB_HCA": "erdma", "NCCL_IB_GID_INDEX": "1", "NCCL_IB_QPS_PER_CONNECTION": "8",
              "NCCL_MIN_NCHANNELS": "16", "NCCL_NET_PLUGIN": "none", "NCCL_SOCKET_IFNAME": "eth0"}


def _estimate(gpu: str, usable: float, tps: float, hours: float, hourly: float) -> EstimateSummary:
    return EstimateSummary(gpu_model=gpu, peak_gib_per_gpu=usable * 0.7, required_gib_per_gpu=usable * 0.8,
                           usable_gib_per_gpu=usable, memory_margin_gib=usable * 0.2,
                           tokens_per_second=tps, tokens_per_second_per_gpu=tps, estimated_hours=hours,
                           on_demand_hourly_cny=hourly, spot_hourly_cny=hourly / 2)


def single_gpu_lora_plan(**over) -> Plan:
    base = dict(
        name="llama3-8b-lora", region="cn-shenzhen", zone="cn-shenzhen-e", target="ecs",
        instance_type="ecs.gn7i-c8g1.2xlarge", gpu_model="A10", nodes=1, gpus_per_node=1, total_gpus=1,
        hourly_cost_cny=9.5, estimated_hours=20.0, total_cost_cny=190.0,
        estimate=_estimate("A10", 22.49, 900.0, 20.0, 9.5),
        storage=StoragePlan(checkpoint="oss", checkpoint_path="/mnt/checkpoints",
                            data_disk=DataDiskPlan(performance_level="PL1", size_gib=200),
                            oss=OssPlan(bucket="llama3-8b-lora-ckpt-3f2a",
                                        internal_endpoint="oss-cn-shenzhen-internal.aliyuncs.com")),
        network=NetworkPlan(vpc_cidr="10.0.0.0/16", vswitch_cidr="10.0.0.0/20"),
        image=ImagePlan(),
        job=JobPlan(command="python train.py", method="lora", precision="bf16", micro_batch_size=1,
                    sequence_length=1024, gradient_checkpointing=True),
        tags={"team": "nlp"},
    )
    base.update(over)
    return Plan(**base)


def multi_node_erdma_plan(nodes: int = 4, **over) -> Plan:
    base = dict(
        name="llama3-70b-full", region="cn-shenzhen", zone="cn-shenzhen-f", target="ecs",
        instance_type="ecs.ebmgn7ex.32xlarge", gpu_model="A100-80G", nodes=nodes, gpus_per_node=8,
        total_gpus=8 * nodes, hourly_cost_cny=270.8333 * nodes, estimated_hours=30.0,
        total_cost_cny=270.8333 * nodes * 30,
        estimate=_estimate("A100-80G", 79.35, 20000.0, 30.0, 270.8333 * nodes),
        storage=StoragePlan(checkpoint="cpfs", checkpoint_path="/mnt/cpfs/checkpoints",
                            data_disk=DataDiskPlan(performance_level="PL3", size_gib=2048),
                            cpfs=CpfsPlan(capacity_gib=3600, storage_type="advance_200"),
                            oss=OssPlan(bucket="llama3-70b-full-ckpt-9c1d",
                                        internal_endpoint="oss-cn-shenzhen-internal.aliyuncs.com")),
        network=NetworkPlan(vpc_cidr="10.0.0.0/16", vswitch_cidr="10.0.0.0/20", rdma="erdma", eri_per_node=2,
                            queue_pair_number=8, deployment_set="LowLatency", deployment_set_groups=1,
                            mtu=8500, nccl_env=dict(ERDMA_NCCL)),
        image=ImagePlan(image_family="acs:alibaba_cloud_linux_3_2104_lts_x64_uefi", uefi=True),
        job=JobPlan(command="torchrun train.py --zero 3", method="full", precision="bf16-mixed",
                    zero_stage=3, gradient_checkpointing=True, nproc_per_node=8, micro_batch_size=1,
                    sequence_length=4096),
        tags={"team": "foundation"},
    )
    base.update(over)
    return Plan(**base)


def spot_plan(**over) -> Plan:
    base = dict(
        name="qwen-7b-spot", region="cn-shenzhen", zone="cn-shenzhen-e", target="ecs",
        instance_type="ecs.gn7e-c16g1.16xlarge", gpu_model="A100-80G", nodes=1, gpus_per_node=4,
        total_gpus=4, spot=True, spot_price_limit=138.966, spot_strategy="SpotWithPriceLimit",
        spot_duration_hours=1, hourly_cost_cny=69.48, estimated_hours=12.0, total_cost_cny=900.0,
        estimate=_estimate("A100-80G", 79.35, 8000.0, 12.0, 138.966),
        storage=StoragePlan(checkpoint="oss", checkpoint_path="/mnt/checkpoints",
                            data_disk=DataDiskPlan(performance_level="PL2", size_gib=500),
                            oss=OssPlan(bucket="qwen-7b-spot-ckpt-77aa",
                                        internal_endpoint="oss-cn-shenzhen-internal.aliyuncs.com")),
        network=NetworkPlan(vpc_cidr="10.0.0.0/16", vswitch_cidr="10.0.0.0/20"),
        image=ImagePlan(),
        job=JobPlan(command="torchrun train.py", method="full", precision="bf16-mixed", nproc_per_node=4,
                    zero_stage=2),
        tags={"team": "nlp"},
    )
    base.update(over)
    return Plan(**base)


def dlc_plan(**over) -> Plan:
    base = dict(
        name="qwen-7b-dlc", region="cn-shenzhen", zone=None, target="dlc",
        instance_type="ecs.gn7e-c16g1.4xlarge", gpu_model="A100-80G", nodes=2, gpus_per_node=1, total_gpus=2,
        estimate=_estimate("A100-80G", 79.35, 3000.0, 10.0, 34.742),
        storage=StoragePlan(checkpoint="oss", checkpoint_path="/mnt/data/checkpoints",
                            oss=OssPlan(bucket="qwen-7b-dlc-ckpt-1b2c",
                                        internal_endpoint="oss-cn-shenzhen-internal.aliyuncs.com")),
        network=NetworkPlan(vpc_cidr="10.0.0.0/16", vswitch_cidr="10.0.0.0/20"),
        image=ImagePlan(),
        job=JobPlan(command="python train.py", method="lora", precision="bf16"),
        dlc=DlcPlan(workspace_id=None, image="dsw-registry-vpc.cn-shenzhen.cr.aliyuncs.com/pai/pytorch-training:TAG",
                    ecs_spec="ecs.gn7e-c16g1.4xlarge", pod_count=2, gpus_per_pod=1, command="python train.py",
                    envs={"NCCL_DEBUG": "INFO"}, max_running_minutes=720),
        labels=("DLC cost unknown offline",),
    )
    base.update(over)
    return Plan(**base)


def spot_pool_plan(**over) -> Plan:
    """``spot_plan`` with a self-healing spot pool (profile ``resources.self_healing: true``)."""
    base = dict(spot_pool=SpotPoolPlan(price_limit=ess_price_limit(138.966)))
    base.update(over)
    return spot_plan(**base)
