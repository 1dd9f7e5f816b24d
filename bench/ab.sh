#!/usr/bin/env bash
# Criterion A/B: two bench binaries of benches/pipeline.rs, run in turn
# (A, B, A, B, ...) on this machine, one CRITERION_HOME, so that drift over
# the run (the machine warming) falls on both alike. Prints each run's
# estimate per benchmark; take the ratio pair by pair.
#
# Build each side with `cargo bench --no-run` at its commit (one shared
# CARGO_TARGET_DIR) and copy target/release/deps/pipeline-<hash> aside.
# Usage: bench/ab.sh A_BIN B_BIN [ROUNDS (3)] [FILTER]
set -euo pipefail
A=$1 B=$2 ROUNDS=${3:-3}
FILTER=${4:-'parse/csv|aggregate/all|end_to_end|store/summary'}
HOME_DIR=$(mktemp -d)
trap 'rm -rf "$HOME_DIR"' EXIT
cd "$HOME_DIR"
for round in $(seq "$ROUNDS"); do
  for bin in "$A" "$B"; do
    CRITERION_HOME="$HOME_DIR/criterion" "$bin" --bench --warm-up-time 2 --measurement-time 5 "$FILTER" 2>&1 \
      | awk -v side="$( [ "$bin" = "$A" ] && echo A || echo B )" -v round="$round" '
          /^[a-z_]+\/[a-z0-9_]+/ { name = $1 }
          /time:/ { for (i = 1; i <= NF; i++) if ($i == "time:") { print side, round, name, $(i + 3), $(i + 4); break } }'
  done
done
