#!/usr/bin/env bash
# Bounded fuzz smoke (CI): builds every fuzz target once and runs each for a fixed time on its
# committed corpus (fuzz/corpus/<target>), failing on any crash, leak of an invariant, timeout
# or out-of-memory. New inputs go to a temporary directory, never into the committed corpus.
#   FUZZ_SECONDS=20 bash fuzz/smoke.sh            # all targets
#   bash fuzz/smoke.sh condition promql           # some targets (only these are built)
#   bash fuzz/smoke.sh --build                    # only build (CI starts this early, niced)
# FUZZ_JOBS (default: the number of CPUs) targets run at once; each still gets its full
# FUZZ_SECONDS of wall time, so a smoke on N cores takes about 1/N of the sequential time.
# FUZZ_WORK=<dir> keeps the new inputs and logs there (a campaign resumes from them when run
# again with the same dir); without it they go to a temporary directory removed at the end.
set -euo pipefail

# Resolved before the cd below, so a relative FUZZ_WORK means the caller's directory.
if [ -n "${FUZZ_WORK:-}" ]; then
  mkdir -p "$FUZZ_WORK"
  FUZZ_WORK=$(cd "$FUZZ_WORK" && pwd)
fi
cd "$(dirname "$0")"
export PATH="$HOME/.cargo/bin:$PATH"
SECONDS_EACH=${FUZZ_SECONDS:-20}
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
start=$(date +%s)

build_only=false
if [ "${1:-}" = "--build" ]; then
  build_only=true
  shift
fi

if ! rustup toolchain list | grep -q '^nightly'; then
  # libFuzzer needs nightly; a machine that cannot get one skips the smoke, saying so.
  if ! rustup toolchain install nightly --profile minimal; then
    echo "fuzz smoke: SKIPPED: no nightly toolchain on this machine" >&2
    exit 0
  fi
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

# No sanitizer: the code under test is safe Rust; debug assertions (overflow checks) stay on.
FUZZ_FLAGS=(--sanitizer none)
if [ $# -gt 0 ]; then
  # Only the named targets: a campaign on two of them need not build the other eight.
  for t in "$@"; do cargo +nightly fuzz build "${FUZZ_FLAGS[@]}" "$t"; done
else
  cargo +nightly fuzz build "${FUZZ_FLAGS[@]}"
fi
if $build_only; then
  echo "fuzz smoke: built in $(( $(date +%s) - start )) s"
  exit 0
fi

if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo +nightly fuzz list); fi
if [ -n "${FUZZ_WORK:-}" ]; then
  work=$FUZZ_WORK
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

# One target: its own log and exit status file, so parallel runs never interleave.
run_target() {
  local t=$1
  local args=(-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
  [ -f "dict/$t.dict" ] && args+=(-dict="dict/$t.dict")
  # `fuzz run` only checks that the target built above is fresh.
  if cargo +nightly fuzz run "${FUZZ_FLAGS[@]}" "$t" "$work/$t" "corpus/$t" -- "${args[@]}" \
      >"$work/$t.log" 2>&1; then
    echo 0 >"$work/$t.rc"
  else
    echo 1 >"$work/$t.rc"
  fi
}

echo "fuzz smoke: ${#targets[@]} targets, ${SECONDS_EACH}s each, $JOBS at a time"
running=0
for t in "${targets[@]}"; do
  mkdir -p "$work/$t" "corpus/$t"
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  echo "fuzz smoke: $t for ${SECONDS_EACH}s"
  run_target "$t" &
  running=$((running + 1))
done
wait

failed=()
for t in "${targets[@]}"; do
  echo "fuzz smoke: $t:"
  grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec)|#[0-9]+[[:space:]]+DONE' "$work/$t.log" || true
  if [ "$(cat "$work/$t.rc" 2>/dev/null || echo 1)" != 0 ]; then
    failed+=("$t")
    tail -n 40 "$work/$t.log" >&2
  fi
done
echo "fuzz smoke: ${#targets[@]} targets in $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz smoke: FAILED: ${failed[*]} (crash inputs under fuzz/artifacts/)" >&2
  exit 1
fi
