#!/usr/bin/env bash
# The compose stack for real, the way a user runs it, with no image registry:
#
#   tests/compose/compose_test.sh [BUILD_DIR]     (CTest: compose_stack_test, label compose)
#
#  1. Uses the Docker engine that answers, else starts dockerd (no default bridge, no iptables
#     rules: everything here uses host networking) and stops it at the end.
#  2. Makes debian:bookworm-slim from Debian's mirror (docker/make-base-image.sh) when it is
#     neither present nor pullable.
#  3. Validates compose/docker-compose.yml, its GPU override and this test's override
#     (docker-compose config -q).
#  4. Builds every image with `docker-compose build` (host networking; the project is compiled
#     inside Docker), and the all-in-one ringmaster image of docker/Dockerfile, whose binaries
#     must all start.
#  5. `docker-compose up -d` with compose/docker-compose.yml plus one override,
#     tests/compose/docker-compose.offline.yml, which leaves Grafana out: its image cannot be
#     had offline. Ports are free ones picked on loopback, passed in an env file: the control
#     plane on 127.0.0.1, the workers on 127.0.0.2 and 127.0.0.3. All traffic stays on lo.
#  6. Waits for both workers READY, runs a 1-rank job with the host's ringctl, then submits a
#     4-rank job with ringctl inside the scheduler container (`docker-compose exec`) and
#     follows it with the host's ringctl to SUCCEEDED. Every gRPC connection is TLS, with the
#     certificates compose's `certs` service made in a directory of this test
#     (RINGMASTER_TLS_DIR).
#  7. Reads the job's ringmaster_job_images_per_second from Prometheus' HTTP API (> 0), checks
#     Prometheus scrapes the scheduler, both workers and the metrics service, and that every
#     panel query of dashboards/ (what Grafana would draw from this Prometheus) has data.
#  8. `docker-compose down -v --remove-orphans`, also on failure, and checks no container,
#     network or volume of the project is left. On failure it prints the services' logs.
#
# Needs root (dockerd, debootstrap), docker.io, docker-compose, debootstrap, curl, python3 and
# Debian's package mirror (scripts/setup installs the packages). Images are kept afterwards
# (tag compose-test), so a second run builds from Docker's cache.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ringctl_bin=$build/cli/ringctl
compose_file=$root/compose/docker-compose.yml
gpu_file=$root/compose/docker-compose.gpu.yml
offline_file=$root/tests/compose/docker-compose.offline.yml
project=rmtest$$
tag=compose-test
tmp=$(mktemp -d /tmp/ringmaster-compose-test.XXXXXX)
env_file=$tmp/compose.env
t0=$SECONDS

say() { printf '[compose_test %4ds] %s\n' $((SECONDS - t0)) "$*"; }
fail() {
  printf '[compose_test %4ds] FAIL: %s\n' $((SECONDS - t0)) "$*" >&2
  exit 1
}

# The build must not switch builders under us: the classic one is what docker-compose 1.29
# and Debian's docker.io use.
export DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0
unset COMPOSE_FILE COMPOSE_PROJECT_NAME COMPOSE_PROFILES

compose() {
  docker-compose --env-file "$env_file" -p "$project" -f "$compose_file" -f "$offline_file" "$@"
}

dockerd_pid=""
brought_up=""
job_id=""

cleanup() {
  local rc=$?
  set +e
  if [ -n "$brought_up" ]; then
    if [ $rc -ne 0 ]; then
      echo "---- docker-compose ps"
      compose ps
      echo "---- service logs (last 80 lines each)"
      compose logs --no-color --tail=80
      if [ -n "$job_id" ]; then
        echo "---- ringctl get $job_id"
        "$ringctl_bin" --scheduler "$scheduler" get "$job_id"
        for r in 0 1 2 3; do
          echo "---- rank $r"
          "$ringctl_bin" --scheduler "$scheduler" logs "$job_id" --rank "$r" | tail -20
        done
      fi
    fi
    say "docker-compose down -v --remove-orphans"
    if ! compose down -v --remove-orphans --timeout 20 >"$tmp/down.log" 2>&1; then
      cat "$tmp/down.log"
      echo "compose_test: docker-compose down failed" >&2
      rc=1
    fi
    local left
    left=$(
      docker ps -aq --filter "label=com.docker.compose.project=$project" | sed 's/^/container /'
      docker network ls -q --filter "label=com.docker.compose.project=$project" | sed 's/^/network /'
      docker volume ls -q --filter "label=com.docker.compose.project=$project" | sed 's/^/volume /'
    )
    if [ -n "$left" ]; then
      printf 'compose_test: left behind by project %s:\n%s\n' "$project" "$left" >&2
      rc=1
    else
      say "no container, network or volume of project $project is left"
    fi
  fi
  # Images replaced by this run's build (untagged now); the current ones stay as the cache.
  docker image prune -f --filter label=io.ringmaster.image >/dev/null 2>&1
  if [ -n "$dockerd_pid" ]; then
    say "stopping the dockerd this test started"
    kill -TERM "$dockerd_pid" 2>/dev/null
    for _ in $(seq 300); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$dockerd_pid" 2>/dev/null && kill -KILL "$dockerd_pid"
  fi
  rm -rf "$tmp"
  if [ $rc -eq 0 ]; then say "PASS"; else say "FAIL (exit $rc)"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for tool in docker docker-compose curl python3; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/setup installs it)"
done
[ -x "$ringctl_bin" ] || fail "$ringctl_bin is missing: build the project first"

# ---- 1. The Docker engine.
if docker info >/dev/null 2>&1; then
  say "using the Docker engine that answers ($(docker version -f '{{.Server.Version}}'))"
else
  command -v dockerd >/dev/null || fail "no Docker engine answers and dockerd is missing"
  [ "$(id -u)" -eq 0 ] || fail "no Docker engine answers, and starting dockerd needs root"
  say "starting dockerd (no default bridge, no iptables rules)"
  setsid dockerd --bridge=none --iptables=false >"$tmp/dockerd.log" 2>&1 </dev/null &
  dockerd_pid=$!
  for _ in $(seq 120); do
    docker info >/dev/null 2>&1 && break
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || { tail -30 "$tmp/dockerd.log"; fail "dockerd did not start"; }
fi

# ---- 2. The base image.
if docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
  say "debian:bookworm-slim is present"
elif timeout 60 docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
  say "pulled debian:bookworm-slim"
else
  say "debian:bookworm-slim cannot be pulled: making it from Debian's mirror (debootstrap)"
  start=$SECONDS
  "$root/docker/make-base-image.sh" debian:bookworm-slim || fail "could not make the base image"
  say "base image made in $((SECONDS - start)) s"
fi

# ---- 3. Free loopback ports, in the env file the compose files read.
read -r pg redis sched sched_metrics ingest exposition prom grafana wport wmetrics < <(
  python3 - <<'EOF'
import socket

def bound(host, port=0):
    s = socket.socket()
    try:
        s.bind((host, port))
    except OSError:
        s.close()
        return None
    return s

held = [bound("127.0.0.1") for _ in range(8)]
ports = [s.getsockname()[1] for s in held]
# The two workers listen on the same ports, one on each address.
while len(ports) < 10:
    a = bound("127.0.0.2")
    b = bound("127.0.0.3", a.getsockname()[1])
    if b is not None and a.getsockname()[1] not in ports:
        ports.append(a.getsockname()[1])
        held += [a, b]
print(*ports)
EOF
)
cat >"$env_file" <<EOF
RINGMASTER_TAG=$tag
RINGMASTER_HOST=127.0.0.1
RINGMASTER_POSTGRES_PORT=$pg
RINGMASTER_POSTGRES_PASSWORD=test-$RANDOM$RANDOM
RINGMASTER_REDIS_PORT=$redis
RINGMASTER_SCHEDULER_PORT=$sched
RINGMASTER_SCHEDULER_METRICS_PORT=$sched_metrics
RINGMASTER_METRICS_PORT=$ingest
RINGMASTER_METRICS_METRICS_PORT=$exposition
RINGMASTER_WORKER1_ADDRESS=127.0.0.2
RINGMASTER_WORKER2_ADDRESS=127.0.0.3
RINGMASTER_WORKER_PORT=$wport
RINGMASTER_WORKER_METRICS_PORT=$wmetrics
RINGMASTER_SIMULATE_GPUS=2
RINGMASTER_SIMULATE_GPU_TYPE=t4
RINGMASTER_PROMETHEUS_PORT=$prom
RINGMASTER_SCRAPE_INTERVAL=1s
RINGMASTER_GRAFANA_PORT=$grafana
RINGMASTER_TLS_DIR=$tmp/certs
EOF
# The shell's variables win over an env file in compose: make them the same.
set -a
# shellcheck source=/dev/null
source "$env_file"
set +a
scheduler=127.0.0.1:$sched
prometheus=127.0.0.1:$prom
# The host's ringctl over TLS with the CA compose's `certs` service makes; it needs no
# certificate of its own (`ringctl logs` goes through the scheduler).
export RINGMASTER_TLS_CA=$tmp/certs/ca.crt
say "ports: scheduler $scheduler, Prometheus $prometheus, workers 127.0.0.2/127.0.0.3:$wport"

# ---- 4. The compose files are valid, with and without the overrides.
docker-compose -f "$compose_file" config -q || fail "compose/docker-compose.yml is invalid"
docker-compose -f "$compose_file" -f "$gpu_file" config -q ||
  fail "compose/docker-compose.gpu.yml is invalid"
compose config -q || fail "the test's override is invalid"
say "compose files valid (docker-compose config -q)"

# ---- 5. Images.
say "building the images (docker-compose build, host networking; log in $tmp/build.log)"
start=$SECONDS
if ! compose build >"$tmp/build.log" 2>&1; then
  tail -80 "$tmp/build.log"
  fail "docker-compose build failed"
fi
build_s=$((SECONDS - start))
start=$SECONDS
if ! docker build --network host -f "$root/docker/Dockerfile" -t "ringmaster:$tag" "$root" \
  >"$tmp/build-all.log" 2>&1; then
  tail -60 "$tmp/build-all.log"
  fail "docker build of the all-in-one ringmaster image failed"
fi
for program in ringmaster-scheduler ringmaster-metrics ringmaster-worker ringmaster-train ringctl; do
  docker run --rm --network none "ringmaster:$tag" "$program" --help >/dev/null ||
    fail "$program does not start in the ringmaster image"
done
say "images built in ${build_s} s (+ $((SECONDS - start)) s for the all-in-one ringmaster image):"
docker images --format '  {{.Repository}}:{{.Tag}}  {{.Size}}' | grep ":$tag " | sort

# ---- 6. Up.
say "Grafana is not started: its image comes from a registry CI cannot reach" \
  "(tests/compose/docker-compose.offline.yml); every other service runs as in compose/docker-compose.yml"
say "docker-compose up -d (health-checked start order)"
brought_up=1
start=$SECONDS
if ! compose up -d >"$tmp/up.log" 2>&1; then
  cat "$tmp/up.log"
  fail "docker-compose up failed"
fi
say "stack up in $((SECONDS - start)) s"
[ -z "$(compose ps -q grafana 2>/dev/null)" ] || fail "Grafana was started despite the override"

ready=0
for _ in $(seq 120); do
  # The admin token the scheduler made at its first start (docs/security.md).
  [ -n "${RINGMASTER_TOKEN:-}" ] ||
    RINGMASTER_TOKEN=$(compose exec -T scheduler cat /var/lib/ringmaster/token 2>/dev/null || true)
  export RINGMASTER_TOKEN
  ready=$("$ringctl_bin" --scheduler "$scheduler" -o json workers 2>/dev/null | grep -c '"READY"' || true)
  [ "$ready" -ge 2 ] && break
  sleep 0.5
done
[ "$ready" -ge 2 ] || fail "the two workers did not become READY"
say "both workers READY:"
compose exec -T scheduler ringctl workers || fail "ringctl inside the scheduler container failed"

# ---- 7. Jobs through ringctl: a 1-rank job from the host (the metrics service learns the
# baseline of the dashboards' scaling efficiency from it), then the 4-rank job across both
# workers from inside the scheduler container.
baseline=$("$ringctl_bin" --scheduler "$scheduler" submit --name compose-baseline --replicas 1 \
  --gpus-per-replica 1 --gpu-type t4 --model mlp-small --steps 30 --batch-size 64)
timeout 300 "$ringctl_bin" --scheduler "$scheduler" watch "$baseline" >/dev/null ||
  fail "1-rank job $baseline did not succeed"
say "1-rank job $baseline (host ringctl) SUCCEEDED"
job_id=$(compose exec -T scheduler ringctl submit --name compose-test --replicas 4 \
  --gpus-per-replica 1 --gpu-type t4 --model mlp-small --steps 60 --batch-size 64 | tr -d '\r')
[[ $job_id =~ ^j-[0-9a-f]+$ ]] || fail "ringctl submit printed '$job_id', not a job id"
say "submitted $job_id (docker-compose exec scheduler ringctl submit); watching it"
start=$SECONDS
timeout 300 "$ringctl_bin" --scheduler "$scheduler" watch "$job_id" ||
  fail "job $job_id did not succeed (ringctl watch exit $?)"
state=$("$ringctl_bin" --scheduler "$scheduler" -o json get "$job_id" |
  python3 -c 'import json, sys; print(json.load(sys.stdin).get("state", ""))')
[[ $state == *SUCCEEDED ]] || fail "job $job_id is $state, not SUCCEEDED"
trainer_line=$("$ringctl_bin" --scheduler "$scheduler" logs "$job_id" --rank 0 |
  grep 'total images/sec' || true)
[ -n "$trainer_line" ] || fail "rank 0 printed no 'total images/sec' line"
say "job $job_id SUCCEEDED in $((SECONDS - start)) s; rank 0: $trainer_line"

# A command workload: python3 with mpi4py, one ring over both workers' containers.
ring=$("$ringctl_bin" --scheduler "$scheduler" submit --name compose-mpi4py --replicas 4 \
  --gpus-per-replica 1 --gpu-type t4 -- python3 -c \
  'from mpi4py import MPI; c = MPI.COMM_WORLD; print("ring", c.size, "sum", c.allreduce(c.rank + 1))')
timeout 300 "$ringctl_bin" --scheduler "$scheduler" watch "$ring" >/dev/null ||
  fail "mpi4py job $ring did not succeed"
ring_line=$("$ringctl_bin" --scheduler "$scheduler" logs "$ring" --rank 3 | grep '^ring ' || true)
[ "$ring_line" = "ring 4 sum 10" ] || fail "mpi4py job $ring rank 3 printed '$ring_line', not 'ring 4 sum 10'"
say "mpi4py command job $ring SUCCEEDED: rank 3 saw '$ring_line'"

# ---- 8. Its throughput in Prometheus, and every component scraped.
query() {
  curl -sS --max-time 5 "http://$prometheus/api/v1/query" --data-urlencode "query=$1"
}
images=""
for _ in $(seq 60); do
  images=$(query "ringmaster_job_images_per_second{job_id=\"$job_id\"}" | python3 -c '
import json, sys
result = json.load(sys.stdin)["data"]["result"]
print(result[0]["value"][1] if result else "")' 2>/dev/null || true)
  [ -n "$images" ] && break
  sleep 1
done
[ -n "$images" ] || fail "Prometheus has no ringmaster_job_images_per_second for $job_id"
python3 -c "import sys; sys.exit(0 if float('$images') > 0 else 1)" ||
  fail "ringmaster_job_images_per_second{job_id=\"$job_id\"} is $images, not > 0"
say "Prometheus: ringmaster_job_images_per_second{job_id=\"$job_id\"} = $images"

targets=$(query 'up{job=~"ringmaster-.*"}' | python3 -c '
import json, sys
for r in json.load(sys.stdin)["data"]["result"]:
    print(r["metric"]["job"], r["metric"]["instance"], r["value"][1])' | sort)
while read -r line; do echo "  up: $line"; done <<<"$targets"
[ "$(echo "$targets" | grep -c ' 1$')" -eq 4 ] ||
  fail "Prometheus does not scrape the scheduler, both workers and the metrics service"
# Grafana cannot run here; its datasource is this Prometheus, so every panel's query of
# dashboards/ must return data from it (template variables widened to all).
python3 - "$prometheus" "$root"/dashboards/*.json <<'EOF' || fail "dashboard queries without data"
import json, sys, time, urllib.parse, urllib.request

def exprs(panels):
    for p in panels:
        yield from exprs(p.get("panels", []))
        for t in p.get("targets", []):
            if t.get("expr"):
                yield p.get("title", "?"), t["expr"]

def has_data(q):
    url = "http://%s/api/v1/query?%s" % (sys.argv[1], urllib.parse.urlencode({"query": q}))
    with urllib.request.urlopen(url, timeout=5) as r:
        return bool(json.load(r)["data"]["result"])

queries = [(f.rsplit("/", 1)[-1], title, e.replace("$job", ".*").replace("$queue", ".*"))
           for f in sys.argv[2:] for title, e in exprs(json.load(open(f))["panels"])]
deadline = time.time() + 60
empty = queries
while empty and time.time() < deadline:
    empty = [q for q in empty if not has_data(q[2])]
    if empty:
        time.sleep(2)
for f, title, q in empty:
    print("  no data: %s / %s: %s" % (f, title, q))
print("  %d of %d dashboard queries have data" % (len(queries) - len(empty), len(queries)))
sys.exit(1 if empty or not queries else 0)
EOF
say "total $((SECONDS - t0)) s"
