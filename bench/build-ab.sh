#!/usr/bin/env bash
# Cold release build A/B: two or more revisions of this repository, each
# cloned into a folder of its own, built with `cargo build --release` into
# an empty target directory, in turn (A, B, A, B, ...), so that the host's
# drift falls on all of them alike. Crates come from ~/.cargo (download
# them once first, e.g. with `cargo fetch`): this times compiling only.
# Prints each build, then each revision's median wall and user seconds and,
# against the first revision, the median of the wall ratios taken round by
# round.
#
#   bench/build-ab.sh REV_A REV_B [REV...]
#   ROUNDS=2 bench/build-ab.sh b3c75ed HEAD
#
# A cold build takes 5-7 minutes on the benchmark's 2 cores: time it on an
# idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 REV_A REV_B [REV...]" >&2; exit 2; }
rounds=${ROUNDS:-2}
repo=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for rev in "$@"; do
    git clone -q "$repo" "$work/$rev"
    git -C "$work/$rev" checkout -q "$rev"
done
for round in $(seq "$rounds"); do
    for rev in "$@"; do
        rm -rf "$work/target"
        (cd "$work/$rev" && /usr/bin/time -f '%e %U' -o "$work/time" \
            env CARGO_TARGET_DIR="$work/target" cargo build --release --quiet)
        echo "$round $rev $(cat "$work/time")"
    done
done | python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    print(line, end="", flush=True)
    _, rev, wall, user = line.split()
    runs.setdefault(rev, []).append((float(wall), float(user)))
first = next(iter(runs.values()))
for rev, times in runs.items():
    ratios = [a[0] / b[0] for a, b in zip(times, first)]
    print(f"{rev}: wall {statistics.median(t[0] for t in times):.1f} s, "
          f"user {statistics.median(t[1] for t in times):.1f} s; "
          f"wall / first {statistics.median(ratios):.3f} (n={len(times)})")
'
