#!/usr/bin/env bash
# Offline test of k8s/: renders every kustomization with `kubectl kustomize` (no API server
# involved) and hands the results to validate.mjs together with the --help of the binaries.
#
# usage: run.sh SOURCE_DIR BUILD_DIR SCHEDULER_BINARY WORKER_BINARY METRICS_BINARY
# $KUBECTL overrides the kubectl on PATH (e.g. to try another version).
set -euo pipefail

[ $# -eq 5 ] || { echo "usage: $0 SOURCE_DIR BUILD_DIR SCHEDULER WORKER METRICS" >&2; exit 2; }
src=$(cd "$1" && pwd)
build=$2
binaries=("$3" "$4" "$5")
kubectl=${KUBECTL:-kubectl}
here="$src/tests/k8s"

need() {
  command -v "$1" >/dev/null || { echo "FAIL: $1 not found; $2" >&2; exit 1; }
}
need "$kubectl" "install kubectl (Debian: apt-get install kubernetes-client)"
need node "install Node.js (Debian: apt-get install nodejs npm)"
need npm "install npm (Debian: apt-get install npm)"
need promtool "install Prometheus (Debian: apt-get install prometheus)"

# npm packages go into the build tree; `npm ci` runs again only when the lock file changed.
modules="$build/k8s-node"
mkdir -p "$modules"
if ! cmp -s "$here/package-lock.json" "$modules/installed-lock.json"; then
  cp "$here/package.json" "$here/package-lock.json" "$modules/"
  (cd "$modules" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  cp "$here/package-lock.json" "$modules/installed-lock.json"
fi

out="$build/k8s-rendered"
rm -rf "$out"
mkdir -p "$out"
args=(--source "$src" --promtool "$(command -v promtool)")

# Every directory with a kustomization, overlays and the pieces they are made of.
while IFS= read -r file; do
  dir=$(dirname "$file")
  name=${dir#"$src/k8s/"}
  rendered="$out/${name//\//_}.yaml"
  if ! "$kubectl" kustomize "$dir" >"$rendered" 2>"$rendered.err"; then
    echo "FAIL: kubectl kustomize k8s/$name" >&2
    cat "$rendered.err" >&2
    exit 1
  fi
  # Newer kustomize warns about the v2 fields kept for kubectl 1.20; anything else is shown.
  grep -v "^# Warning: '[A-Za-z]*' is deprecated" "$rendered.err" >&2 || true
  args+=(--render "$name=$rendered")
done < <(find "$src/k8s" -name kustomization.yaml | sort)

for binary in "${binaries[@]}"; do
  name=$(basename "$binary")
  "$binary" --help >"$out/$name.help" || { echo "FAIL: $binary --help" >&2; exit 1; }
  args+=(--help "$name=$out/$name.help" --binary "$name=$binary")
done

echo "$("$kubectl" version --client 2>/dev/null | head -n 2 | tr '\n' ' ')"
# From beside node_modules: ES modules resolve packages from the script's directory only.
cp "$here/validate.mjs" "$modules/validate.mjs"
node "$modules/validate.mjs" "${args[@]}"
