
# --- Python with PyTorch (torchrun) -----------------------------------------------------
# An image that already has torchrun is used as it is; otherwise a venv gets PyTorch from
# the VPC-internal PyPI mirror (no internet egress needed).

# pick_python: print a python3 of 3.9 or later, installing one from the package mirror if needed
pick_python() {
  local candidate
  for candidate in python3.12 python3.11 python3.10 python3.9; do
    command -v "$candidate" >/dev/null 2>&1 && { command -v "$candidate"; return 0; }
  done
  pkg python3.11 "python3 python3-venv" >&2
  command -v python3.11 || command -v python3 || die "no python3 on this image and none installed"
}

setup_python() {
  local py
  if command -v torchrun >/dev/null 2>&1 || [ -x "$VENV/bin/torchrun" ]; then
    return 0
  fi
  py=$(pick_python)
  log "creating $VENV with $py and installing $TORCH_SPEC from $PIP_INDEX_URL"
  "$py" -m venv "$VENV" || die "cannot create a venv with $py"
  "$VENV/bin/pip" install --quiet --index-url "$PIP_INDEX_URL" --trusted-host "$PIP_TRUSTED_HOST" "$TORCH_SPEC" \
    || die "cannot install $TORCH_SPEC"
}
