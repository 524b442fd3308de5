#!/usr/bin/env bash
# Link launcher (RULE_LAUNCH_LINK) of ringmaster-rank and ringmaster-rsh, which start with every
# rank: runs the link command it is given with each shared library that has a static archive
# beside it (Debian's -dev packages ship both) taken from the archive, plus the archives those
# need in turn (gRPC's core, upb, re2, c-ares, zlib, OpenSSL, Abseil), in one group. The
# binary then starts without the dynamic loader resolving about 15,000 relocations over 57
# shared objects: 1.5 ms of CPU instead of 7.5 ms (docs/workers.md, "What a rank's start
# costs"). libc, libstdc++ and the rest stay shared.
set -euo pipefail
args=()
archives=()
for arg in "$@"; do
  if [[ $arg =~ ^(/[^[:space:]]*/lib[^/]*)\.so(\.[0-9.]+)?$ ]] && [[ -f ${BASH_REMATCH[1]}.a ]]; then
    archives+=("${BASH_REMATCH[1]}.a")
  else
    args+=("$arg")
  fi
done
if [ ${#archives[@]} -eq 0 ]; then exec "$@"; fi
dir=$(dirname "${archives[0]}")
for name in grpc gpr upb address_sorting re2 cares z ssl crypto protobuf; do
  [ -f "$dir/lib$name.a" ] && archives+=("$dir/lib$name.a")
done
shopt -s nullglob
archives+=("$dir"/libabsl_*.a)
exec "${args[@]}" -Wl,--start-group "${archives[@]}" -Wl,--end-group -ldl -lpthread
