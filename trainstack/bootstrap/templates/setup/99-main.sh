
# the steps of this node's setup (SETUP_STEPS in node.env: trainstack's own step names, in order)
main() {
  local step
  mkdir -p "$STATE" "$RUN"
  rm -f "$RUN/setup-done"
  for step in $SETUP_STEPS; do
    "$step"
  done
  touch "$RUN/setup-done"
  log "node $NODE_RANK ready"
}

# sourced by tests to call one step; executed by trainstack-setup.service
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
