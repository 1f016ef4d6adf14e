
# --- NFS client (CPFS over NFS) ---------------------------------------------------------
# Installed on every node: the job settings may add a CPFS mount later, which the launcher
# mounts at the next job start (trainstack-launch mount_cpfs).
setup_nfs_client() {
  command -v mount.nfs >/dev/null 2>&1 || pkg nfs-utils nfs-common
}
