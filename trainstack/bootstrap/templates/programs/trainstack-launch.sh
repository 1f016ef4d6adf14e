#!/bin/bash
# trainstack-launch: read the job settings, fetch the job's code, check the GPU fabric with one
# NCCL all-reduce, launch job.command with its launcher (torchrun, accelerate, deepspeed, ...:
# LAUNCH_ARGV in job.env), then stop this instance so it stops billing.
# Run by trainstack-job.service once trainstack-setup.service has prepared the node.
# The job settings (settings.env, job.env, hostfile: the command, env, topology, CPFS mount)
# come from the job settings channel at every job start: the stack bucket's job/settings.json,
# checked against the SHA-256 the deployer tags on this instance; a changed profile reaches a
# running node at its next job start (systemctl restart trainstack-job, or a reboot). So do new node
# programs (this script, the agent, the heartbeat, ...): the settings name their set by its sha256
# (PROGRAMS_SHA256), which is installed from the stack bucket, every file checked, before anything runs.
# Exit codes: the trainer's own, or 10 NCCL check failed, 11 code fetch failed,
# 12 node setup failed, 13 checkpoint restore from OSS failed, 14 a job secret could not be
# read from KMS (the trainer never started), 15 stopped by the budget guard (max_total_cost or
# deadline_hours, see trainstack-heartbeat.service), 16 the job settings could not be read or did
# not match their tag, 17 CPFS could not be mounted, 18 no private IP (torchrun elastic needs it),
# 19 the node programs the job settings name could not be fetched or did not match their sha256,
# 124 max runtime reached. ELASTIC=1 (a multi-node self-healing plan): torchrun elastic, ranks from
# the rendezvous on node 0, a node-local NCCL check (a replacement joins a running job).
# POOL_ROLE (a self-healing plan, trainstack_pool.py): node 0 (anchor) records the run and its settings
# generation; pool nodes launch into that generation, launch again while the run goes on (node 0 rebooting
# or replaced), and scale the pool to 0 when it ends; node 0 stops itself. Nothing bills after the job.
# job.env (the job's environment, launch command and secret names) is sourced only in the
# subshells that start the NCCL check and the trainer, after they took what they run into TRAINSTACK_*
# names: nothing in it can change this script, so the job may use any name but TRAINSTACK_*, the
# topology the launchers export and the shell's (trainstack/bootstrap/reserved.py).
set -uo pipefail # not -e: every way out must pass through finish (checkpoint upload, stop)

ETC=${TRAINSTACK_ETC:-/etc/trainstack}
STATE=${TRAINSTACK_STATE:-/var/lib/trainstack}
RUN=${TRAINSTACK_RUN:-/run/trainstack}
LIB=${TRAINSTACK_LIB:-/usr/local/lib/trainstack}
WORKDIR=${TRAINSTACK_WORKDIR:-/opt/trainstack/code}
# shellcheck source=/dev/null
. "$ETC/node.env"
if [ -f "$ETC/nccl.env" ]; then
  # shellcheck source=/dev/null
  . "$ETC/nccl.env"
fi

PIDFILE=$RUN/trainer.pid
SPOT_MARKER=$RUN/spot-termination-time
CPFS_OPTIONS=vers=3,nolock,proto=tcp,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport
FSTAB=${TRAINSTACK_FSTAB:-/etc/fstab}
# the trainer's progress lines (docs/status.md) and the budget guard's request to stop
PROGRESS_FILE=$RUN/progress.jsonl
GUARD_MARKER=$RUN/guard-stop
EXIT_GUARD=15
EXIT_SETTINGS=16
EXIT_CPFS=17
EXIT_ADDRESS=18
EXIT_PROGRAMS=19
ELASTIC=0
TRAINSTACK_LOCAL_ADDR=""
if [ -d "$VENV/bin" ]; then PATH=$VENV/bin:$PATH; fi
export PATH
CHECKPOINT_KIND="" # settings.env sets the job's settings (load_settings)
TORCHRUN=()
DEADLINE=""
TRAPPED=0
STOPPED_FROM_OUTSIDE=0
END_REASON=""

log() { printf '%s trainstack-launch: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
agent() { python3 "$LIB/trainstack_agent.py" "$@"; }
# oss ENDPOINT COMMAND...: the agent's OSS commands (Alibaba's OSS SDK, in the OSS venv)
oss() {
  local endpoint=$1
  shift
  "${TRAINSTACK_OSS_PYTHON:-$OSS_VENV/bin/python}" "$LIB/trainstack_agent.py" oss --region "$REGION" --endpoint "$endpoint" "$@"
}
signal_trainer() { agent signal-trainer "$1" --pidfile "$PIDFILE"; }
# the self-healing cluster's state machine (trainstack_pool.py) and its events (trainstack_events.py)
pool() { "${TRAINSTACK_OSS_PYTHON:-$OSS_VENV/bin/python}" "$LIB/trainstack_pool.py" --region "$REGION" --endpoint "$OSS_ENDPOINT" "$@"; }
event() { python3 "$LIB/trainstack_events.py" "$@" || true; }
GENERATION=""

# the job settings of this rank from the channel into $ETC (kept when unchanged), then sourced
fetch_settings() {
  oss "$OSS_ENDPOINT" job-settings "$JOB_SETTINGS_URI" "$ETC" --rank "$NODE_RANK" --tag "$JOB_SETTINGS_TAG"
}
# a self-healing node's settings: node 0 resumes the running run's generation or starts a new run with the
# settings its tag names; a pool node takes the running generation (return 2: node 0 starts no run)
choose_settings() {
  local state gen
  case "${POOL_ROLE:-}" in
    anchor)
      read -r state gen <<<"$(pool run-state "$RUN_URI")"
      if [ "$state" = running ] && [ -n "$gen" ] && [ "$gen" != - ] \
        && pool settings "$GENERATIONS_URI" "$ETC" --rank "$NODE_RANK" --generation "$gen"; then
        GENERATION=$gen
        event job_resumed generation="$gen" why="the run was going on when node 0 (re)started"
        return 0
      fi
      fetch_settings || return 1
      GENERATION=$(head -n 1 "$ETC/.job-settings.sha256")
      pool run-start "$RUN_URI" --generation "$GENERATION" --instance "$(agent meta meta-data/instance-id)" || return 1
      event job_started generation="$GENERATION"
      ;;
    pool)
      GENERATION=$(pool generation "$RUN_URI" --wait "${TRAINSTACK_NODE0_LOSS_SECONDS:-$NODE0_LOSS_SECONDS}" --idle "${TRAINSTACK_POOL_IDLE_SECONDS:-900}") || return 2
      pool settings "$GENERATIONS_URI" "$ETC" --rank "$NODE_RANK" --generation "$GENERATION" || return 1
      event replacement_joined generation="$GENERATION"
      ;;
    *) fetch_settings ;;
  esac
}
# a pool node added by growing the pool waits for a free seat (the running world keeps its size)
wait_for_seat() {
  local iid waited=0
  [ "${POOL_ROLE:-}" = pool ] || return 0
  iid=$(agent meta meta-data/instance-id) || return 0
  until pool seat "$POOL_STATUS_URI" --seats "$POOL_SEATS" --self "$iid" --fresh "$((HEARTBEAT_SECONDS * 3))"; do
    [ "$waited" = 0 ] && log "the running world is full ($POOL_SEATS pool nodes): waiting for a seat or the next job"
    [ "$(pool run-state "$RUN_URI" | cut -d' ' -f1)" = running ] || return 1
    sleep "${TRAINSTACK_POOL_POLL_SECONDS:-30}"
    waited=1
  done
}
end_reason() {
  case $1 in
    0) echo succeeded ;;
    "$EXIT_GUARD") echo guard ;;
    124) echo max_runtime ;;
    *) echo failed ;;
  esac
}

load_settings() {
  [ -f "$ETC/settings.env" ] || return 1
  # shellcheck source=/dev/null
  . "$ETC/settings.env"
  export TRAINSTACK_CHECKPOINT_DIR=$CHECKPOINT_DIR TRAINSTACK_SPOT_MARKER=$SPOT_MARKER \
    TRAINSTACK_CHECKPOINT_SIGNAL=$CHECKPOINT_SIGNAL TRAINSTACK_HOSTFILE=$ETC/hostfile \
    TRAINSTACK_PROGRESS_FILE=$PROGRESS_FILE
  if [ -n "${DATASET_DIR:-}" ]; then # storage.dataset_sync: at-boot (complete once its marker is there)
    export TRAINSTACK_DATASET_DIR=$DATASET_DIR
  fi
  TORCHRUN=(torchrun --nnodes "$NNODES" --nproc-per-node "$NPROC_PER_NODE" --node-rank "$NODE_RANK"
    --master-addr "$MASTER_ADDR" --rdzv-conf "timeout=$RDZV_TIMEOUT_SECONDS" --master-port "$((MASTER_PORT + 1))")
  [ "$ELASTIC" = 1 ] && TORCHRUN=(torchrun --standalone --nnodes 1 --nproc-per-node "$NPROC_PER_NODE")
  return 0
}

# CPFS over NFS from the job settings (a changed export is mounted again: no job runs yet)
mount_cpfs() {
  local current i
  [ -n "${CPFS_SOURCE:-}" ] || return 0
  if mountpoint -q "$CPFS_MOUNT"; then
    current=$(findmnt -no SOURCE "$CPFS_MOUNT" 2>/dev/null || true)
    [ "$current" = "$CPFS_SOURCE" ] && return 0
    log "CPFS export changed ($current -> $CPFS_SOURCE): mounting the new one"
    umount "$CPFS_MOUNT" || return 1
  fi
  mkdir -p "$CPFS_MOUNT"
  if grep -qF " $CPFS_MOUNT nfs " "$FSTAB" 2>/dev/null; then # an older export's line goes
    grep -vF " $CPFS_MOUNT nfs " "$FSTAB" >"$FSTAB.trainstack" || true
    cat "$FSTAB.trainstack" >"$FSTAB" && rm -f "$FSTAB.trainstack"
  fi
  echo "$CPFS_SOURCE $CPFS_MOUNT nfs $CPFS_OPTIONS,_netdev,nofail 0 0" >>"$FSTAB"
  for i in $(seq 1 30); do # the protocol service can still be starting when the first node boots
    mount -t nfs -o "$CPFS_OPTIONS" "$CPFS_SOURCE" "$CPFS_MOUNT" && { log "CPFS $CPFS_SOURCE mounted at $CPFS_MOUNT"; return 0; }
    [ "$i" -lt 30 ] && sleep "${TRAINSTACK_RETRY_SECONDS:-10}"
  done
  return 1
}

# a data or checkpoint disk the stack grew (ResizeDisk online) gets its filesystem grown, online
grow_disks() {
  local mnt
  for mnt in "${DATA_DISK_MOUNT:-}" "${CHECKPOINT_DISK_MOUNT:-}"; do
    if [ -z "$mnt" ] || ! mountpoint -q "$mnt"; then continue; fi
    resize2fs "$(findmnt -no SOURCE "$mnt")" >/dev/null 2>&1 || log "WARNING: cannot grow the filesystem at $mnt"
  done
}

sha256_of() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1; }
# the node programs these job settings name (PROGRAMS_SHA256 in settings.env), from the stack
# bucket's job/programs/ (read-only for the nodes), each file checked against its sha256 before the
# set replaces the installed one; a new set restarts this script as its new version
update_programs() {
  local before
  [ -n "${PROGRAMS_SHA256:-}" ] || { log "the job settings name no node programs: keeping the installed ones"; return 0; }
  before=$(sha256_of "$LIB/programs.json")
  "${TRAINSTACK_OSS_PYTHON:-$OSS_VENV/bin/python}" "$LIB/trainstack_programs.py" --region "$REGION" \
    --endpoint "$OSS_ENDPOINT" "$PROGRAMS_URI" "$LIB" --sha256 "$PROGRAMS_SHA256" || return 1
  [ "$(sha256_of "$LIB/programs.json")" = "$PROGRAMS_SHA256" ] || return 1
  [ "$before" = "$PROGRAMS_SHA256" ] && return 0
  log "node programs ${PROGRAMS_SHA256:0:12} installed: starting again with them"
  systemctl try-restart --no-block trainstack-spot-watcher.service 2>/dev/null || true
  exec bash "$LIB/trainstack-launch.sh"
}
# exec the heartbeat program (OSS venv) with node.env in its environment and, of the job
# settings, only the budget guard's (settings.env holds CODE_URI, which may carry a token)
exec_heartbeat() {
  set -a
  # shellcheck source=/dev/null
  . "$ETC/node.env"
  set +a
  if [ -f "$ETC/settings.env" ]; then
    # shellcheck source=/dev/null
    . "$ETC/settings.env"
    export NNODES NODE_HOURLY_CNY PRICE_SOURCE MAX_TOTAL_COST_CNY DEADLINE_HOURS
  fi
  if [ "${STATUS_PER_INSTANCE:-0}" = 1 ] && [ -n "${STATUS_URI:-}" ]; then # pool nodes share node.env
    STATUS_URI=${STATUS_URI%/}/$(agent meta meta-data/instance-id)/ || exit 1
  fi
  export TRAINSTACK_STATE=$STATE TRAINSTACK_RUN=$RUN TRAINSTACK_LIB=$LIB TRAINSTACK_PROGRESS_FILE=$PROGRESS_FILE
  exec "${TRAINSTACK_OSS_PYTHON:-$OSS_VENV/bin/python}" "$LIB/trainstack_heartbeat.py" "$@"
}
last_heartbeat() { (exec_heartbeat --once); }
# shellcheck source=/dev/null
load_job_env() { . "$ETC/job.env"; } # in a subshell only: the job's variables reach the job alone
pip_install() { "$(command -v python || command -v python3)" -m pip install --index-url "$PIP_INDEX_URL" --trusted-host "$PIP_TRUSTED_HOST" "$@"; }

# what ends billing at the job's end: a pool node scales its pool to 0 (ESS would replace a stopped one:
# ExecuteScalingRule on the stack's one scale-to-0 rule); node 0 and every other node stop themselves
stop_cluster() {
  case "${POOL_ROLE:-}" in
    pool | single)
      log "scaling the self-healing pool to 0 (ExecuteScalingRule on the rule tagged $SCALE_RULE_TAG)"
      python3 "$LIB/trainstack_pool.py" scale-to-zero --region "$REGION" --tag "$SCALE_RULE_TAG" \
        || log "the scale-to-0 rule failed: the pool keeps billing until it is scaled in or destroyed"
      ;;
    *) stop_billing && [ "${POOL_ROLE:-}" = anchor ] && touch "$STATE/cluster-stopped" ;;
  esac
}

stop_billing() {
  log "stopping this instance in no-charge mode (StopInstance, StoppedMode=StopCharging)"
  python3 "$LIB/trainstack_cloud.py" stop-instance --region "$REGION" && { event node_stopped; return 0; }
  log "StopInstance failed: this node keeps billing until it is stopped"
  if [ "$POWEROFF_FALLBACK" = 1 ]; then
    log "powering off from inside (best effort)"
    systemctl poweroff
  fi
}

# new or changed checkpoint files to OSS (the agent keeps a record and a lock in STATE)
upload_checkpoints() {
  [ "${CHECKPOINT_KIND:-}" = oss ] && [ -n "$(ls -A "$CHECKPOINT_DIR" 2>/dev/null)" ] || return 0
  oss "$OSS_ENDPOINT" upload-dir "$CHECKPOINT_DIR" "$OSS_CHECKPOINT_URI" --state "$STATE/ckpt-sync.json" \
    || log "WARNING: checkpoint upload to $OSS_CHECKPOINT_URI failed"
}

# --ckpt-sync (trainstack-ckpt-sync.service): upload every CKPT_SYNC_SECONDS, and every 15 s
# after a spot notice, so a checkpoint saved in the notice window reaches OSS in time
ckpt_sync() {
  mkdir -p "$STATE"
  while :; do
    load_settings || true # the current job settings: checkpoints may have moved to OSS or away from it
    upload_checkpoints
    if [ -e "$SPOT_MARKER" ]; then sleep 15; else sleep "$CKPT_SYNC_SECONDS"; fi
  done
}

# --heartbeat (trainstack-heartbeat.service): the node's status record every HEARTBEAT_SECONDS
# (it waits a while for the first job start to bring the job settings: the guard's limits are there;
# each job start restarts it, so changed limits apply from then on)
heartbeat_service() {
  local waited=0
  mkdir -p "$STATE" "$RUN"
  while [ ! -f "$ETC/settings.env" ] && [ "$waited" -lt "${TRAINSTACK_SETTINGS_WAIT_SECONDS:-300}" ]; do
    sleep 1
    waited=$((waited + 1))
  done
  (alerts follow) & # in the heartbeat's service: restarted with it at each job start (new settings)
  exec_heartbeat
}
# alerts COMMAND (trainstack_alerts.py): node.env and, of the job settings, only what the alerts need
alerts() {
  (
    set -a
    # shellcheck source=/dev/null
    . "$ETC/node.env"
    set +a
    [ -f "$ETC/settings.env" ] || exit 0
    # shellcheck source=/dev/null
    . "$ETC/settings.env"
    [ -n "${ALERTS_SECRET:-}" ] || exit 0
    export NNODES ALERTS_SECRET ALERTS_FORMAT ALERTS_EVENTS ALERTS_RELAY PLAN_TOKENS_PER_SECOND PLAN_HOURLY_CNY \
      TRAINSTACK_STATE=$STATE TRAINSTACK_RUN=$RUN
    exec python3 "$LIB/trainstack_alerts.py" "$@"
  )
}

# why the job stopped, for the heartbeat and `trainstack status` (kept until the job runs again)
record_stop_reason() {
  case $1 in
    "$EXIT_GUARD") [ -f "$GUARD_MARKER" ] && cp "$GUARD_MARKER" "$STATE/stop-reason.json" ;;
    124) printf '{"at": %s, "message": "job.max_runtime_hours reached", "reason": "max_runtime"}\n' \
      "$(date +%s)" >"$STATE/stop-reason.json" ;;
    *) [ -n "${POOL_ROLE:-}" ] && printf '{"at": %s, "message": "the job ended (exit %s): %s", "reason": "%s"}\n' \
      "$(date +%s)" "$1" "${2:-$(end_reason "$1")}" "${2:-$(end_reason "$1")}" >"$STATE/stop-reason.json" ;;
  esac
}

# finish RC: the one way out once the job has started
finish() {
  local rc=$1
  rm -f "$PIDFILE"
  upload_checkpoints
  if [ -e "$SPOT_MARKER" ]; then
    log "exit $rc while the spot instance is reclaimed ($(cat "$SPOT_MARKER")): not marking the job finished"
    exit "$rc"
  fi
  if [ "$STOPPED_FROM_OUTSIDE" = 1 ]; then
    log "exit $rc after SIGTERM (systemctl stop, reboot, shutdown): the job resumes at the next start"
    exit "$rc"
  fi
  if [ "${POOL_ROLE:-}" = pool ] && [ -n "$GENERATION" ]; then
    case $(pool after-exit "$RUN_URI" "$NODE0_STATUS_URI" --grace "${TRAINSTACK_POOL_GRACE_SECONDS:-60}" \
      --loss "${TRAINSTACK_NODE0_LOSS_SECONDS:-$NODE0_LOSS_SECONDS}") in
      rejoin)
        log "exit $rc while the run goes on (node 0 rebooting or replaced): launching into it again"
        sleep "${TRAINSTACK_POOL_POLL_SECONDS:-10}"
        exec bash "$LIB/trainstack-launch.sh"
        ;;
      node0_lost)
        log "no heartbeat from node 0 for ${TRAINSTACK_NODE0_LOSS_SECONDS:-$NODE0_LOSS_SECONDS}s: the job is lost, the pool goes to 0"
        event node0_lost seconds="${TRAINSTACK_NODE0_LOSS_SECONDS:-$NODE0_LOSS_SECONDS}"
        pool run-end "$RUN_URI" --reason node0_lost --rc "$rc" || true
        END_REASON=node0_lost
        ;;
    esac
  fi
  record_stop_reason "$rc" "${END_REASON:-}"
  echo "$rc" >"$STATE/job-finished"
  if [ "${POOL_ROLE:-}" = anchor ]; then
    pool run-end "$RUN_URI" --reason "$(end_reason "$rc")" --rc "$rc" || log "WARNING: the run's end was not recorded"
    event job_ended reason="$(end_reason "$rc")" rc="$rc" generation="$GENERATION"
  elif [ "$NODE_RANK" = 0 ] && [ "${POOL_ROLE:-}" != pool ]; then
    event job_ended reason="$(end_reason "$rc")" rc="$rc" generation="$(head -n 1 "$ETC/.job-settings.sha256" 2>/dev/null)"
  fi
  rm -f "$STATE/job-started"
  if [ -n "${STATUS_URI:-}" ]; then last_heartbeat || log "WARNING: the last heartbeat was not written"; fi
  alerts wait --timeout "${TRAINSTACK_ALERTS_DRAIN_SECONDS:-30}" # bounded: the end reaches the webhook first
  case "$STOP_ON:$rc" in
    always:* | success:0 | success:"$EXIT_GUARD") stop_cluster ;;
    *) log "exit $rc with stop_on=$STOP_ON: leaving the instance running" ;;
  esac
  exit "$rc"
}

extract_into() { agent extract "$1" "$2"; } # ARCHIVE DIR: refuses members that would land outside DIR

fetch_code() {
  local new=$WORKDIR.new tmp top ref=()
  if [ "$CODE_KIND" = none ]; then
    mkdir -p "$WORKDIR"
    log "no job.code_uri: running in $WORKDIR"
    return 0
  fi
  rm -rf "$new"
  mkdir -p "$new"
  tmp=$(mktemp -d)
  case "$CODE_KIND" in
    git)
      [ -n "$CODE_REF" ] && ref=(--branch "$CODE_REF")
      git clone --quiet --depth 1 ${ref[@]+"${ref[@]}"} -- "$CODE_URI" "$new" || return 1
      ;;
    oss-archive) { oss "$CODE_OSS_ENDPOINT" download "$CODE_URI" "$tmp/$CODE_ARCHIVE" && extract_into "$tmp/$CODE_ARCHIVE" "$new"; } || return 1 ;;
    oss-dir) oss "$CODE_OSS_ENDPOINT" download-dir "$CODE_URI" "$new" || return 1 ;;
    oss-file) oss "$CODE_OSS_ENDPOINT" download "$CODE_URI" "$new/${CODE_URI##*/}" || return 1 ;;
    url-archive) { curl -fsSL --retry 5 -o "$tmp/$CODE_ARCHIVE" "$CODE_URI" && extract_into "$tmp/$CODE_ARCHIVE" "$new"; } || return 1 ;;
    *) log "unknown CODE_KIND $CODE_KIND"; return 1 ;;
  esac
  rm -rf "$tmp"
  # an archive of one top-level folder: run inside that folder
  top=$(ls -A "$new")
  if [ -n "$top" ] && [ "$(printf '%s\n' "$top" | wc -l)" -eq 1 ] && [ -d "$new/$top" ] && [ "$CODE_KIND" != git ]; then
    mv "$new" "$new.x" && mv "$new.x/$top" "$new" && rm -rf "$new.x"
  fi
  rm -rf "$WORKDIR" && mv "$new" "$WORKDIR" || return 1
  log "code from $CODE_URI_SHOWN is in $WORKDIR"
  if [ "$INSTALL_REQUIREMENTS" = 1 ] && [ -f "$WORKDIR/requirements.txt" ]; then
    log "installing $WORKDIR/requirements.txt"
    pip_install -r "$WORKDIR/requirements.txt" || return 1
  fi
}

restore_checkpoints() {
  [ "$CHECKPOINT_KIND" = oss ] || return 0
  mkdir -p "$CHECKPOINT_DIR"
  [ -z "$(ls -A "$CHECKPOINT_DIR")" ] || return 0
  log "restoring checkpoints from $OSS_CHECKPOINT_URI"
  # an empty prefix (a first run) is a success; an error is not: the job would start over and
  # its checkpoints would not reach OSS either
  oss "$OSS_ENDPOINT" restore "$OSS_CHECKPOINT_URI" "$CHECKPOINT_DIR" --state "$STATE/ckpt-sync.json"
}

nccl_check() {
  local nodes=$NNODES out=$RUN/nccl-check.log st world
  [ "$ELASTIC" = 1 ] && nodes=1
  world=$((nodes * NPROC_PER_NODE))
  if [ "$world" -le 1 ]; then
    log "one GPU: NCCL check skipped"
    return 0
  fi
  log "NCCL all-reduce check across $world GPUs on $nodes node(s)"
  (
    # what the check runs, taken before job.env: the job's variables (any name but trainstack's TRAINSTACK_*,
    # the topology and the shell's) reach the check and the trainer and cannot change what this script runs
    TRAINSTACK_NCCL_CHECK=("${TORCHRUN[@]}" "$LIB/nccl_check.py")
    TRAINSTACK_NCCL_CHECK_TIMEOUT=$NCCL_CHECK_TIMEOUT_SECONDS
    TRAINSTACK_NCCL_CHECK_DEADLINE=$((RDZV_TIMEOUT_SECONDS + NCCL_CHECK_TIMEOUT_SECONDS))
    unset TORCHRUN # an array cannot be exported: job.env's TORCHRUN would not reach the check
    load_job_env # the job's NCCL settings apply to the check too
    NCCL_DEBUG=INFO TRAINSTACK_NCCL_CHECK_TIMEOUT=$TRAINSTACK_NCCL_CHECK_TIMEOUT \
      exec timeout "$TRAINSTACK_NCCL_CHECK_DEADLINE" "${TRAINSTACK_NCCL_CHECK[@]}"
  ) 2>&1 | tee "$out"
  st=${PIPESTATUS[0]}
  if [ "$st" -ne 0 ]; then
    log "FATAL: NCCL all-reduce check failed (exit $st, 124 = timed out): the GPU fabric between the nodes is broken; see $out"
    return 1
  fi
  if [ "$nodes" -gt 1 ] && [ "$RDMA" != none ] && [ "$REQUIRE_RDMA" = 1 ] && ! grep -q 'NET/IB : Using' "$out"; then
    log "FATAL: NCCL fell back to TCP instead of $RDMA (no 'NET/IB : Using' line in $out)"
    return 1
  fi
}

# sleep_alive PID SECONDS: sleep, but return early (1) when PID has exited
sleep_alive() {
  local pid=$1 end=$(($(date +%s) + $2))
  while [ "$(date +%s)" -lt "$end" ]; do
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 1
  done
}

# at the max-runtime deadline, or when the budget guard asks (GUARD_MARKER): checkpoint signal,
# grace period, SIGTERM, then SIGKILL
watchdog() {
  local pid=$1 why=""
  while kill -0 "$pid" 2>/dev/null; do
    if [ -n "$DEADLINE" ] && [ "$(date +%s)" -ge "$DEADLINE" ]; then
      touch "$RUN/deadline-reached"
      why="max runtime reached"
      break
    fi
    if [ -e "$GUARD_MARKER" ]; then
      why="budget guard: $(cat "$GUARD_MARKER")"
      break
    fi
    sleep 1
  done
  [ -n "$why" ] || return 0
  log "$why: checkpoint signal, ${CHECKPOINT_GRACE_SECONDS}s to save, then stop"
  signal_trainer "$CHECKPOINT_SIGNAL"
  sleep_alive "$pid" "$CHECKPOINT_GRACE_SECONDS" || return 0
  signal_trainer TERM
  sleep_alive "$pid" "$KILL_AFTER_SECONDS" || return 0
  signal_trainer KILL
}

run_trainer() {
  local pid st rc=0 watchdog=""
  cd "$WORKDIR" || return 1
  # its arguments are not logged: they may hold tokens (they are in $ETC/job.env, mode 0600)
  log "starting the trainer with $LAUNCHER (node ${TRAINSTACK_LOCAL_ADDR:-$NODE_RANK} of $NNODES)"
  # the launcher inherits an ignored checkpoint signal (it would die of it); the ranks install a
  # handler. Every process of the job carries TRAINSTACK_TRAINER_PID, so the agent finds them all.
  (
    trap '' "$CHECKPOINT_SIGNAL"
    TRAINSTACK_AGENT=$LIB/trainstack_agent.py TRAINSTACK_REGION=$REGION # before job.env (nccl_check says why)
    unset TORCHRUN
    load_job_env
    export TRAINSTACK_TRAINER_PID=$BASHPID TRAINSTACK_LOCAL_ADDR
    if [ "${#JOB_SECRETS[@]}" -gt 0 ]; then
      exec python3 "$TRAINSTACK_AGENT" exec --region "$TRAINSTACK_REGION" "${JOB_SECRETS[@]/#/--secret=}" -- "${LAUNCH_ARGV[@]}"
    fi
    exec "${LAUNCH_ARGV[@]}"
  ) &
  pid=$!
  echo "$pid" >"$PIDFILE"
  trap 'TRAPPED=1; STOPPED_FROM_OUTSIDE=1; signal_trainer TERM' TERM INT
  trap 'TRAPPED=1; signal_trainer "$CHECKPOINT_SIGNAL"' "$CHECKPOINT_SIGNAL"
  watchdog "$pid" &
  watchdog=$!
  while :; do # wait returns early when a trapped signal arrives; wait again for the real exit
    TRAPPED=0
    wait "$pid"
    st=$?
    [ "$st" -eq 127 ] && break
    rc=$st
    [ "$TRAPPED" = 1 ] || break
  done
  if [ -n "$watchdog" ]; then kill "$watchdog" 2>/dev/null; fi
  agent reap --root "$pid" --timeout "$KILL_AFTER_SECONDS" # what a dying launcher left running
  trap - TERM INT "$CHECKPOINT_SIGNAL"
  return "$rc"
}

main() {
  local rc now chosen
  mkdir -p "$STATE" "$RUN"
  if [ -f "$STATE/job-finished" ] && [ -f "$STATE/cluster-stopped" ] && [ "${POOL_ROLE:-}" = anchor ]; then
    # node 0 stopped itself at the last job's end: only a person (or `pulumi up --refresh`) starts it again
    log "started after the last job stopped the cluster: starting the next job"
    rm -f "$STATE/job-finished" "$STATE/cluster-stopped"
  fi
  if [ -f "$STATE/job-finished" ]; then
    log "the job already ran (exit $(cat "$STATE/job-finished")); remove $STATE/job-finished and restart trainstack-job to run it again"
    exit 0
  fi
  if [ -e "$SPOT_MARKER" ]; then
    log "this spot instance is being reclaimed: not starting the job"
    exit 0
  fi
  chosen=0
  choose_settings || chosen=$?
  if [ "$chosen" = 2 ]; then
    log "node 0 started no run to join: this pool node ends here"
    record_stop_reason 0 no_run
    echo 0 >"$STATE/job-finished"
    stop_cluster
    exit 0
  fi
  if [ "$chosen" != 0 ] || ! load_settings; then
    log "FATAL: cannot read the job settings $JOB_SETTINGS_URI (or they do not match this instance's $JOB_SETTINGS_TAG tag)"
    finish "$EXIT_SETTINGS"
  fi
  if ! update_programs; then
    log "FATAL: cannot install the node programs ${PROGRAMS_SHA256:-?} the job settings name (from $PROGRAMS_URI): nothing of them runs"
    finish "$EXIT_PROGRAMS"
  fi
  if [ -n "${STATUS_URI:-}" ] && [ "$(cat "$RUN/heartbeat-settings" 2>/dev/null)" != "$(sha256_of "$ETC/settings.env")" ]; then
    sha256_of "$ETC/settings.env" >"$RUN/heartbeat-settings" # the guard takes the new limits
    systemctl try-restart --no-block trainstack-heartbeat.service 2>/dev/null || true
  fi
  mount_cpfs || { log "FATAL: cannot mount CPFS $CPFS_SOURCE at $CPFS_MOUNT"; finish "$EXIT_CPFS"; }
  grow_disks
  mkdir -p "$CHECKPOINT_DIR"
  if [ -n "$MAX_RUNTIME_SECONDS" ]; then # the clock starts at the first launch and survives reboots
    now=$(date +%s)
    [ -f "$STATE/deadline" ] || echo "$((now + MAX_RUNTIME_SECONDS))" >"$STATE/deadline"
    DEADLINE=$(cat "$STATE/deadline")
    [ "$now" -lt "$DEADLINE" ] || { log "max runtime already used up"; finish 124; }
  fi
  rm -f "$RUN/deadline-reached" "$GUARD_MARKER" "$STATE/stop-reason.json"
  fetch_code || { log "FATAL: cannot fetch job.code_uri $CODE_URI_SHOWN"; finish 11; }
  restore_checkpoints || { log "FATAL: cannot restore checkpoints from $OSS_CHECKPOINT_URI"; finish 13; }
  if [ "$ELASTIC" = 1 ]; then
    TRAINSTACK_LOCAL_ADDR=$(agent meta meta-data/private-ipv4) && [ -n "$TRAINSTACK_LOCAL_ADDR" ] \
      || { log "FATAL: no private IP from the metadata service"; finish "$EXIT_ADDRESS"; }
  fi
  nccl_check || finish 10
  wait_for_seat || { log "the run ended while this node waited for a seat"; GENERATION=""; finish 0; }
  if [ -e "$GUARD_MARKER" ]; then
    log "budget guard: $(cat "$GUARD_MARKER"): not starting the trainer"
    finish "$EXIT_GUARD"
  fi
  if [ "$NODE_RANK" = 0 ] && [ "${POOL_ROLE:-}" != anchor ]; then # node 0 of a plain cluster (or a 1-node pool)
    if [ -f "$STATE/job-started" ]; then
      event job_resumed generation="$(head -n 1 "$ETC/.job-settings.sha256")" why="the node started again"
    else
      event job_started generation="$(head -n 1 "$ETC/.job-settings.sha256")" && touch "$STATE/job-started"
    fi
  fi
  run_trainer
  rc=$?
  if [ -e "$RUN/deadline-reached" ]; then
    rc=124
  elif [ -e "$GUARD_MARKER" ]; then
    rc=$EXIT_GUARD
  fi
  log "trainer exited with $rc"
  finish "$rc"
}

case "${1:-}" in
  --ckpt-sync) ckpt_sync ;;
  --heartbeat) heartbeat_service ;;
esac
main
