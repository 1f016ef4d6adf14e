set -euo pipefail

ETC=${TRAINSTACK_ETC:-/etc/trainstack}
STATE=${TRAINSTACK_STATE:-/var/lib/trainstack}
RUN=${TRAINSTACK_RUN:-/run/trainstack}
LIB=${TRAINSTACK_LIB:-/usr/local/lib/trainstack}
# shellcheck source=/dev/null
. "$ETC/node.env"

log() { printf '%s trainstack-setup: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }
# image_lacks PART WHY: the profile's image_provides named PART (IMAGE_PROVIDES), yet this boot must install
# it: say so loudly (the plan's replacement time assumed no install), then the caller installs it anyway
image_lacks() {
  case " ${IMAGE_PROVIDES:-} " in
    *" $1 "*) log "WARNING: image_provides names $1 but $2: installing it after all (minutes the plan did not count)" ;;
  esac
}
agent() { python3 "$LIB/trainstack_agent.py" "$@"; }

# pkg RPM_NAMES DEB_NAMES: install with whichever package manager the image has
pkg() {
  local rpm=$1 deb=$2
  if command -v yum >/dev/null 2>&1; then
    # shellcheck disable=SC2086  # word splitting: lists of package names
    yum install -y $rpm
  elif command -v apt-get >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y $deb \
      || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $deb; }
  else
    die "no yum or apt-get on this image to install: $rpm"
  fi
}
