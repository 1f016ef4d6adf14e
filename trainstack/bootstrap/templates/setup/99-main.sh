
main() {
  mkdir -p "$STATE" "$RUN"
  rm -f "$RUN/setup-done"
@STEPS@
  touch "$RUN/setup-done"
  log "node $NODE_RANK ready"
}

# sourced by tests to call one step; executed by trainstack-setup.service
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
