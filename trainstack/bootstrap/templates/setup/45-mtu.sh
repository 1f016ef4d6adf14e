
# --- MTU (jumbo frames) -----------------------------------------------------------------
# Applied at every boot to every ethN interface (the primary ENI and the ERIs). Alibaba
# requires MTU 8500 for NCCL's LL128 protocol over eRDMA with jumbo frames; a wrong MTU
# corrupts data rather than failing loudly, so a refused MTU is fatal.
setup_mtu() {
  local dev
  for dev in $(ip -o link show | awk -F': ' '$2 ~ /^eth[0-9]+$/ {print $2}'); do
    ip link set dev "$dev" mtu "$MTU" || die "cannot set MTU $MTU on $dev (are jumbo frames enabled on this instance?)"
    log "MTU $MTU on $dev"
  done
}
