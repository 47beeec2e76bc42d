# Sourced by in-container.sh and under-systemd.sh: how a check is reported and counted, and an
# HTTP GET without curl.
# shellcheck shell=bash

failures=0
started=0
step() { started=$(date +%s); echo "== $1"; }
done_step() { echo "-- $1: $(($(date +%s) - started)) s"; }
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }

# An HTTP GET over bash's /dev/tcp (the base image has no curl): the status line.
http_status() {  # http_status PORT PATH
  local line
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
  IFS= read -r -t 5 line <&3 || line=
  exec 3>&-
  printf '%s\n' "${line%$'\r'}"
}
