#!/usr/bin/env bash
# The cost of a correcting ingest (docs/benchmarks.md): a store of the
# benchmark set (bench/run.sh's 16.1M records), then, each into its own
# copy of it (hard links: a generation's files are never changed), an
# ingest of 1 % revisions and 0.1 % voids (bench/corrections.py: fix/)
# against an ingest of as many new records (new/), alternating, the data
# and the store read again before each run. Prints each run, the medians
# and the median ratio fix/new.
#
#   bench/corrections.sh [BIN]        (default: a release build)
#   ROUNDS=5 bench/corrections.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${BENCH_DATA:-/work/bench-data}
WORK=${BENCH_WORK:-/work/bench-out}/corrections
BIN=${1:-}
if [ -z "$BIN" ]; then
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-release}
  cargo build --release --quiet
  BIN=$CARGO_TARGET_DIR/release/telemeter
fi
[ -f "$DATA/.generated-v1" ] || { echo "no benchmark set in $DATA: run bench/run.sh first" >&2; exit 2; }
mkdir -p "$WORK"
export TELEMETER_TOKEN_KEY=${TELEMETER_TOKEN_KEY:-bench}
if [ ! -f "$WORK/.deliveries-v1" ]; then
  rm -rf "$WORK/fix" "$WORK/new"
  python3 bench/corrections.py "$DATA" "$WORK"
  touch "$WORK/.deliveries-v1"
fi
base=$WORK/store
if [ ! -f "$base/manifest.json" ] || [ "${REBUILD:-0}" = 1 ]; then
  rm -rf "$base"
  "$BIN" ingest --data "$DATA" --store "$base" --quiet > /dev/null
fi
rounds=${ROUNDS:-3}
times=$WORK/time
for round in $(seq "$rounds"); do
  for delivery in fix new; do
    run=$WORK/run-store
    rm -rf "$run"
    cp -al "$base" "$run"
    cat "$WORK/$delivery"/*/* > /dev/null
    find "$run" -type f -exec cat {} + > /dev/null
    sync
    /usr/bin/time -f '%e %U %S %M' -o "$times" "$BIN" ingest --data "$WORK/$delivery" --store "$run" --quiet > "$WORK/$delivery.out"
    echo "$round $delivery $(cat "$times")"
  done
done | python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    print(line, end="")
    round_, name, wall, user, system, rss = line.split()
    runs.setdefault(name, []).append((float(wall), float(user), float(system), int(rss) / 1024))
for name, rs in runs.items():
    print(f"{name}: median wall {statistics.median(r[0] for r in rs):.2f} s, user {statistics.median(r[1] for r in rs):.2f} s, peak {statistics.median(r[3] for r in rs):.0f} MiB")
ratios = [f[0] / n[0] for f, n in zip(runs["fix"], runs["new"])]
shown = ", ".join("%.2f" % r for r in ratios)
print(f"fix/new: median ratio {statistics.median(ratios):.2f} (runs: {shown})")
'
cat "$WORK/fix.out"
rm -rf "$WORK/run-store"
