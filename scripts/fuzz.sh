#!/usr/bin/env bash
# Fuzzing of load-agent with cargo fuzz (docs/fuzzing.md).
#
#   scripts/fuzz.sh smoke [SECONDS]     build every target, run each SECONDS (default 20) from its
#                                       committed corpus; what CI runs (about 1.5 min after the build)
#   scripts/fuzz.sh run TARGET SECONDS  one long run; new inputs go to fuzz/work/TARGET (ignored)
#   scripts/fuzz.sh all SECONDS         `run` for every target, one after the other
#   scripts/fuzz.sh build               build every target (ASan, release + debug assertions)
#   scripts/fuzz.sh cmin [TARGET]       minimize fuzz/corpus/TARGET + fuzz/work/TARGET into fuzz/corpus
#   scripts/fuzz.sh seed                rewrite the seed inputs of fuzz/corpus from the real inputs
#   scripts/fuzz.sh replay              replay corpus + regressions on stable (cargo test, no ASan)
#   scripts/fuzz.sh list                the targets
#
# Stable toolchain only: cargo fuzz passes unstable flags to rustc (-Zsanitizer=address and the
# sanitizer-coverage options), which a stable rustc accepts only with RUSTC_BOOTSTRAP=1. It is set
# for the cargo fuzz commands of this script only, never for the workspace build.
#
# Environment: FUZZ_JOBS (cargo build jobs, default 2), FUZZ_RSS_MB (libFuzzer -rss_limit_mb,
# default 2048), FUZZ_TIMEOUT (libFuzzer -timeout per input in seconds, default 10),
# FUZZ_SANITIZER (address | none, default address).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

CARGO_FUZZ_VERSION=0.13.2
TARGETS=(avro_decode scenario_parse sop_parse triage_extract)
TOOLS="$root/target/tools/cargo-fuzz"
JOBS=${FUZZ_JOBS:-2}
RSS_MB=${FUZZ_RSS_MB:-2048}
TIMEOUT=${FUZZ_TIMEOUT:-10}
SANITIZER=${FUZZ_SANITIZER:-address}
# Release with debug assertions and overflow checks: an arithmetic overflow is a finding too.
BUILD_FLAGS=(--sanitizer "$SANITIZER" --debug-assertions)

log() { printf '\n==> %s\n' "$*" >&2; }
die() { echo "fuzz.sh: $*" >&2; exit 2; }

install_cargo_fuzz() {
  if [ -x "$TOOLS/bin/cargo-fuzz" ] && "$TOOLS/bin/cargo-fuzz" --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION\$"; then
    return
  fi
  log "installing cargo-fuzz $CARGO_FUZZ_VERSION into $TOOLS"
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION" --root "$TOOLS"
}

# cargo fuzz with the nightly flags allowed on stable, building into fuzz/target.
cargo_fuzz() {
  install_cargo_fuzz
  RUSTC_BOOTSTRAP=1 CARGO_BUILD_JOBS="$JOBS" "$TOOLS/bin/cargo-fuzz" "$@"
}

is_target() {
  local t
  for t in "${TARGETS[@]}"; do [ "$t" = "$1" ] && return 0; done
  return 1
}

# libFuzzer options shared by every run; the dictionary if the target has one.
libfuzzer_args() {
  local target=$1 seconds=$2
  local args=(-max_total_time="$seconds" -rss_limit_mb="$RSS_MB" -timeout="$TIMEOUT" -print_final_stats=1)
  [ -f "fuzz/dict/$target.dict" ] && args+=(-dict="fuzz/dict/$target.dict")
  printf '%s\n' "${args[@]}"
}

build() {
  log "building the fuzz targets (sanitizer: $SANITIZER)"
  cargo_fuzz build "${BUILD_FLAGS[@]}"
}

# run TARGET SECONDS OUT_DIR: libFuzzer writes new inputs into OUT_DIR (the first corpus dir) and
# only reads the committed corpus and the regressions.
run_one() {
  local target=$1 seconds=$2 out=$3
  is_target "$target" || die "unknown target $target (targets: ${TARGETS[*]})"
  mkdir -p "$out" "fuzz/corpus/$target" "fuzz/artifacts/$target"
  local dirs=("$out" "fuzz/corpus/$target")
  [ -d "fuzz/regressions/$target" ] && dirs+=("fuzz/regressions/$target")
  local args
  mapfile -t args < <(libfuzzer_args "$target" "$seconds")
  log "fuzzing $target for ${seconds}s"
  cargo_fuzz run "${BUILD_FLAGS[@]}" "$target" "${dirs[@]}" -- "${args[@]}"
}

cmd=${1:-}
shift || true
case "$cmd" in
  smoke)
    seconds=${1:-20}
    build
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    for t in "${TARGETS[@]}"; do run_one "$t" "$seconds" "$tmp/$t"; done
    log "smoke: every target ran ${seconds}s without a crash"
    ;;
  run)
    [ $# -eq 2 ] || die "usage: scripts/fuzz.sh run TARGET SECONDS"
    build
    run_one "$1" "$2" "fuzz/work/$1"
    ;;
  all)
    [ $# -eq 1 ] || die "usage: scripts/fuzz.sh all SECONDS"
    build
    for t in "${TARGETS[@]}"; do run_one "$t" "$1" "fuzz/work/$t"; done
    ;;
  build)
    build
    ;;
  cmin)
    # The committed corpus is the seeds (seed-*, the real inputs, always kept) plus the smallest
    # set of other inputs (libFuzzer's set-cover merge) that keeps every coverage edge of the
    # committed corpus and the long runs' work corpus; counter features are ignored
    # (-use_counters=0), which keeps it small. fuzz/work keeps everything.
    targets=("${1:-all}")
    [ "${targets[0]}" = all ] && targets=("${TARGETS[@]}")
    build
    for t in "${targets[@]}"; do
      is_target "$t" || die "unknown target $t"
      new=$(mktemp -d)
      find "fuzz/corpus/$t" -maxdepth 1 -type f -name 'seed-*' -exec cp {} "$new"/ \;
      dirs=("fuzz/corpus/$t")
      [ -d "fuzz/work/$t" ] && dirs+=("fuzz/work/$t")
      log "minimizing ${dirs[*]} into fuzz/corpus/$t"
      cargo_fuzz run "${BUILD_FLAGS[@]}" "$t" "$new" "${dirs[@]}" -- \
        -set_cover_merge=1 -use_counters=0 -rss_limit_mb="$RSS_MB" -timeout="$TIMEOUT"
      find "fuzz/corpus/$t" -type f -delete
      mv "$new"/* "fuzz/corpus/$t"/
      rmdir "$new"
      echo "fuzz/corpus/$t: $(find "fuzz/corpus/$t" -type f | wc -l) files, $(du -sh --apparent-size "fuzz/corpus/$t" | cut -f1)"
    done
    ;;
  seed)
    log "writing the seed corpus"
    cargo run --manifest-path fuzz/Cargo.toml --example seed
    ;;
  replay)
    cargo test --manifest-path fuzz/Cargo.toml
    ;;
  list)
    printf '%s\n' "${TARGETS[@]}"
    ;;
  *)
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
