#!/bin/bash
# The health check of Ringmaster's images, with what a slim image has (bash, no curl):
#
#   ringmaster-healthcheck http PATH HOST:PORT    an HTTP GET of PATH answers 200
#   ringmaster-healthcheck scheduler HOST:PORT    the scheduler's job API answers (ringctl)
#
# A wildcard listen address (0.0.0.0, [::], empty host) is checked on 127.0.0.1.
set -uo pipefail

die() { echo "ringmaster-healthcheck: $*" >&2; exit 1; }

# Splits HOST:PORT into $host and $port.
split() {
  host=${1%:*}
  port=${1##*:}
  case $host in "" | 0.0.0.0 | "[::]" | "::") host=127.0.0.1 ;; esac
  host=${host#[}
  host=${host%]}
  [[ $port =~ ^[0-9]+$ ]] || die "bad address '$1' (want HOST:PORT)"
}

http_ok() {
  local path=$1 status
  exec 3<>"/dev/tcp/$host/$port" || die "nothing listens on $host:$port"
  printf 'GET %s HTTP/1.0\r\nHost: %s:%s\r\nConnection: close\r\n\r\n' "$path" "$host" "$port" >&3
  IFS= read -r -t 5 status <&3 || die "no answer from http://$host:$port$path"
  exec 3<&-
  [[ $status =~ ^HTTP/1\.[01]\ 200 ]] || die "http://$host:$port$path: ${status%$'\r'}"
}

case "${1:-}" in
  http)
    [ $# -eq 3 ] || die "usage: ringmaster-healthcheck http PATH HOST:PORT"
    split "$3"
    http_ok "$2"
    ;;
  scheduler)
    [ $# -eq 2 ] || die "usage: ringmaster-healthcheck scheduler HOST:PORT"
    split "$2"
    ringctl --scheduler "$host:$port" workers >/dev/null || exit 1
    ;;
  *) die "usage: ringmaster-healthcheck http PATH HOST:PORT | scheduler HOST:PORT" ;;
esac
