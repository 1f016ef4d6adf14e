"""The tiny job of the loopback elastic test: a training loop that resumes from its latest
checkpoint in a shared directory (CPFS on a real plan). Each step all-reduces a tensor across the
group (gloo) and rank 0 saves the step; each process appends what it saw to E2E_OUT/progress.jsonl."""

import json
import os
import time

import torch
import torch.distributed as dist

CKPT, OUT, STEPS = os.environ["TRAINSTACK_CHECKPOINT_DIR"], os.environ["E2E_OUT"], int(os.environ["E2E_STEPS"])


def record(**data):
    with open(os.path.join(OUT, "progress.jsonl"), "a") as fh:
        fh.write(json.dumps(dict(data, rank=dist.get_rank(), pid=os.getpid(), at=time.time(), addr=os.environ.get("TRAINSTACK_LOCAL_ADDR"),
                                 restart=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))) + "\n")


def latest() -> int:
    steps = [int(n[5:-3]) for n in os.listdir(CKPT) if n.startswith("step-") and n.endswith(".pt")]
    return max(steps, default=0)


dist.init_process_group("gloo")
start = latest()
weight = torch.load(os.path.join(CKPT, f"step-{start}.pt"))["weight"] if start else torch.zeros(1)
record(event="resume", step=start + 1, world=dist.get_world_size(), master=os.environ.get("MASTER_ADDR"))
for step in range(start + 1, STEPS + 1):
    grad = torch.ones(1)
    dist.all_reduce(grad)
    weight += grad
    if dist.get_rank() == 0:
        tmp = os.path.join(CKPT, f".step-{step}.pt")
        torch.save({"weight": weight, "step": step}, tmp)
        os.replace(tmp, os.path.join(CKPT, f"step-{step}.pt"))
    time.sleep(0.15)
record(event="done", step=STEPS, weight=weight.item())
dist.barrier()
dist.destroy_process_group()
