"""What surrounds a chosen placement: storage, network, image and the self-healing pool.

The placement engine picks *where* a job runs; these pure functions decide *what surrounds it*
(disks, file systems, buckets, RDMA settings, image family). They read only the profile, the
chosen instance and the catalog facts, so the same inputs always give the same layout.
"""

from .image import IMAGE_FAMILY, IMAGE_FAMILY_UEFI, plan_image
from .lifecycle import Lifecycle, node_lifecycle
from .network import ERDMA_NCCL_ENV, default_vswitch_cidr, deployment_set_layout, plan_network, queue_pairs_per_eri
from .spot_pool import plan_spot_pool
from .storage import (
    BUCKET_PREFIXES, CHECKPOINTS_KEPT, CPFS_MIN_GIB, CPFS_STEP_GIB, SCRATCH_GIB, SYSTEM_DISK_GIB, StackIdentity,
    bucket_name, checkpoint_gib, essd_for, plan_storage, stack_bucket_name,
)

__all__ = ["BUCKET_PREFIXES", "Lifecycle", "StackIdentity", "node_lifecycle", "queue_pairs_per_eri",
           "stack_bucket_name", "CHECKPOINTS_KEPT", "CPFS_MIN_GIB", "CPFS_STEP_GIB", "ERDMA_NCCL_ENV", "IMAGE_FAMILY", "IMAGE_FAMILY_UEFI",
           "SCRATCH_GIB", "SYSTEM_DISK_GIB", "bucket_name", "checkpoint_gib", "default_vswitch_cidr",
           "deployment_set_layout", "essd_for", "plan_image", "plan_network", "plan_spot_pool", "plan_storage"]
