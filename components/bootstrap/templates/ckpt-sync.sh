#!/bin/bash
# trainstack-ckpt-sync: upload new checkpoint files to OSS every CKPT_SYNC_SECONDS, and every
# 15 s once a spot termination notice has arrived, so a checkpoint written inside the notice
# window reaches OSS before the instance is released. Only newer files are sent (cp -u).
# Trainers should write a checkpoint to a temporary name and rename it when complete.
set -uo pipefail

ETC=${TRAINSTACK_ETC:-/etc/trainstack}
RUN=${TRAINSTACK_RUN:-/run/trainstack}
LIB=${TRAINSTACK_LIB:-/usr/local/lib/trainstack}
# shellcheck source=/dev/null
. "$ETC/node.env"

log() { printf '%s trainstack-ckpt-sync: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }

while :; do
  if [ -n "$(ls -A "$CHECKPOINT_DIR" 2>/dev/null)" ]; then
    python3 "$LIB/trainstack_agent.py" oss --region "$REGION" --endpoint "$OSS_ENDPOINT" \
      cp -r -u -f "$CHECKPOINT_DIR/" "$OSS_CHECKPOINT_URI" || log "upload failed; retrying next round"
  fi
  if [ -e "$RUN/spot-termination-time" ]; then sleep 15; else sleep "$CKPT_SYNC_SECONDS"; fi
done
