#!/usr/bin/env bash
# Java for Spark (`tfxp engine start spark`, the tests on a standalone Spark cluster):
# Spark 3.5's daemons and executors are JVMs; pyspark ships Spark's jars but no Java.
#
#   scripts/java.sh install   apt-get install openjdk-17-jre-headless (root; no-op if Java >= 17 runs)
#   scripts/java.sh check     exit 0 if Java >= 17 runs, print its version
#
# Spark finds Java as spark-class does: $JAVA_HOME/bin/java, else `java` on PATH.
set -euo pipefail

PACKAGE=openjdk-17-jre-headless
log() { printf '[java] %s\n' "$*" >&2; }
die() { printf '[java] ERROR: %s\n' "$*" >&2; exit 1; }

java_bin() {
  if [[ -n "${JAVA_HOME:-}" ]]; then echo "$JAVA_HOME/bin/java"; else command -v java || true; fi
}

major() {  # the major version of the java that runs, or 0
  local bin line v
  bin="$(java_bin)"
  [[ -n "$bin" && -x "$bin" ]] || { echo 0; return; }
  line="$("$bin" -version 2>&1 | head -n1)" || { echo 0; return; }
  v="$(sed -E 's/.*version "([0-9]+)(\.([0-9]+))?.*/\1 \3/' <<<"$line")"
  # Java 8 and older say "1.8.0_x": the major is the second number.
  read -r first second <<<"$v"
  if [[ "$first" == 1 ]]; then echo "${second:-0}"; elif [[ "$first" =~ ^[0-9]+$ ]]; then echo "$first"; else echo 0; fi
}

cmd_check() {
  local m; m="$(major)"
  (( m >= 17 )) || die "Java 17 or newer is needed (found: $([[ $m == 0 ]] && echo none || echo "$m")); run: sudo $0 install"
  log "$("$(java_bin)" -version 2>&1 | head -n1) at $(java_bin)"
}

cmd_install() {
  if (( $(major) >= 17 )); then cmd_check; return 0; fi
  [[ "$(id -u)" == 0 ]] || die "Java 17 is not installed; run as root: apt-get update && apt-get install -y $PACKAGE (or: sudo $0 install)"
  command -v apt-get >/dev/null || die "Java 17 is not installed and there is no apt-get; install a Java 17 runtime and put it on PATH (or set JAVA_HOME)"
  log "installing $PACKAGE with apt-get (a minute or two)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "$PACKAGE" >&2 || die "apt-get install $PACKAGE failed"
  # A JAVA_HOME pointing at an older Java would still win over the new one.
  if [[ -n "${JAVA_HOME:-}" ]] && (( $(major) < 17 )); then
    die "installed $PACKAGE, but JAVA_HOME=$JAVA_HOME still names an older Java: unset it"
  fi
  cmd_check
}

case "${1:-}" in
  install) shift; cmd_install "$@" ;;
  check) shift; cmd_check "$@" ;;
  *) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
