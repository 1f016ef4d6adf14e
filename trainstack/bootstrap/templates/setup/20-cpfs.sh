
# --- CPFS over NFS (protocol service mount target) --------------------------------------
FSTAB=${TRAINSTACK_FSTAB:-/etc/fstab}
CPFS_OPTIONS=vers=3,nolock,proto=tcp,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport

setup_cpfs() {
  if mountpoint -q "$CPFS_MOUNT"; then
    log "CPFS already mounted at $CPFS_MOUNT"
    return 0
  fi
  command -v mount.nfs >/dev/null 2>&1 || pkg nfs-utils nfs-common
  mkdir -p "$CPFS_MOUNT"
  grep -qF " $CPFS_MOUNT nfs " "$FSTAB" 2>/dev/null \
    || echo "$CPFS_SOURCE $CPFS_MOUNT nfs $CPFS_OPTIONS,_netdev,nofail 0 0" >>"$FSTAB"
  # the protocol service can still be starting when the first node boots
  retry 30 10 mount -t nfs -o "$CPFS_OPTIONS" "$CPFS_SOURCE" "$CPFS_MOUNT" || die "cannot mount CPFS $CPFS_SOURCE at $CPFS_MOUNT"
  log "CPFS $CPFS_SOURCE mounted at $CPFS_MOUNT"
}
