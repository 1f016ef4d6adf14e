
# --- Python for the venvs (the OSS SDK's, PyTorch's) ------------------------------------
# pick_python: print a python3 of 3.9 or later, installing one from the package mirror if needed
pick_python() {
  local candidate
  for candidate in python3.12 python3.11 python3.10 python3.9; do
    command -v "$candidate" >/dev/null 2>&1 && { command -v "$candidate"; return 0; }
  done
  pkg python3.11 "python3 python3-venv" >&2
  command -v python3.11 || command -v python3 || die "no python3 on this image and none installed"
}
