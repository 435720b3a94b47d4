#!/usr/bin/env bash
# Headless Chromium and its WebDriver from Debian's packages, for the browser
# test of the validation report (tests/unit/test_report_browser.py).
#
#   scripts/chromium.sh install   apt-get install chromium chromium-driver (root; no-op if present)
#   scripts/chromium.sh check     exit 0 if both are installed, print their versions
#
# No browser download happens at test time: selenium is pointed at Debian's
# /usr/bin/chromedriver, which drives /usr/bin/chromium (same version).
set -euo pipefail

log() { printf '[chromium] %s\n' "$*" >&2; }
die() { printf '[chromium] ERROR: %s\n' "$*" >&2; exit 1; }

installed() { [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; }

cmd_check() {
  installed || die "chromium/chromium-driver not installed; run: sudo $0 install"
  log "$(/usr/bin/chromium --version 2>/dev/null) / $(/usr/bin/chromedriver --version 2>/dev/null | cut -d' ' -f1-2)"
}

cmd_install() {
  if installed; then cmd_check; return 0; fi
  [[ "$(id -u)" == 0 ]] || die "chromium is not installed; run as root: apt-get update && apt-get install -y chromium chromium-driver (or: sudo $0 install)"
  command -v apt-get >/dev/null || die "chromium is not installed and there is no apt-get; install Chromium and a matching chromedriver at /usr/bin/chromium and /usr/bin/chromedriver"
  log "installing chromium and chromium-driver with apt-get (a minute or two)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >&2 \
    || die "apt-get install chromium chromium-driver failed"
  installed || die "installed, but /usr/bin/chromium or /usr/bin/chromedriver is missing"
  cmd_check
}

case "${1:-}" in
  install) shift; cmd_install "$@" ;;
  check) shift; cmd_check "$@" ;;
  *) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
