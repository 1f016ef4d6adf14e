"""trainstack NCCL check: one all-reduce across every GPU of the job before training starts.

Run by trainstack-launch under the same torchrun topology as the job. A broken fabric
(wrong MTU, missing ERI, blocked port) shows up here in seconds as an error, a wrong sum or
a timeout, instead of as a hung training job that keeps billing. Exits non-zero on failure.

Environment: TRAINSTACK_NCCL_CHECK_MIB (256), TRAINSTACK_NCCL_CHECK_TIMEOUT (300 s),
TRAINSTACK_NCCL_MIN_BUSBW_GBPS (0 = no bandwidth floor).
"""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def main() -> int:
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    timeout = datetime.timedelta(seconds=int(os.environ.get("TRAINSTACK_NCCL_CHECK_TIMEOUT", "300")))
    dist.init_process_group("nccl", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    n = int(os.environ.get("TRAINSTACK_NCCL_CHECK_MIB", "256")) * 2**20 // 4

    ones = torch.ones(n, dtype=torch.float32, device="cuda")
    dist.all_reduce(ones)
    torch.cuda.synchronize()
    bad = int((ones != world).sum().item())
    if bad:
        print(f"trainstack: NCCL all-reduce returned wrong values on rank {rank}: "
              f"{bad} of {n} elements differ from {world}", file=sys.stderr, flush=True)
        return 3

    zeros = torch.zeros(n, dtype=torch.float32, device="cuda")
    iters = 5
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(zeros)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / iters
    # bus bandwidth as nccl-tests reports it: 2(n-1)/n of the buffer crosses each link
    busbw = n * 4 * 2 * (world - 1) / world / seconds / 1e9
    floor = float(os.environ.get("TRAINSTACK_NCCL_MIN_BUSBW_GBPS", "0"))
    if rank == 0:
        print(f"trainstack: NCCL all-reduce OK across {world} GPUs: {n * 4 / 2**20:.0f} MiB in "
              f"{seconds * 1e3:.1f} ms, bus bandwidth {busbw:.1f} GB/s", flush=True)
    dist.destroy_process_group()
    if busbw < floor:
        print(f"trainstack: bus bandwidth {busbw:.1f} GB/s is below the floor {floor} GB/s",
              file=sys.stderr, flush=True)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
