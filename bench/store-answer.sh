#!/usr/bin/env bash
# Wall time of one account's answer from a store, for two or more builds
# run one after the other (A, B, A, B, ...), so that a machine's drift
# falls on all of them alike; prints each build's median, 10th and 90th
# percentiles over RUNS runs (process start included).
#
#   bench/store-answer.sh STORE ACCOUNT BIN [BIN...]
#   RUNS=40 QUERY='granularity=day&from_date=2026-08-01&to_date=2026-11-01' \
#     NOW=2026-11-02T00:00:00Z PAUSE=4 bench/store-answer.sh ...
#
# PAUSE (seconds, default 0) is slept before each run: an analyst's
# commands come seconds apart, and on the benchmark VM memory freed by the
# last command goes back to the host within a few seconds, which changes
# what fresh memory costs.
#
# Time it on an idle machine: with anything else running, the medians say
# little. docs/benchmarks.md has the current numbers.
set -euo pipefail
store=${1:?usage: $0 STORE ACCOUNT BIN [BIN...]}
account=${2:?usage: $0 STORE ACCOUNT BIN [BIN...]}
shift 2
[ $# -ge 1 ] || { echo "usage: $0 STORE ACCOUNT BIN [BIN...]" >&2; exit 2; }
runs=${RUNS:-40}
query=${QUERY:-granularity=day&from_date=2026-08-01&to_date=2026-11-01}
now=${NOW:-2026-11-02T00:00:00Z}
pause=${PAUSE:-0}
export TELEMETER_TOKEN_KEY=${TELEMETER_TOKEN_KEY:-bench}
for _ in $(seq "$runs"); do
    for bin in "$@"; do
        sleep "$pause"
        start=$(date +%s%N)
        "$bin" summary --store "$store" --auth-id "$account" --query "$query" --now "$now" >/dev/null
        end=$(date +%s%N)
        echo "$bin $(((end - start) / 1000))"
    done
done | python3 -c '
import statistics, sys
times = {}
for line in sys.stdin:
    bin, us = line.rsplit(" ", 1)
    times.setdefault(bin, []).append(int(us) / 1000)
for bin, t in times.items():
    t.sort()
    n = len(t)
    print(f"{bin}: median {statistics.median(t):.1f} ms, p10 {t[n // 10]:.1f}, p90 {t[n * 9 // 10]:.1f}, max {t[-1]:.1f} (n={n})")
'
