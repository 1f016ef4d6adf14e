
# --- Python with PyTorch (torchrun) -----------------------------------------------------
# An image that already has torchrun is used as it is; otherwise a venv gets PyTorch from
# the VPC-internal PyPI mirror (no internet egress needed).
setup_python() {
  local py
  if command -v torchrun >/dev/null 2>&1 || [ -x "$VENV/bin/torchrun" ]; then
    return 0
  fi
  image_lacks pytorch "no torchrun on PATH or in $VENV"
  py=$(pick_python)
  log "creating $VENV with $py and installing $TORCH_SPEC from $PIP_INDEX_URL"
  "$py" -m venv "$VENV" || die "cannot create a venv with $py"
  "$VENV/bin/pip" install --quiet --index-url "$PIP_INDEX_URL" --trusted-host "$PIP_TRUSTED_HOST" "$TORCH_SPEC" \
    || die "cannot install $TORCH_SPEC"
}
