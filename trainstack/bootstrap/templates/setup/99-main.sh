
main() {
  mkdir -p "$STATE" "$RUN"
  rm -f "$RUN/setup-done"
@STEPS@
  mkdir -p "$CHECKPOINT_DIR"
  touch "$RUN/setup-done"
  log "node $NODE_RANK of $NNODES ready"
}

# sourced by tests to call one step; executed by trainstack-setup.service
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
