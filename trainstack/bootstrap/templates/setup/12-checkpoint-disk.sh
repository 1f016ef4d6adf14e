
# the checkpoint disk (retained: it outlives every instance and the stack)
setup_checkpoint_disk() { setup_disk "$CHECKPOINT_DISK_MOUNT" "$CHECKPOINT_DISK_LABEL" "$CHECKPOINT_DISK_GIB" "checkpoint disk"; }
