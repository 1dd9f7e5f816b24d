#!/usr/bin/env bash
# The performance benchmark of docs/benchmarks.md.
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
#   3. `ingest` into a store and `summary --store`, when this build has them;
#   4. the peers (bench/peers.py: polars lazy and DuckDB 1.4, in a virtual
#      environment under $BENCH_WORK) side by side with telemeter, one account
#      and every account, and ingest against polars writing typed Parquet
#      (unique by record_id), and the ratios (PEERS=0 skips; ROUNDS=3).
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
# One token key for raw data and the store (each has its own key file
# otherwise), so that their answers compare byte for byte, tokens included.
export TELEMETER_TOKEN_KEY=${TELEMETER_TOKEN_KEY:-bench}

STAMP="$DATA/.generated-v1"
if [ ! -f "$STAMP" ]; then
  rm -rf "$DATA"
  /usr/bin/time -v -o "$WORK/generate.time" "$BIN" generate --out "$DATA" \
    --calls 10000000 --messages 5000000 --transcriptions 1000000 --charges 100000 \
    --accounts 50 --subaccounts 5 --start 2026-08-01 --days 92 --seed 1 \
    --format csv --files 8 --duplicates 0.01
  touch "$STAMP"
fi

# DIALECT: the same records as another tool writes them (bench/dialects.py):
# plain (the generator's, default), duckdb, quote-all-crlf or
# quote-all-crlf-gz. Each dialect has its own data and output folders.
# bench/dialects.sh runs every dialect in turn.
PEER_VENV=${PEER_VENV:-$WORK/peer-venv}
peer_venv() {
  if ! "$PEER_VENV/bin/python" -c 'import polars, duckdb' > /dev/null 2>&1; then
    python3 -m venv "$PEER_VENV"
    "$PEER_VENV/bin/pip" install -q -r bench/requirements-peers.txt
  fi
}
DIALECT=${DIALECT:-plain}
if [ "$DIALECT" != plain ]; then
  peer_venv
  "$PEER_VENV/bin/python" bench/dialects.py --data "$DATA" --dialect "$DIALECT" > /dev/null
  DATA="$DATA-$DIALECT"
  WORK="$WORK/$DIALECT"
  mkdir -p "$WORK"
fi
echo "dialect: $DIALECT"

QUERY='granularity=day&from_date=2026-08-01&to_date=2026-11-01'
NOW=2026-11-02T00:00:00Z
ACCOUNT=$(sed -n 2p "$DATA/accounts.csv" | cut -d, -f1)
du -sh "$DATA"
# Warm the page cache before every timed command that reads the data: we
# time the engine, not the disk. Once is not enough on a machine that
# pages out memory left untouched for a while: the benchmark VM's DAMON
# pages out what has not been accessed for a minute or so, page cache
# included. Nine minutes after their last read, an eighth of each calls
# file was still cached, and an ingest about 11 minutes after the last read
# took 14.0 s against 7.6 s warm.
warm() { cat "$DATA"/*/* > /dev/null; }

show() { # name: the wall time and peak memory of $WORK/name.time
  local wall rss
  wall=$(grep 'Elapsed (wall clock)' "$WORK/$1.time" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$WORK/$1.time" | awk '{print $NF}')
  printf '%-28s wall %-10s peak RSS %6d MiB  (%s)\n' "$1" "$wall" $((rss / 1024)) "$(grep 'Percent of CPU' "$WORK/$1.time" | awk '{print $NF}') CPU"
}
[ -f "$WORK/generate.time" ] && show generate

warm
/usr/bin/time -v -o "$WORK/summary-one-account.time" "$BIN" "$@" summary --data "$DATA" --auth-id "$ACCOUNT" \
  --query "$QUERY" --now "$NOW" > "$WORK/summary-one-account.json"
show summary-one-account

if "$BIN" report --help > /dev/null 2>&1; then
  rm -rf "$WORK/report"
  warm
  /usr/bin/time -v -o "$WORK/report-all-accounts.time" "$BIN" "$@" report --data "$DATA" --out "$WORK/report" \
    --query "$QUERY" --now "$NOW" --quiet
  show report-all-accounts
  rm -rf "$WORK/report"
  # The summaries alone (JSON pages, index, manifest): what the 8 s target names.
  rm -rf "$WORK/report-json"
  warm
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
  warm
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

# 4. Peers, side by side: bench/peers.py runs the same grouping with polars
# (lazy) and DuckDB 1.4 on the same files (see its doc for what it does and
# does not do), and a lighter polars query as a second baseline
# (polars-issue: inferred f64 money, the day cut from the timestamp text). Rounds alternate telemeter and the peers; the ratio is taken
# pair by pair (telemeter / peer, same round) and the median printed.
# PEERS=0 skips this part; ROUNDS (default 3) sets the rounds.
if [ "${PEERS:-1}" != 0 ]; then
  peer_venv
  PY="$PEER_VENV/bin/python"
  TO=2026-11-01
  PAGES=()
  "$BIN" report --help | grep -q -- '--pages' && PAGES=(--pages jsonl)
  timed() { # name command...: /usr/bin/time -v into $WORK/name.time, the data warmed first
    local name=$1; shift
    warm
    /usr/bin/time -v -o "$WORK/$name.time" "$@"
  }
  for round in $(seq "${ROUNDS:-3}"); do
    timed "one-telemeter-$round" "$BIN" "${EXTRA[@]}" summary --data "$DATA" --auth-id "$ACCOUNT" \
      --query "$QUERY" --now "$NOW" --all-pages > "$WORK/one-telemeter.jsonl"
    for peer in polars polars-issue duckdb; do
      timed "one-$peer-$round" "$PY" bench/peers.py --engine "$peer" --data "$DATA" \
        --from 2026-08-01 --to "$TO" --account "$ACCOUNT" --totals "$WORK/one-$peer.totals" > /dev/null
    done
    rm -rf "$WORK/report-peers"
    timed "all-telemeter-$round" "$BIN" "${EXTRA[@]}" report --data "$DATA" --out "$WORK/report-peers" \
      --query "$QUERY" --now "$NOW" --quiet --formats json "${PAGES[@]}"
    for peer in polars polars-issue duckdb; do
      timed "all-$peer-$round" "$PY" bench/peers.py --engine "$peer" --data "$DATA" \
        --from 2026-08-01 --to "$TO" --totals "$WORK/all-$peer.totals" > /dev/null
    done
    rm -rf "$WORK/store-peers" "$WORK/ingest-peer"
    sync
    timed "ingest-telemeter-$round" "$BIN" "${EXTRA[@]}" ingest --data "$DATA" --store "$WORK/store-peers" --quiet
    sync
    timed "ingest-polars-ingest-$round" "$PY" bench/peers.py --engine polars-ingest --data "$DATA" \
      --out "$WORK/ingest-peer" > /dev/null
  done
  rm -rf "$WORK/store-peers" "$WORK/ingest-peer"
  # Medians, ratios, and a check that every engine found the same money:
  # the one account's total, and every UTC account's total in the report
  # (the peers bucket UTC days for everyone; telemeter uses each account's
  # zone, so only UTC accounts are comparable).
  "$PY" - "$WORK" "${ROUNDS:-3}" "$DATA/accounts.csv" <<'PYEOF'
import json, os, statistics, sys
from decimal import Decimal
work, rounds, accounts_csv = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def measure(name):
    wall = rss = None
    for line in open(os.path.join(work, name + ".time")):
        if "Elapsed (wall clock)" in line:
            parts = line.rsplit(" ", 1)[1].strip().split(":")
            wall = sum(float(p) * 60 ** i for i, p in enumerate(reversed(parts)))
        if "Maximum resident set size" in line:
            rss = int(line.rsplit(" ", 1)[1]) / 1024
    return wall, rss

jobs = {"one": ("polars", "polars-issue", "duckdb"), "all": ("polars", "polars-issue", "duckdb"),
        "ingest": ("polars-ingest",)}
for job, peers in jobs.items():
    tel = [measure(f"{job}-telemeter-{r}") for r in range(1, rounds + 1)]
    print(f"{job if job == 'ingest' else job + ' account(s)'}: telemeter median {statistics.median(w for w, _ in tel):.2f} s, "
          f"peak {max(m for _, m in tel):.0f} MiB")
    for peer in peers:
        runs = [measure(f"{job}-{peer}-{r}") for r in range(1, rounds + 1)]
        ratio = statistics.median(t[0] / p[0] for t, p in zip(tel, runs))
        print(f"  {peer:12} median {statistics.median(w for w, _ in runs):.2f} s, peak {max(m for _, m in runs):.0f} MiB;"
              f" telemeter/{peer} = {ratio:.2f}x")

def peer_totals(path):
    return {a: Decimal(v) for a, v in (l.strip().split(",") for l in open(path) if l.strip())}

first = json.loads(open(os.path.join(work, "one-telemeter.jsonl")).readline())
spend = Decimal(str(first["meta"]["total_spend"]))
utc = {l.split(",")[0] for l in open(accounts_csv).read().splitlines()[1:] if l.split(",")[2:3] in ([""], [])}
manifest = json.load(open(os.path.join(work, "report-peers", "manifest.json")))
report = {a["auth_id"]: Decimal(str(a["total_spend"])) for a in manifest["accounts"]}
for peer in ("polars", "duckdb"):
    one = sum(peer_totals(os.path.join(work, f"one-{peer}.totals")).values(), Decimal(0))
    every = peer_totals(os.path.join(work, f"all-{peer}.totals"))
    differ = [a for a in sorted(utc) if report.get(a, Decimal(0)) != every.get(a, Decimal(0))]
    print(f"  {peer}: one account {'same' if one == spend else 'DIFFERENT'} spend ({one} vs {spend}); "
          f"{len(utc) - len(differ)} of {len(utc)} UTC accounts the same spend" + (f"; differ: {differ}" if differ else ""))
# The light polars query sums f64: say how far its spend is from the exact one.
loose = sum(Decimal(repr(float(v))) for v in peer_totals(os.path.join(work, "one-polars-issue.totals")).values())
print(f"  polars-issue (f64): one account spend {loose} vs exact {spend} (off by {abs(loose - spend)})")
PYEOF
fi
