
# --programs (trainstack-programs.service): the OSS SDK, then the node programs
programs() {
  mkdir -p "$STATE" "$RUN" "$LIB"
  setup_oss
  setup_programs
  log "node programs ready in $LIB"
}

# --failed (trainstack-setup-failed.service): the stop-billing policy after a failed setup, with the
# boot programs alone (the others may be what failed)
failed() {
  if [ "$(systemctl is-system-running 2>/dev/null)" = stopping ]; then
    exit 0 # a reboot (the driver installer's), not a failure
  fi
  log "node setup failed (journalctl -u trainstack-programs -u trainstack-setup)"
  if [ "$STOP_ON" = always ]; then
    log "stopping this instance in no-charge mode (StopInstance, StoppedMode=StopCharging)"
    python3 "$LIB/trainstack_cloud.py" stop-instance --region "$REGION" && exit 12
    log "StopInstance failed: this node keeps billing until it is stopped"
    [ "$POWEROFF_FALLBACK" = 1 ] && systemctl poweroff
  fi
  exit 12
}

# sourced by tests to call one function; executed by trainstack-programs and trainstack-setup-failed
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    --programs) programs ;;
    --failed) failed ;;
    *) die "usage: trainstack-boot --programs | --failed" ;;
  esac
fi
