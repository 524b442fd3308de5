# The control plane a benchmark runs against, on loopback: a throw-away Postgres (fsync on, as in
# production; extra server options from $PG_OPTS), Redis and ringmaster-scheduler, all stopped
# and removed when the script exits. Source it after setting `root` and `build`.
#   stack_start [SCHEDULER FLAGS...]   starts them and waits for the scheduler's gRPC port; sets
#       tmp, url (the ringmaster database), pg_port, redis_port, grpc_port, metrics_port, and the
#       pids redis and scheduler. Add further background pids to `pids` to have them stopped too.
#   With STACK_TLS=1 the scheduler serves TLS with development certificates made in $tmp/certs
#   (scripts/lib/dev_certs.sh) and RINGMASTER_TLS_CA is exported for the clients, and checks
#   bearer tokens: it makes an admin token, exported as RINGMASTER_TOKEN. Otherwise it runs
#   --insecure on loopback, RINGMASTER_INSECURE=1 is exported, and calls need no token
#   (--insecure-no-auth) unless STACK_AUTH=1.
#   stack_stop stops everything; stack_start may then be called again.
#   stack_quickstart_workers TAG   starts two workers shaped like the quickstart's (127.0.0.2 and
#       .3, 2 simulated t4 each, no CPU slots, plaintext), their pids in `workers`, defines
#       `ringctl` (plaintext, this scheduler) and waits until both are READY.
#   SCHEDULER_BIN runs another scheduler binary (an A/B against a build of an older commit).
#   Measuring helpers: ticks_of PIDS (CPU clock ticks, user + system, of those processes),
#   pg_pids (the postmaster and its backends), pg_ticks (Postgres's CPU ticks, the backends
#   that ended included), commit_summary (the scheduler's group commits, from its /metrics),
#   submit_wait_summary [CLIENT_MS] (a stored submit's wait by stage), median (of the numbers
#   on stdin, separated by spaces or lines).
source "$root/scripts/lib/pg.sh"

# CPU clock ticks (user + system) of the given processes, from /proc; gone ones count 0.
ticks_of() {
  local total=0 p
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    total=$((total + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
  done
  echo "$total"
}
pg_pids() { pgrep -P "$(head -1 "$tmp/pg/postmaster.pid")" | tr '\n' ' '; head -1 "$tmp/pg/postmaster.pid"; }
# Postgres's CPU ticks so far: its live processes' and those of the backends it has reaped (a
# client's connection that closed took its backend's CPU with it from pg_pids).
pg_ticks() {
  local postmaster live
  postmaster=$(head -1 "$tmp/pg/postmaster.pid")
  live=$(ticks_of $(pg_pids))
  echo $((live + $(sed 's/.*) //' "/proc/$postmaster/stat" | awk '{print $14 + $15}')))
}
# The scheduler's group commits so far: transactions, writes in each, mean time.
commit_summary() {
  curl -s "http://127.0.0.1:$metrics_port/metrics" | awk '
    /^ringmaster_store_commit_seconds_sum/ {cs=$2} /^ringmaster_store_commit_seconds_count/ {cc=$2}
    /^ringmaster_store_batch_writes_sum/ {bs=$2} /^ringmaster_store_batch_writes_count/ {bc=$2}
    END { if (cc > 0) printf "  scheduler: %d transactions, %.1f writes each, %.2f ms each (mean)\n", cc, bs/bc, 1000*cs/cc }'
}
# Where the scheduler's stored submits waited so far (ringmaster_submit_wait_seconds), mean ms
# per stage; CLIENT_MS, if given, is the clients' mean round trip, and what the stages do not
# explain of it is the way in and out (gRPC on both ends, the network, waiting for a CPU).
submit_wait_summary() {
  curl -s "http://127.0.0.1:$metrics_port/metrics" | awk -v client="${1:-}" '
    /^ringmaster_submit_wait_seconds_sum/ {match($0, /stage="[a-z]+"/); st=substr($0, RSTART+7, RLENGTH-8); sum[st]=$2}
    /^ringmaster_submit_wait_seconds_count/ {match($0, /stage="[a-z]+"/); st=substr($0, RSTART+7, RLENGTH-8); cnt[st]=$2}
    END {
      if (cnt["commit"] == 0) exit
      total = 0; line = ""
      split("queued commit apply", order, " ")
      for (k = 1; k <= 3; k++) { s = order[k]; ms = 1000 * sum[s] / cnt[s]; total += ms
        line = line sprintf("%s %.2f, ", s, ms) }
      printf "  a submit in the scheduler (mean ms): %sin all %.2f", line, total
      if (client != "") printf "; the client saw %.2f, so %.2f on the way in and out", client, client - total
      printf "\n" }'
}

pids=()
stack_stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${tmp:-}" ] && pg_stop "$tmp/pg" && rm -rf "$tmp"
  pids=()
  tmp=
}

stack_start() {
  tmp=$(mktemp -d /tmp/ringmaster-bench.XXXXXX)
  chmod 755 "$tmp"
  trap stack_stop EXIT
  pg_port=$(free_port); redis_port=$(free_port); grpc_port=$(free_port); metrics_port=$(free_port)
  pg_start "$tmp/pg" "$pg_port"
  pg_as_owner "$PG_BIN/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres ringmaster
  url="postgresql://postgres@127.0.0.1:$pg_port/ringmaster"
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    >"$tmp/redis.log" 2>&1 &
  redis=$!
  pids+=($redis)
  local transport=(--insecure)
  # Plaintext is the baseline: no bearer tokens either (--insecure-no-auth), unless STACK_AUTH=1.
  [ "${STACK_AUTH:-0}" = 1 ] || transport+=(--insecure-no-auth)
  unset RINGMASTER_TOKEN
  # Nor the user's own token file (~/.config/ringmaster/token, left by scripts/quickstart): this
  # stack's Postgres does not know it, and every call that sent it would be refused.
  export XDG_CONFIG_HOME=$tmp/config
  if [ "${STACK_TLS:-0}" = 1 ]; then
    "$root/scripts/lib/dev_certs.sh" "$tmp/certs"
    # TLS and bearer tokens: the scheduler makes an admin token, exported below as
    # RINGMASTER_TOKEN for the benchmark's client.
    rm -f "$tmp/admin-token"
    transport=(--tls-cert "$tmp/certs/scheduler/tls.crt" --tls-key "$tmp/certs/scheduler/tls.key"
      --tls-ca "$tmp/certs/ca.crt" --admin-token-file "$tmp/admin-token")
    export RINGMASTER_TLS_CA=$tmp/certs/ca.crt
    unset RINGMASTER_INSECURE
  else
    export RINGMASTER_INSECURE=1
    unset RINGMASTER_TLS_CA
    # Plaintext with tokens (STACK_AUTH=1): the same admin token, to tell TLS's cost apart from
    # the token checks' and the audit trail's.
    if [ "${STACK_AUTH:-0}" = 1 ]; then
      rm -f "$tmp/admin-token"
      transport+=(--admin-token-file "$tmp/admin-token")
    fi
  fi
  "${SCHEDULER_BIN:-$build/services/scheduler/ringmaster-scheduler}" --listen "127.0.0.1:$grpc_port" \
    --metrics-listen "127.0.0.1:$metrics_port" --postgres-url "$url" \
    --redis-addr "127.0.0.1:$redis_port" "${transport[@]}" "$@" >"$tmp/scheduler.log" 2>&1 &
  scheduler=$!
  pids+=($scheduler)
  for _ in $(seq 100); do
    if (echo >/dev/tcp/127.0.0.1/$grpc_port) 2>/dev/null; then
      [ -s "$tmp/admin-token" ] && export RINGMASTER_TOKEN=$(cat "$tmp/admin-token")
      return 0
    fi
    sleep 0.1
  done
  echo "the scheduler did not open 127.0.0.1:$grpc_port:" >&2
  tail -20 "$tmp/scheduler.log" >&2
  return 1
}

median() {
  tr ' ' '\n' | grep . | sort -n |
    awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'
}

stack_quickstart_workers() {
  local w id address port
  workers=()
  for w in "w1 127.0.0.2" "w2 127.0.0.3"; do
    id=${w%% *} address=${w##* }
    port=$(python3 -c "import socket; s=socket.socket(); s.bind(('$address',0)); print(s.getsockname()[1])")
    "$build/services/worker/ringmaster-worker" --worker-id "$id-$1$$" --address "$address" \
      --listen "$address:$port" --metrics-listen "127.0.0.1:$(free_port)" \
      --scheduler "127.0.0.1:$grpc_port" --simulate-gpus 2 --simulate-gpu-type t4 --cpu-slots 0 \
      --log-dir "$tmp/logs/$id" --log-level warning --insecure >"$tmp/$id.log" 2>&1 &
    pids+=($!)
    workers+=($!)
  done
  ringctl() { "$build/cli/ringctl" --scheduler "127.0.0.1:$grpc_port" --insecure "$@"; }
  for _ in $(seq 300); do
    [ "$(ringctl workers 2>/dev/null | grep -c READY || true)" -ge 2 ] && return 0
    sleep 0.1
  done
  echo "the workers did not become READY:" >&2
  tail -5 "$tmp"/w*.log >&2
  return 1
}
