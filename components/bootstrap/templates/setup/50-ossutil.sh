
# --- ossutil (code or checkpoints on OSS) -----------------------------------------------
setup_ossutil() {
  local tmp arch
  command -v ossutil >/dev/null 2>&1 && return 0
  arch=amd64
  [ "$(uname -m)" = aarch64 ] && arch=arm64
  tmp=$(mktemp -d)
  command -v unzip >/dev/null 2>&1 || pkg unzip unzip
  curl -fsS --retry 5 -o "$tmp/ossutil.zip" "${OSSUTIL_URL//@ARCH@/$arch}" \
    || die "cannot download ossutil from ${OSSUTIL_URL//@ARCH@/$arch} (no internet egress? set ossutil_url to a reachable copy)"
  unzip -q "$tmp/ossutil.zip" -d "$tmp"
  install -m 0755 "$(find "$tmp" -type f -name ossutil | head -n 1)" /usr/local/bin/ossutil
  rm -rf "$tmp"
  log "ossutil installed: $(ossutil version 2>/dev/null | head -n 1)"
}
