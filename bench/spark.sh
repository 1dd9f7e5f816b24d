#!/usr/bin/env bash
# The Spark engine's benchmark (README "Performance", docs/scale.md).
#
# Ingests the benchmark data set of bench/run.sh ($BENCH_DATA, default
# /work/bench-data; run bench/run.sh first to generate it) three ways, each
# into a fresh store, and prints wall time and peak memory:
#   1. the local engine;
#   2. --engine spark --spark-master local[2];
#   3. --engine spark on a standalone cluster of one master and two workers
#      (1 core, 3 GiB each) started here on 127.0.0.1.
# Peak memory is the largest sum of resident memory of every process of the
# run (telemeter, spark-submit's JVM, Python workers, spark-task processes;
# for the cluster also the workers' executors), sampled every second.
# Then checks that the three stores give the same answer, byte for byte.
# Needs SPARK_HOME (see README "Running on Spark"). Results: README, Performance.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${BENCH_DATA:-/work/bench-data}
WORK=${BENCH_WORK:-/work/bench-out}/spark
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-release}
cargo build --release --quiet
BIN=$CARGO_TARGET_DIR/release/telemeter
: "${SPARK_HOME:?set SPARK_HOME (README, Running on Spark)}"
export SPARK_LOCAL_IP=127.0.0.1
rm -rf "$WORK" && mkdir -p "$WORK"
[ -f "$DATA/accounts.csv" ] || { echo "no benchmark data in $DATA: run bench/run.sh first" >&2; exit 1; }
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

tree_rss() { # pids...: summed RSS (KiB) of these processes and all their descendants
  ps -eo pid=,ppid=,rss= | awk -v roots="$*" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2; rss[$1] = $3 }
    END {
      changed = 1
      while (changed) { changed = 0; for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 } }
      for (p in keep) total += rss[p]; print total + 0
    }'
}

measure() { # name extra-roots command...: wall time and peak tree RSS of the command
  local name=$1 roots=$2; shift 2
  local start end peak=0 pid rss
  start=$(date +%s.%N)
  "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    rss=$(tree_rss "$pid" $roots)
    [ "$rss" -gt "$peak" ] && peak=$rss
    sleep 1
  done
  wait "$pid" || { echo "$name failed:"; tail -20 "$WORK/$name.err"; exit 1; }
  end=$(date +%s.%N)
  printf '%-22s wall %7.1f s  peak memory %6d MiB\n' "$name" "$(echo "$end - $start" | bc)" $((peak / 1024))
  grep '^total' "$WORK/$name.out"
}

measure local "" "$BIN" ingest --data "$DATA" --store "$WORK/store-local"
measure spark-local-2 "" "$BIN" ingest --data "$DATA" --store "$WORK/store-spark-local" \
  --engine spark --spark-master 'local[2]' --spark-conf spark.driver.memory=4g

# A standalone cluster: one master, two workers of one core each.
CLASS=$SPARK_HOME/bin/spark-class
mkdir -p "$WORK/cluster/w1" "$WORK/cluster/w2"
setsid "$CLASS" org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 7177 --webui-port 7178 \
  > "$WORK/cluster/master.log" 2>&1 &
MASTER=$!
W=()
for i in 1 2; do
  setsid "$CLASS" org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores 1 --memory 3g \
    --webui-port $((7180 + i)) --work-dir "$WORK/cluster/w$i" spark://127.0.0.1:7177 > "$WORK/cluster/w$i.log" 2>&1 &
  W+=($!)
done
stop() { for p in "$MASTER" "${W[@]}"; do kill -- -"$p" 2>/dev/null || true; done; }
trap stop EXIT
until [ "$(grep -c 'Registering worker' "$WORK/cluster/master.log" || true)" -ge 2 ]; do sleep 1; done
measure spark-cluster-2x1 "${W[*]}" "$BIN" ingest --data "$DATA" --store "$WORK/store-spark-cluster" \
  --engine spark --spark-master spark://127.0.0.1:7177 --spark-conf spark.executor.memory=2g
stop
trap - EXIT

ACCOUNT=$(sed -n 2p "$DATA/accounts.csv" | cut -d, -f1)
QUERY='granularity=day&from_date=2026-08-01&to_date=2026-11-01&timezone=Asia/Kolkata'
for store in local spark-local spark-cluster; do
  # one key for all three: each store otherwise seals page tokens with its own
  TELEMETER_TOKEN_KEY=bench-compare "$BIN" summary --store "$WORK/store-$store" --auth-id "$ACCOUNT" --query "$QUERY" --now 2026-11-02T00:00:00Z \
    --all-pages | sha256sum | sed "s/-$/$store/"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
