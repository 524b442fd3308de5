#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time, starting from its seed corpus, and fails on a
# crash, a failed FUZZ_CHECK, a leak, a timeout or memory over the limits. Called by CTest (see
# CMakeLists.txt); RINGMASTER_FUZZ_SECONDS sets the time (30 s by default).
# Seeds: corpus/<target>/*.yaml are used as they are; *.textproto are encoded first, as the
# message named in their `# proto-message:` line. A failing input is kept under WORK/artifacts/.
set -euo pipefail
target=$1 seeds=$2 work=$3 protoc=$4 proto_dir=$5 fuzz_dir=$6
seconds=${RINGMASTER_FUZZ_SECONDS:-30}

rm -rf "$work"
mkdir -p "$work/seeds" "$work/corpus" "$work/artifacts"
for seed in "$seeds"/*; do
  case "$seed" in
    *.textproto)
      message=$(sed -n 's/^# proto-message: *//p' "$seed")
      [ -n "$message" ] || { echo "run.sh: $seed has no '# proto-message:' line" >&2; exit 1; }
      "$protoc" --proto_path="$proto_dir" --proto_path="$fuzz_dir" --encode="$message" \
        fuzz_input.proto <"$seed" >"$work/seeds/$(basename "$seed" .textproto).bin"
      ;;
    *) cp "$seed" "$work/seeds/" ;;
  esac
done
echo "run.sh: $(basename "$target"): $(ls "$work/seeds" | wc -l) seeds, ${seconds}s"

# -malloc_limit_mb: no single allocation over 256 MiB; -rss_limit_mb: the whole process under
# 512 MiB; -timeout: no input takes over 10 s.
status=0
"$target" -max_total_time="$seconds" -rss_limit_mb=512 -malloc_limit_mb=256 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$work/seeds" ||
  status=$?
if [ "$status" -ne 0 ]; then
  for input in "$work"/artifacts/*; do
    [ -e "$input" ] || continue
    echo "run.sh: failing input $input; reproduce with: $target $input" >&2
  done
  exit "$status"
fi
