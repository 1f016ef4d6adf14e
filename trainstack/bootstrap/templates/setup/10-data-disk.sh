
# --- ESSD data disk --------------------------------------------------------------------
# The data disk is found by its exact size (the Plan knows it), never by a guessed name,
# so the system disk or a local NVMe disk is never picked. It is formatted only when
# `blkid -p` positively reports no signature at all (exit 2): an existing filesystem, a
# partition table, or a probe error leaves it untouched. Never reformat data.
FSTAB=${TRAINSTACK_FSTAB:-/etc/fstab}

find_data_disk() {
  local want=$((DATA_DISK_GIB * 1024 * 1024 * 1024)) name size type
  while read -r name size type; do
    [ "$type" = disk ] && [ "$size" = "$want" ] && { echo "$name"; return 0; }
  done < <(lsblk -dbnpo NAME,SIZE,TYPE)
  return 1
}

# A checkpoint disk is a standalone ESSD the stack attaches after the instance is created,
# so it can appear a while after boot: look every few seconds, for DATA_DISK_WAIT_SECONDS.
wait_for_data_disk() {
  local deadline=$(($(date +%s) + DATA_DISK_WAIT_SECONDS)) poll=${TRAINSTACK_DISK_POLL_SECONDS:-5} told=0
  until find_data_disk; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    if [ "$told" = 0 ]; then
      log "waiting up to ${DATA_DISK_WAIT_SECONDS}s for the ${DATA_DISK_GIB} GiB data disk to be attached"
      told=1
    fi
    sleep "$poll"
  done
}

setup_data_disk() {
  local dev rc=0 fstype uuid
  if mountpoint -q "$DATA_DISK_MOUNT"; then
    log "data disk already mounted at $DATA_DISK_MOUNT"
    return 0
  fi
  dev=$(wait_for_data_disk) || die "no ${DATA_DISK_GIB} GiB data disk attached after ${DATA_DISK_WAIT_SECONDS}s (lsblk: $(lsblk -dbnpo NAME,SIZE | tr '\n' ' '))"
  blkid -p "$dev" >/dev/null 2>&1 || rc=$?
  case "$rc" in
    2)
      log "formatting the new, empty data disk $dev (ext4)"
      mkfs.ext4 -q -L trainstack-data "$dev"
      ;;
    0)
      fstype=$(blkid -p -o value -s TYPE "$dev" 2>/dev/null || true)
      [ -n "$fstype" ] || die "data disk $dev holds a partition table, not a filesystem: not touching it"
      log "data disk $dev already has a $fstype filesystem: mounting it as it is (never reformatted)"
      ;;
    *)
      die "blkid cannot tell whether $dev holds data (exit $rc): refusing to format it"
      ;;
  esac
  uuid=$(blkid -p -o value -s UUID "$dev")
  fstype=$(blkid -p -o value -s TYPE "$dev")
  mkdir -p "$DATA_DISK_MOUNT"
  grep -q "^UUID=$uuid " "$FSTAB" 2>/dev/null \
    || echo "UUID=$uuid $DATA_DISK_MOUNT $fstype defaults,nofail 0 2" >>"$FSTAB"
  mount -t "$fstype" "$dev" "$DATA_DISK_MOUNT"
  log "data disk $dev mounted at $DATA_DISK_MOUNT"
}
