"""The tiny job of the 2-node launch test: join the process group the launcher set up (gloo,
env://), all-reduce each rank's number, and record what this process saw."""

import json
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "CROSS_RANK", "NODE_RANK",
        "NNODES")
record = {"rank": rank, "world_size": world, "sum": value.item(), "env": {k: os.environ.get(k) for k in keys},
          "argv": sys.argv[1:]}
with open(os.path.join(os.environ["E2E_OUT"], f"rank-{rank}.json"), "w") as fh:
    json.dump(record, fh)
dist.barrier()
dist.destroy_process_group()
