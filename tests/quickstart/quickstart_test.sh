#!/usr/bin/env bash
# The README's first command as a new user runs it, then the user's own programs: a copy of
# the working tree (what a clean clone holds: tracked and untracked files, nothing ignored, so
# no build directory) and `scripts/quickstart` in it, which builds into the copy's own build/
# and starts a cluster. Then, from a new shell with no RINGMASTER_* exports (only HOME and
# PATH), what the quickstart's own demo never ran:
#   - a command job (`hostname` on 2 ranks), which runs ringmaster-check before the command;
#   - an mpi4py ring of 4 ranks across both workers;
#   - the line the quickstart prints for a job in its own image (as root with Podman): the test
#     image made, and the same ring with every rank in a container of it, its digest shown;
#   - `ringctl submit --wait -- true`;
#   - the Python client, finding the scheduler and CA in the config file;
#   - ringctl with no config at all: the untrusted certificate is named as such;
#   - a worker pointed at a missing helper refuses to start, naming the flag;
# and `scripts/quickstart down`, after which nothing of the cluster runs. The regression of a
# quickstart that did not build ringmaster-check, after which every command job failed.
#
# Arguments: SOURCE_DIR. Environment: RINGMASTER_CMAKE_ARGS is passed on to the quickstart's
# configure (ctest gives the suite's -DRINGMASTER_WERROR=ON, so that the copy's compiles are
# hits in the compiler cache the suite's build filled: CMakeLists.txt, "ccache").
set -euo pipefail
src=${1:?usage: quickstart_test.sh SOURCE_DIR}
tmp=$(mktemp -d /tmp/ringmaster-quickstart-test.XXXXXX)
chmod 755 "$tmp"
clone=$tmp/src
home=$tmp/home
state=$tmp/state
prefix=$tmp/prefix
mkdir -p "$clone" "$home" "$prefix"

# What a new shell on a fresh Debian machine has: HOME and the standard PATH (Debian's
# python3, not a pyenv's), no RINGMASTER_* variable. The quickstart runs in one too, since the
# workers (and so the ranks) inherit its environment. Only the compiler cache is shared.
std_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ccache_dir=$(ccache --get-config cache_dir 2>/dev/null || true)
python_dir=$prefix/lib/python3/dist-packages
fresh_shell() {
  env -i HOME="$home" PATH="$prefix/bin:$std_path" PYTHONPATH="$python_dir" LANG=C.UTF-8 "$@"
}

cleanup() {
  local rc=$?
  if [ -x "$clone/scripts/quickstart" ]; then
    RINGMASTER_QUICKSTART_DIR=$state "$clone/scripts/quickstart" down >/dev/null 2>&1 || true
  fi
  if [ $rc -ne 0 ]; then
    echo "--- quickstart logs ($state) ---"
    for log in "$state"/*.log; do
      [ -f "$log" ] || continue
      echo "=== $log (last 40 lines)"
      tail -n 40 "$log"
    done
  fi
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT

failures=0
check() {  # check WHAT COMMAND...: runs it, counts a failure
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}

echo "== a clean copy of $src"
(cd "$src" && git ls-files -z --cached --others --exclude-standard |
  xargs -0 tar -cf - --no-recursion --ignore-failed-read) | tar -xf - -C "$clone"
[ ! -e "$clone/build" ] || { echo "the copy has a build directory"; exit 1; }

echo "== scripts/quickstart (its own build directory, $clone/build)"
start=$(date +%s)
env -i HOME="$home" PATH="$std_path" LANG=C.UTF-8 ${ccache_dir:+CCACHE_DIR="$ccache_dir"} \
  RINGMASTER_QUICKSTART_DIR="$state" RINGMASTER_PREFIX="$prefix" \
  RINGMASTER_CMAKE_ARGS="${RINGMASTER_CMAKE_ARGS:-}" "$clone/scripts/quickstart" \
  >"$tmp/quickstart.out" 2>&1 || { cat "$tmp/quickstart.out"; exit 1; }
echo "quickstart: $(($(date +%s) - start)) s"
tail -n 25 "$tmp/quickstart.out"
# The Python client went to lib/python3.X/dist-packages under the prefix.
python_dir=$(ls -d "$prefix"/lib/python3*/dist-packages | head -n 1)

check "the quickstart built ringmaster-check" test -x "$clone/build/trainer/ringmaster-check"
check "the config file names the scheduler" \
  grep -q '^scheduler: 127\.0\.0\.1:' "$home/.config/ringmaster/config"

# ringctl SUBMIT-ARGS...: submits from a new shell and waits; prints the job id.
submit_wait() {
  local out
  out=$(fresh_shell ringctl submit --wait "$@" 2>"$tmp/submit.err") || {
    echo "submit $* failed: $out $(cat "$tmp/submit.err")" >&2
    fresh_shell ringctl get "$(echo "$out" | head -n 1)" >&2 || true
    return 1
  }
  echo "$out" | head -n 1
}

echo "== a command job: hostname on 2 ranks (pre-run check, then the command)"
id=$(submit_wait --name qs-hostname --replicas 2 --gpus-per-replica 1 -- hostname) &&
  check "hostname job $id SUCCEEDED" true || check "hostname job SUCCEEDED" false

echo "== an mpi4py ring of 4 ranks across both workers"
if id=$(submit_wait --name qs-mpi4py --replicas 4 --gpus-per-replica 1 --gpu-type t4 \
  -- python3 -m mpi4py.bench helloworld); then
  check "mpi4py job $id SUCCEEDED" true
  # The placement is cleared when a job ends; its events (watch replays them) keep where it ran.
  fresh_shell ringctl watch "$id" >"$tmp/mpi4py.events" || true
  grep "placed on" "$tmp/mpi4py.events" || true
  check "its ranks were placed on w1 and w2" grep -qE 'placed on (w1,w2|w2,w1)' "$tmp/mpi4py.events"
  fresh_shell ringctl logs "$id" --rank 0 >"$tmp/mpi4py.log"
  check "rank 0 saw a ring of 4" grep -q "of 4 on" "$tmp/mpi4py.log"
else
  check "mpi4py job SUCCEEDED" false
fi

echo "== the line the quickstart prints for a job in its own image"
if [ "$(id -u)" -eq 0 ] && command -v podman >/dev/null; then
  check "docker/make-job-image.sh made the test image" "$clone/docker/make-job-image.sh"
  if id=$(submit_wait --name qs-image --replicas 4 --image localhost/ringmaster/job:bookworm \
    -- python3 -m mpi4py.bench helloworld); then
    check "image job $id SUCCEEDED" true
    fresh_shell ringctl logs "$id" --rank 0 >"$tmp/image.log"
    check "rank 0 saw a ring of 4" grep -q "of 4 on" "$tmp/image.log"
    fresh_shell ringctl get "$id" >"$tmp/image.get"
    check "ringctl get shows the digest it ran" grep -q "sha256:" "$tmp/image.get"
  else
    check "image job SUCCEEDED" false
  fi
fi

echo "== ringctl submit --wait -- true"
id=$(submit_wait -- true) && check "true job $id SUCCEEDED" true ||
  check "true job SUCCEEDED" false

echo "== the Python client, from the config file"
check "Client() lists the jobs" fresh_shell python3 -c '
import ringmaster
client = ringmaster.Client()
jobs = client.list(limit=50)
names = {job.name for job in jobs}
assert {"qs-hostname", "qs-mpi4py"} <= names, names
print("python client: %d jobs at %s" % (len(jobs), client.address))'

echo "== ringctl with no config: the certificate is not trusted, and it says so"
set +e
fresh_shell env XDG_CONFIG_HOME="$tmp/no-config" RINGMASTER_SCHEDULER="$(
  sed -n 's/^scheduler: //p' "$home/.config/ringmaster/config")" ringctl workers \
  >"$tmp/untrusted.out" 2>&1
code=$?
set -e
cat "$tmp/untrusted.out"
check "exit status 3" test "$code" -eq 3
check "names the untrusted certificate and the fix" \
  grep -q "answered, but its TLS certificate is not trusted: give the CA" "$tmp/untrusted.out"

echo "== a worker pointed at a missing helper refuses to start"
set +e
timeout 20 "$clone/build/services/worker/ringmaster-worker" --insecure --address 127.0.0.1 \
  --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --check-binary "$tmp/nonexistent" \
  >"$tmp/worker.out" 2>&1
code=$?
set -e
cat "$tmp/worker.out"
check "exit status 2" test "$code" -eq 2
check "names the file and the flag" \
  grep -q "ringmaster-check (the pre-run check of every command job) at $tmp/nonexistent: No such file or directory (set --check-binary" "$tmp/worker.out"

echo "== scripts/quickstart down"
fresh_shell RINGMASTER_QUICKSTART_DIR="$state" "$clone/scripts/quickstart" down
check "nothing of the cluster runs" bash -c \
  "! RINGMASTER_QUICKSTART_DIR='$state' '$clone/scripts/quickstart' status | grep -q running"

if [ "$failures" -gt 0 ]; then
  echo "$failures failed"
  exit 1
fi
echo "all passed"
