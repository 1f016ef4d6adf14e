#!/bin/bash
# Manual GPU smoke test of the bootstrap's torch-side pieces (not run by pytest: needs a GPU
# and PyTorch). Run from the repository root on a GPU machine:
#   bash tests/bootstrap/gpu_smoke.sh
# 1. nccl_check.py under torchrun with the launcher's flags (incl. --rdzv-conf timeout=...)
# 2. the checkpoint-signal path with real torchrun: torchrun started with SIGUSR1 ignored
#    survives, and trainstack_agent.py signal-trainer reaches its rank processes.
set -uo pipefail
T=trainstack/bootstrap/templates
W=$(mktemp -d)
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "nccl", torch.cuda.nccl.version())' || exit 3

echo "== 1. NCCL check"
NCCL_DEBUG=INFO TRAINSTACK_NCCL_CHECK_MIB=64 timeout 180 torchrun --nnodes 1 --nproc-per-node 1 --node-rank 0 \
  --master-addr 127.0.0.1 --rdzv-conf timeout=60 --master-port 29511 "$T/nccl_check.py" >"$W/nccl.log" 2>&1
echo "nccl_check rc=$?"
grep -E "trainstack|Error|error" "$W/nccl.log" | tail -n 5

echo "== 2. checkpoint signal through real torchrun"
cat >"$W/worker.py" <<'PY'
import os, signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
open(os.path.join(sys.argv[1], "ready%s" % os.environ["LOCAL_RANK"]), "w").close()
end = time.time() + 30
while not got and time.time() < end:
    time.sleep(0.05)
print("rank", os.environ["RANK"], "got SIGUSR1" if got else "NO SIGNAL", flush=True)
sys.exit(0 if got else 1)
PY
(
  trap '' USR1
  exec torchrun --nnodes 1 --nproc-per-node 2 --node-rank 0 --master-addr 127.0.0.1 --master-port 29521 "$W/worker.py" "$W"
) >"$W/torchrun.log" 2>&1 &
pid=$!
echo "$pid" >"$W/trainer.pid"
for _ in $(seq 1 300); do [ -e "$W/ready0" ] && [ -e "$W/ready1" ] && break; sleep 0.1; done
python3 "$T/trainstack_agent.py" signal-trainer USR1 --pidfile "$W/trainer.pid"
timeout 60 tail --pid="$pid" -f /dev/null
wait "$pid"
echo "torchrun rc=$?"
cat "$W/torchrun.log"
