
# --- OSS SDK (node programs, job settings, code and checkpoints on OSS) ----------------
# Alibaba's OSS Python SDK in its own venv, from the VPC-internal PyPI mirror (no internet
# egress needed), for the agent's OSS commands. Its own venv: the job's requirements never touch it.
oss_sdk_ready() { "$OSS_VENV/bin/python" -c 'import alibabacloud_oss_v2' >/dev/null 2>&1; }

setup_oss() {
  local py
  oss_sdk_ready && return 0
  py=$(pick_python)
  log "creating $OSS_VENV with $py and installing $OSS_SDK_SPEC from $PIP_INDEX_URL"
  rm -rf "$OSS_VENV"
  "$py" -m venv "$OSS_VENV" || die "cannot create a venv with $py"
  "$OSS_VENV/bin/pip" install --quiet --index-url "$PIP_INDEX_URL" --trusted-host "$PIP_TRUSTED_HOST" "$OSS_SDK_SPEC" \
    || die "cannot install $OSS_SDK_SPEC from $PIP_INDEX_URL"
  oss_sdk_ready || die "$OSS_VENV cannot import alibabacloud_oss_v2"
}
