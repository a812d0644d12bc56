#!/usr/bin/env bash
# Runs every libFuzzer target under fuzz/ (built with clang, -DSBX_FUZZ=ON,
# into build-fuzz/) for SECONDS each, starting from the committed seed corpus,
# and prints the executions per target. Inputs the fuzzer finds go to a
# scratch corpus (build-fuzz/corpus/<target>), never into fuzz/corpus/; a
# crash is kept as build-fuzz/crash-<target>-* and fails the run.
#
#   hack/fuzz.sh [SECONDS] [TARGET...]   default 600 s each, every target
#
# hack/test.sh runs it with 20 s per target.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECS=${1:-600}; shift || true
B="$ROOT/build-fuzz"
command -v clang >/dev/null || { echo "fuzz: clang is required (hack/deps.sh installs it)" >&2; exit 1; }
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(cd "$ROOT/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//'))
# Only the fuzz targets (and the library): the rest is built by gcc elsewhere.
mkdir -p "$B"
CC=clang cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Debug -DSBX_FUZZ=ON >/dev/null &&
  cmake --build "$B" -j2 $(printf -- '--target fuzz_%s ' "${targets[@]}") >"$B/build.log" 2>&1 ||
  { tail -n 30 "$B/build.log"; exit 1; }
failed=0
for t in "${targets[@]}"; do
  corpus="$B/corpus/$t"; mkdir -p "$corpus"
  log="$B/fuzz-$t.log"
  ( cd "$B" && ASAN_OPTIONS=detect_leaks=1 "$B/fuzz_$t" -max_total_time="$SECS" -max_len=16384 -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$B/crash-$t-" \
      "$corpus" "$ROOT/fuzz/corpus/$t" >"$log" 2>&1 )
  rc=$?
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  rate=$(awk '/stat::average_exec_per_sec/ {print $2}' "$log")
  if [ $rc -eq 0 ]; then
    printf 'fuzz %-10s %10s executions in %s s (%s/s)\n' "$t" "${execs:-?}" "$SECS" "${rate:-?}"
  else
    failed=1
    printf 'fuzz %-10s FAILED (rc %d) after %s executions; see %s\n' "$t" $rc "${execs:-?}" "$log"
    grep -E "ERROR|Assertion|SUMMARY|Test unit written" "$log" | head -n 8
  fi
done
exit $failed
