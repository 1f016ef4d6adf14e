
# --- node programs ----------------------------------------------------------------------
# The setup, the launch script, the agent, the heartbeat ... are objects in the stack bucket
# (job/programs/<sha256>/<name>, written by `pulumi up`; the node role may read them, never write
# them). The set installed is the one this node last installed and verified (a job start installs
# the set its job settings name), else the one its user data names (BOOT_PROGRAMS_SHA256); every
# file is checked against its sha256 before it replaces anything, and a set that does not verify
# stops here: nothing unverified ever runs.
setup_programs() {
  local want=$BOOT_PROGRAMS_SHA256
  if [ -f "$LIB/programs.json" ]; then want=$(sha256sum "$LIB/programs.json" | cut -d' ' -f1); fi
  "${TRAINSTACK_OSS_PYTHON:-$OSS_VENV/bin/python}" "$LIB/trainstack_programs.py" --region "$REGION" \
    --endpoint "$OSS_ENDPOINT" "$PROGRAMS_URI" "$LIB" --sha256 "$want" \
    || die "cannot install the node programs ${want:0:12} from $PROGRAMS_URI"
}
