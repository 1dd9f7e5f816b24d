#!/usr/bin/env bash
# Ingest A/B: two or more telemeter binaries ingest the same data folder in
# turn (A, B, A, B, ...), each into a fresh store, the data read again just
# before each run (the benchmark VM pages out page cache left idle for a
# minute), so that the host's drift falls
# on all of them alike. Prints each run, then each binary's medians and,
# against the first binary, the median of the ratios taken run by run.
#
#   bench/ingest-ab.sh DATA BIN_A BIN_B [BIN...]
#   ROUNDS=8 STORE=/tmp/ab-store bench/ingest-ab.sh /work/bench-data A B
#   ARGS='--max-rollup-groups 1000' bench/ingest-ab.sh ...   (extra ingest arguments)
#
# Columns: wall, user and system seconds and peak RSS (MiB) from
# /usr/bin/time. Time it on an idle machine; on the benchmark VM a binary's
# own runs spread by 10-30 %, so a change of a few percent needs many rounds.
# Copy each build aside under a name of
# its own (the report names binaries by file name).
set -euo pipefail
data=${1:?usage: $0 DATA BIN_A BIN_B [BIN...]}
shift
[ $# -ge 2 ] || { echo "usage: $0 DATA BIN_A BIN_B [BIN...]" >&2; exit 2; }
rounds=${ROUNDS:-4}
work=$(mktemp -d)
store=${STORE:-$work/store}
times=$work/time
trap 'rm -rf "$store" "$work"' EXIT
read -r -a args <<< "${ARGS:-}"
export TELEMETER_TOKEN_KEY=${TELEMETER_TOKEN_KEY:-bench}
for round in $(seq "$rounds"); do
  for bin in "$@"; do
    rm -rf "$store"
    cat "$data"/*/* > /dev/null
    sync
    /usr/bin/time -f '%e %U %S %M' -o "$times" "$bin" ingest --data "$data" --store "$store" --quiet "${args[@]}" > /dev/null
    echo "$round $(basename "$bin") $(cat "$times")"
  done
done | python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    print(line, end="", flush=True)
    _, name, wall, user, sys_, rss = line.split()
    runs.setdefault(name, []).append((float(wall), float(user), float(sys_), int(rss) / 1024))
first = next(iter(runs.values()))
for name, r in runs.items():
    med = [statistics.median(c) for c in zip(*r)]
    ratio = statistics.median(b[0] / a[0] for a, b in zip(first, r))
    print(f"{name}: wall {med[0]:.2f} s, user {med[1]:.2f} s, sys {med[2]:.2f} s, peak {med[3]:.0f} MiB; "
          f"wall / first {ratio:.3f} (n={len(r)})")
'
