
# --- eRDMA (Elastic RDMA Interface) -----------------------------------------------------
# Installer from the VPC-internal mirror; the ERIs themselves are attached by the stack
# (NetworkInterfaceTrafficMode=HighPerformance).
erdma_ready() { ibv_devices 2>/dev/null | grep -q erdma; }

setup_erdma() {
  local tmp
  if ! erdma_ready; then
    image_lacks erdma "ibv_devices lists no erdma device"
    log "installing the eRDMA software stack from $ERDMA_INSTALLER_URL"
    pkg "kernel-devel-$(uname -r) gcc-c++ dkms cmake" "dkms cmake debhelper autotools-dev libnl-3-dev libnl-route-3-dev"
    tmp=$(mktemp -d)
    curl -fsS --retry 5 -o "$tmp/erdma_installer.tar.gz" "$ERDMA_INSTALLER_URL" || die "cannot download $ERDMA_INSTALLER_URL"
    tar -xzf "$tmp/erdma_installer.tar.gz" -C "$tmp"
    (cd "$tmp/erdma_installer" && ./install.sh --batch) || die "the eRDMA installer failed"
    rm -rf "$tmp"
  fi
  erdma_ready || die "no erdma device in ibv_devices: is an ERI attached to this instance?"
  log "eRDMA OK: $(rdma link show 2>/dev/null | grep erdma | tr '\n' ';')"
}
