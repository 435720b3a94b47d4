#!/usr/bin/env bash
# A private MariaDB server for ML Metadata on MySQL: tests, demos, local use.
#
#   scripts/mariadb.sh install                      apt-get install mariadb-server (root; no-op if present)
#   scripts/mariadb.sh start DIR PORT [DB USER PW]  init DIR if new, start on 127.0.0.1:PORT, wait,
#                                                   create database DB and user USER/PW (default mlmd/mlmd/mlmd)
#   scripts/mariadb.sh stop DIR                     shut the server down and wait until it is gone
#   scripts/mariadb.sh status DIR                   exit 0 if it accepts connections
#
# The server is a plain background process (no service manager): data, temp dir, socket,
# pid file and error log all live in DIR, and it listens on loopback only.
# Connect ML Metadata with: --mysql-host 127.0.0.1 --mysql-port PORT
# --mysql-database DB --mysql-user USER and MLMD_MYSQL_PASSWORD=PW.
set -euo pipefail

log() { printf '[mariadb] %s\n' "$*" >&2; }
die() { printf '[mariadb] ERROR: %s\n' "$*" >&2; exit 1; }

find_bin() {  # first existing program among the names given
  local n
  for n in "$@"; do
    if command -v "$n" >/dev/null 2>&1; then command -v "$n"; return 0; fi
    for d in /usr/sbin /usr/bin /usr/local/sbin /usr/local/bin; do
      [[ -x "$d/$n" ]] && { echo "$d/$n"; return 0; }
    done
  done
  return 1
}

installed() { find_bin mariadbd mysqld >/dev/null && find_bin mariadb-install-db mysql_install_db >/dev/null; }

cmd_install() {
  if installed; then log "mariadb-server is installed"; return 0; fi
  [[ "$(id -u)" == 0 ]] || die "mariadb-server is not installed; run as root: apt-get update && apt-get install -y mariadb-server (or: sudo $0 install)"
  command -v apt-get >/dev/null || die "mariadb-server is not installed and there is no apt-get; install MariaDB 10.11 (mariadbd, mariadb-install-db, mariadb-admin) with your package manager"
  log "installing mariadb-server with apt-get (about a minute)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  # policy-rc.d: no service manager here, and the package must not start a system-wide server.
  local policy=/usr/sbin/policy-rc.d created=0
  if [[ ! -e "$policy" ]]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; created=1; fi
  apt-get install -y -qq --no-install-recommends mariadb-server mariadb-client >&2 || {
    [[ $created == 1 ]] && rm -f "$policy"; die "apt-get install mariadb-server failed"; }
  [[ $created == 1 ]] && rm -f "$policy"
  installed || die "mariadb-server installed but mariadbd/mariadb-install-db not found"
  log "installed $("$(find_bin mariadbd mysqld)" --version)"
}

paths() {  # sets DATA TMPD SOCK PID ERRLOG for $1
  local dir; dir="$(mkdir -p "$1" && cd "$1" && pwd)"
  DATA="$dir/data"; TMPD="$dir/tmp"; PID="$dir/mariadb.pid"; ERRLOG="$dir/mariadb.err"; SOCK="$dir/mariadb.sock"
  # Unix socket paths are limited to ~107 bytes; long temp dirs get a short socket path.
  if (( ${#SOCK} > 100 )); then
    if [[ -f "$dir/socket-path" ]]; then SOCK="$(cat "$dir/socket-path")"
    else SOCK="$(mktemp -d /tmp/mariadb.XXXXXX)/sock"; echo "$SOCK" >"$dir/socket-path"; fi
  fi
}

admin() { "$(find_bin mariadb-admin mysqladmin)" --no-defaults --socket="$SOCK" -uroot "$@"; }
client() { "$(find_bin mariadb mysql)" --no-defaults --socket="$SOCK" -uroot "$@"; }

alive() { [[ -f "$PID" ]] && kill -0 "$(cat "$PID")" 2>/dev/null; }

cmd_start() {
  [[ $# -ge 2 ]] || die "usage: $0 start DIR PORT [DATABASE USER PASSWORD]"
  local port="$2" db="${3:-mlmd}" user="${4:-mlmd}" pw="${5:-mlmd}"
  [[ "$port" =~ ^[0-9]+$ ]] || die "PORT must be a number, not '$port'"
  installed || die "mariadb-server is not installed; run: sudo $0 install (apt-get install -y mariadb-server)"
  paths "$1"
  local me; me="$(id -un)"
  if alive; then log "already running (pid $(cat "$PID")) in $1"; else
    # A temp dir of its own (default /tmp): a starting server deletes every #sql*
    # file in its tmpdir as a crash leftover, other servers' live temporary tables
    # included. Two servers starting together in /tmp (tests on two workers) made
    # mariadb-install-db fail with "Unknown table 'mysql.tmp_proxies_priv'".
    mkdir -p "$TMPD"
    if [[ ! -d "$DATA/mysql" ]]; then
      log "initializing $DATA"
      mkdir -p "$DATA"
      "$(find_bin mariadb-install-db mysql_install_db)" --no-defaults --user="$me" \
        --datadir="$DATA" --tmpdir="$TMPD" --auth-root-authentication-method=normal --skip-test-db \
        >"$1/install-db.log" 2>&1 || { tail -20 "$1/install-db.log" >&2; die "mariadb-install-db failed (log: $1/install-db.log)"; }
    fi
    : >"$ERRLOG"
    # Run as the invoking user (root included, explicitly allowed by --user): the
    # data dir may sit under a private temp dir other users cannot enter.
    nohup "$(find_bin mariadbd mysqld)" --no-defaults --user="$me" --datadir="$DATA" \
      --tmpdir="$TMPD" --socket="$SOCK" --port="$port" --bind-address=127.0.0.1 --pid-file="$PID" \
      --log-error="$ERRLOG" --skip-name-resolve --innodb-buffer-pool-size=32M \
      --innodb-log-file-size=16M --max-connections=200 >/dev/null 2>&1 &
    local started=$SECONDS
    until admin --connect-timeout=2 ping >/dev/null 2>&1; do
      if (( SECONDS - started > 60 )); then tail -20 "$ERRLOG" >&2; die "server did not accept connections within 60 s (log: $ERRLOG)"; fi
      if ! kill -0 $! 2>/dev/null; then tail -20 "$ERRLOG" >&2; die "server exited during start-up (port $port in use? log: $ERRLOG)"; fi
      sleep 0.3
    done
    log "started pid $(cat "$PID") on 127.0.0.1:$port in $((SECONDS - started)) s (socket $SOCK)"
  fi
  client -e "
    DROP USER IF EXISTS ''@'localhost';
    DROP USER IF EXISTS ''@'$(hostname)';
    CREATE DATABASE IF NOT EXISTS \`$db\`;
    CREATE USER IF NOT EXISTS '$user'@'%' IDENTIFIED BY '$pw';
    CREATE USER IF NOT EXISTS '$user'@'localhost' IDENTIFIED BY '$pw';
    GRANT ALL PRIVILEGES ON \`$db\`.* TO '$user'@'%';
    GRANT ALL PRIVILEGES ON \`$db\`.* TO '$user'@'localhost';
    FLUSH PRIVILEGES;" || die "could not create database $db / user $user"
  echo "host=127.0.0.1 port=$port database=$db user=$user socket=$SOCK"
}

cmd_stop() {
  [[ $# -ge 1 ]] || die "usage: $0 stop DIR"
  paths "$1"
  if ! alive; then log "not running in $1"; return 0; fi
  local pid; pid="$(cat "$PID")"
  admin shutdown >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
  local started=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    if (( SECONDS - started > 30 )); then log "still running after 30 s; sending SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; fi
    sleep 0.2
  done
  log "stopped pid $pid"
}

cmd_status() { paths "$1"; alive && admin ping >/dev/null 2>&1; }

case "${1:-}" in
  install) shift; cmd_install "$@" ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) shift; cmd_status "$@" ;;
  *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
