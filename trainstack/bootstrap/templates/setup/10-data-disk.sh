
# --- ESSD data and checkpoint disks -----------------------------------------------------
# Each disk is found by its ext4 label once it has one (it may have grown since: the stack
# resizes it online), and at its first boot by its exact size (the Plan knows it), never by a
# guessed name, so the system disk or a local NVMe disk is never picked. A disk carrying another
# trainstack label is never taken. It is formatted only when `blkid -p` positively reports no
# signature at all (exit 2): an existing filesystem, a partition table, or a probe error leaves it
# untouched. Never reformat data.
FSTAB=${TRAINSTACK_FSTAB:-/etc/fstab}
DISK_LABELS="trainstack-data trainstack-ckpt"

# find_disk GIB LABEL: a disk of exactly GIB GiB that carries no other trainstack label
find_disk() {
  local want=$(($1 * 1024 * 1024 * 1024)) label=$2 name size type other
  while read -r name size type; do
    [ "$type" = disk ] && [ "$size" = "$want" ] || continue
    other=$(blkid -p -o value -s LABEL "$name" 2>/dev/null || true)
    case " $DISK_LABELS " in
      *" $other "*) [ "$other" = "$label" ] || continue ;;
    esac
    echo "$name"
    return 0
  done < <(lsblk -dbnpo NAME,SIZE,TYPE)
  return 1
}

# A standalone disk is attached after the instance is created, so it can appear a while after
# boot: look every few seconds, for DATA_DISK_WAIT_SECONDS.
wait_for_disk() {
  local gib=$1 label=$2 what=$3 deadline=$(($(date +%s) + DATA_DISK_WAIT_SECONDS)) poll=${TRAINSTACK_DISK_POLL_SECONDS:-5} told=0
  until find_disk "$gib" "$label"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    if [ "$told" = 0 ]; then
      log "waiting up to ${DATA_DISK_WAIT_SECONDS}s for the ${gib} GiB $what to be attached" >&2
      told=1
    fi
    sleep "$poll"
  done
}

# setup_disk MOUNT LABEL GIB WHAT
setup_disk() {
  local mnt=$1 label=$2 gib=$3 what=$4 dev rc=0 fstype uuid
  if mountpoint -q "$mnt"; then
    log "$what already mounted at $mnt"
    return 0
  fi
  dev=$(blkid -L "$label" 2>/dev/null || true)
  if [ -z "$dev" ]; then
    dev=$(wait_for_disk "$gib" "$label" "$what") || die "no ${gib} GiB $what attached after ${DATA_DISK_WAIT_SECONDS}s (lsblk: $(lsblk -dbnpo NAME,SIZE | tr '\n' ' '))"
  fi
  blkid -p "$dev" >/dev/null 2>&1 || rc=$?
  case "$rc" in
    2)
      log "formatting the new, empty $what $dev (ext4, label $label)"
      mkfs.ext4 -q -L "$label" "$dev"
      ;;
    0)
      fstype=$(blkid -p -o value -s TYPE "$dev" 2>/dev/null || true)
      [ -n "$fstype" ] || die "$what $dev holds a partition table, not a filesystem: not touching it"
      log "$what $dev already has a $fstype filesystem: mounting it as it is (never reformatted)"
      ;;
    *)
      die "blkid cannot tell whether $dev holds data (exit $rc): refusing to format it"
      ;;
  esac
  uuid=$(blkid -p -o value -s UUID "$dev")
  fstype=$(blkid -p -o value -s TYPE "$dev")
  mkdir -p "$mnt"
  grep -q "^UUID=$uuid " "$FSTAB" 2>/dev/null \
    || echo "UUID=$uuid $mnt $fstype defaults,nofail 0 2" >>"$FSTAB"
  mount -t "$fstype" "$dev" "$mnt"
  log "$what $dev mounted at $mnt"
}
