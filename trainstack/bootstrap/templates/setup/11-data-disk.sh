
# the dataset cache and scratch disk (not retained: it is deleted with the stack)
setup_data_disk() { setup_disk "$DATA_DISK_MOUNT" "$DATA_DISK_LABEL" "$DATA_DISK_GIB" "data disk"; }
