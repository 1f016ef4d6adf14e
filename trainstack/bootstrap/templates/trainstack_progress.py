"""trainstack progress helper: call ``report(step, tokens)`` from the training loop (docs/status.md).

It appends one JSON line to $TRAINSTACK_PROGRESS_FILE, which the node agent turns into the
heartbeat (tokens/s, memory peaks, checkpoints); without that variable (not on a trainstack node)
it does nothing. Copy it into your training code (docs/status.md shows the same function); it is
not installed on the nodes, whose 32 KB of user data have no room to spare.
"""
import json, os, sys, time


def report(step, tokens, checkpoint_seconds=None):
    """``tokens``: tokens the whole job has processed so far; ``checkpoint_seconds``: a checkpoint was just saved."""
    path = os.environ.get("TRAINSTACK_PROGRESS_FILE")
    if not path or os.environ.get("LOCAL_RANK", "0") != "0":
        return
    line = {"time": time.time(), "step": int(step), "tokens": int(tokens)}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        line["allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        line["reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
    if checkpoint_seconds is not None:
        line["checkpoint_seconds"] = float(checkpoint_seconds)
    with open(path, "a") as fh:
        fh.write(json.dumps(line) + "\n")
