
# --- the dataset, copied to the data disk (storage.dataset_sync: at-boot) --------------------
# Started right after the data disk is mounted, at every boot, as its own transient unit: it copies
# while the driver, eRDMA and PyTorch install, and on a replacement node while the survivors wait.
# The copy fetches only what is missing or different (trainstack_sync.mirror), so a reboot mid-copy
# (the driver installer's) resumes it. The trainer finds it in TRAINSTACK_DATASET_DIR, complete once
# .trainstack-dataset-complete is there; until then it reads storage.dataset_uri itself.
DATASET_UNIT=trainstack-dataset-copy

setup_dataset_copy() {
  if systemctl is-active --quiet "$DATASET_UNIT"; then
    log "the dataset copy is already running (journalctl -u $DATASET_UNIT)"
    return 0
  fi
  systemd-run --unit "$DATASET_UNIT" --collect --quiet --nice 10 \
    --description "trainstack: copy the dataset to the data disk" \
    "${TRAINSTACK_OSS_PYTHON:-$OSS_VENV/bin/python}" "$LIB/trainstack_agent.py" oss --region "$REGION" --endpoint "$OSS_ENDPOINT" \
    mirror "$DATASET_SYNC_URI" "$DATASET_DIR" || {
    # not fatal: the copy only saves the trainer reading storage.dataset_uri itself
    log "WARNING: cannot start the dataset copy ($DATASET_UNIT): the trainer reads $DATASET_SYNC_URI itself"
    return 0
  }
  log "copying $DATASET_SYNC_URI to $DATASET_DIR in the background (journalctl -u $DATASET_UNIT)"
}
