#!/usr/bin/env bash
# The performance benchmark of docs/performance.md (README "Performance").
#
# Generates 16.1 million records (10M calls, 5M messages, 1M transcriptions,
# 100k charges; 50 accounts, 92 days from 2026-08-01, CSV, 8 files per kind,
# 1 % re-delivered duplicates, seed 1) into $BENCH_DATA (default
# /work/bench-data, outside the repository; reused when already there), then
# times with /usr/bin/time -v, page cache warm:
#   1. `summary` of one account (the Zipf rank-1 account), day granularity,
#      92 days, from the raw CSV;
#   2. `report` of every account (same query) from the raw CSV: the full
#      report, then the summaries alone (`--formats json`);
#   3. `ingest` into a store and `summary --store`, when this build has them.
# Usage: bench/run.sh [--threads N]   (extra arguments go to every timed command)
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRA=("$@")
DATA=${BENCH_DATA:-/work/bench-data}
WORK=${BENCH_WORK:-/work/bench-out}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-release}
cargo build --release --quiet
BIN=$CARGO_TARGET_DIR/release/telemeter
mkdir -p "$WORK"

STAMP="$DATA/.generated-v1"
if [ ! -f "$STAMP" ]; then
  rm -rf "$DATA"
  /usr/bin/time -v -o "$WORK/generate.time" "$BIN" generate --out "$DATA" \
    --calls 10000000 --messages 5000000 --transcriptions 1000000 --charges 100000 \
    --accounts 50 --subaccounts 5 --start 2026-08-01 --days 92 --seed 1 \
    --format csv --files 8 --duplicates 0.01
  touch "$STAMP"
fi

QUERY='granularity=day&from_date=2026-08-01&to_date=2026-11-01'
NOW=2026-11-02T00:00:00Z
ACCOUNT=$(sed -n 2p "$DATA/accounts.csv" | cut -d, -f1)
du -sh "$DATA"
cat "$DATA"/*/* > /dev/null   # warm the page cache: we time the engine, not the disk

show() { # name: the wall time and peak memory of $WORK/name.time
  local wall rss
  wall=$(grep 'Elapsed (wall clock)' "$WORK/$1.time" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$WORK/$1.time" | awk '{print $NF}')
  printf '%-28s wall %-10s peak RSS %6d MiB  (%s)\n' "$1" "$wall" $((rss / 1024)) "$(grep 'Percent of CPU' "$WORK/$1.time" | awk '{print $NF}') CPU"
}
[ -f "$WORK/generate.time" ] && show generate

/usr/bin/time -v -o "$WORK/summary-one-account.time" "$BIN" "$@" summary --data "$DATA" --auth-id "$ACCOUNT" \
  --query "$QUERY" --now "$NOW" > "$WORK/summary-one-account.json"
show summary-one-account

if "$BIN" report --help > /dev/null 2>&1; then
  rm -rf "$WORK/report"
  /usr/bin/time -v -o "$WORK/report-all-accounts.time" "$BIN" "$@" report --data "$DATA" --out "$WORK/report" \
    --query "$QUERY" --now "$NOW" --quiet
  show report-all-accounts
  rm -rf "$WORK/report"
  # The summaries alone (JSON pages, index, manifest): what the 8 s target names.
  rm -rf "$WORK/report-json"
  /usr/bin/time -v -o "$WORK/report-summaries.time" "$BIN" "$@" report --data "$DATA" --out "$WORK/report-json" \
    --query "$QUERY" --now "$NOW" --quiet --formats json
  show report-summaries
  rm -rf "$WORK/report-json"
else
  echo "no 'report' command in this build: timing 'summary' for every account in turn"
  start=$(date +%s.%N)
  for account in $(tail -n +2 "$DATA/accounts.csv" | cut -d, -f1); do
    "$BIN" "$@" summary --data "$DATA" --auth-id "$account" --query "$QUERY" --now "$NOW" > /dev/null
  done
  echo "summary for every account, sequentially: $(echo "$(date +%s.%N) - $start" | bc) s"
fi

if "$BIN" ingest --help > /dev/null 2>&1; then
  rm -rf "$WORK/store"
  /usr/bin/time -v -o "$WORK/ingest.time" "$BIN" "$@" ingest --data "$DATA" --store "$WORK/store" > /dev/null
  show ingest
  /usr/bin/time -v -o "$WORK/summary-from-store.time" "$BIN" "$@" summary --store "$WORK/store" --auth-id "$ACCOUNT" \
    --query "$QUERY" --now "$NOW" > "$WORK/summary-from-store.json"
  show summary-from-store
  # The store answers repeated requests: time each shape three times, for the
  # largest (rank 1), median (rank 25) and smallest (rank 50) accounts.
  store_summary() { # name account query
    local name=$1 account=$2 query=$3
    for run in 1 2 3; do
      /usr/bin/time -v -o "$WORK/$name-$run.time" "$BIN" "${EXTRA[@]}" summary --store "$WORK/store" --auth-id "$account" \
        --query "$query" --now "$NOW" > /dev/null
      show "$name-$run"
    done
  }
  MEDIAN=$(sed -n 26p "$DATA/accounts.csv" | cut -d, -f1)
  SMALLEST=$(tail -n 1 "$DATA/accounts.csv" | cut -d, -f1)
  store_summary store-day-largest "$ACCOUNT" "$QUERY"
  store_summary store-day-median "$MEDIAN" "$QUERY"
  store_summary store-day-smallest "$SMALLEST" "$QUERY"
  store_summary store-hour-7d-largest "$ACCOUNT" 'granularity=hour&from_date=2026-10-25&to_date=2026-11-01'
  store_summary store-month-largest "$ACCOUNT" 'granularity=month&from_date=2026-08-01&to_date=2026-11-01'
  store_summary store-day-kolkata-largest "$ACCOUNT" "$QUERY&timezone=Asia/Kolkata"
  if cmp -s "$WORK/summary-one-account.json" "$WORK/summary-from-store.json"; then
    echo "summary from the store: same bytes as from the raw CSV"
  else
    echo "summary from the store DIFFERS from the raw CSV answer"
  fi
fi
