"""`make test-launch` only (it sets TRAINSTACK_LAUNCH_TESTS=1 in .venv-launch, which has PyTorch,
Accelerate and DeepSpeed); `make test` never collects these."""

import os

if os.environ.get("TRAINSTACK_LAUNCH_TESTS") != "1":
    collect_ignore_glob = ["*.py"]
