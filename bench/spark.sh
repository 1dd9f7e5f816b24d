#!/usr/bin/env bash
# The Spark engine's benchmark (README "Performance", docs/scale.md).
#
# Ingests the benchmark data set of bench/run.sh ($BENCH_DATA, default
# /work/bench-data; run bench/run.sh first to generate it), each run into
# a fresh store, ROUNDS times (default 3), the engines alternating:
#   1. the local engine;
#   2. --engine spark --spark-master local[2];
#   3. --engine spark on a standalone cluster of one master and two workers
#      (1 core, 3 GiB each) started here on 127.0.0.1;
#   4. the same cluster, the job given one core (spark.cores.max=1): the
#      speed-up of a second worker;
#   5. local[2] reading the data as a file:// URI (Hadoop's listing,
#      Spark's text source: the path an s3a:// or hdfs:// export takes);
# then a small day ($BENCH_SMALL: 1 % new rows, generated here) into a copy
# of the first store and into a new store, by the local engine and by
# local[2]: the cost of an ingest beside the store's history, and the
# history's share of it. Before the rounds, one local[2] job
# (the small day into a new store) saves the driver JVM's class archive in
# a cache folder of this run's, as a host's first Spark job does
# (spark-first-job).
# Prints each run's wall time and peak memory (the largest sum of resident
# memory of every process of the run: telemeter, spark-submit's JVM, Python
# workers, spark-task processes, the cluster's executors; sampled every
# 0.5 s), then the medians, and checks that the stores give the same
# answer, byte for byte. The page cache holds the input before each run,
# and the earlier runs' writes are on the disk.
# Needs SPARK_HOME (see README "Running on Spark").
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${BENCH_DATA:-/work/bench-data}
SMALL=${BENCH_SMALL:-/work/bench-data-1pct}
ROUNDS=${ROUNDS:-3}
WORK=${BENCH_WORK:-/work/bench-out}/spark
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-release}
cargo build --release --quiet
BIN=$CARGO_TARGET_DIR/release/telemeter
: "${SPARK_HOME:?set SPARK_HOME (README, Running on Spark)}"
export SPARK_LOCAL_IP=127.0.0.1
rm -rf "$WORK" && mkdir -p "$WORK"
# The driver JVM's class archive (store::spark::class_archive): saved by
# this run's first Spark job.
export XDG_CACHE_HOME=$WORK/cache
[ -f "$DATA/accounts.csv" ] || { echo "no benchmark data in $DATA: run bench/run.sh first" >&2; exit 1; }
if [ ! -f "$SMALL/.generated-v1" ]; then
  # 1 % of bench/run.sh's rows, other record ids (seed 2), its accounts.
  rm -rf "$SMALL"
  "$BIN" generate --quiet --out "$SMALL" --calls 100000 --messages 50000 --transcriptions 10000 --charges 1000 \
    --accounts 50 --subaccounts 5 --start 2026-11-01 --days 1 --seed 2 --format csv --files 8 --duplicates 0.01
  cp "$DATA/accounts.csv" "$SMALL/accounts.csv"
  touch "$SMALL/.generated-v1"
fi
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

RESULTS=$WORK/results.tsv
warm() { find "$@" -type f -exec cat {} + > /dev/null; }

measure() { # name extra-roots command...: wall time and peak tree RSS of the command
  local name=$1 roots=$2; shift 2
  local start end peak=0 pid rss
  warm "$DATA" "$SMALL"
  # The stores the runs before wrote go to the disk now, not during this run.
  sync
  start=$(date +%s.%N)
  # The end is stamped as the command ends, not at the next memory sample
  # (a second later at most).
  { "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"; echo $? > "$WORK/$name.rc"; date +%s.%N > "$WORK/$name.end"; } &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    rss=$(tree_rss "$pid" $roots)
    [ "$rss" -gt "$peak" ] && peak=$rss
    sleep 0.5
  done
  wait "$pid"
  [ "$(cat "$WORK/$name.rc")" = 0 ] || { echo "$name failed:"; tail -20 "$WORK/$name.err"; exit 1; }
  end=$(cat "$WORK/$name.end")
  local wall
  wall=$(echo "$end - $start" | bc)
  printf '%-22s wall %7.1f s  peak memory %6d MiB\n' "$name" "$wall" $((peak / 1024))
  printf '%s\t%s\t%s\n' "$name" "$wall" $((peak / 1024)) >> "$RESULTS"
}

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

ingest() { # name store data [args...]: one timed ingest into a fresh store
  local name=$1 store=$2 data=$3; shift 3
  local roots=""
  [[ $name == spark-cluster* ]] && roots="${W[*]}"
  rm -rf "$WORK/store-$store"
  measure "$name" "$roots" "$BIN" ingest --data "$data" --store "$WORK/store-$store" "$@"
}
LOCAL2=(--engine spark --spark-master 'local[2]' --spark-conf spark.driver.memory=4g)
CLUSTER=(--engine spark --spark-master spark://127.0.0.1:7177 --spark-conf spark.executor.memory=2g)
ingest spark-first-job spark-first "$SMALL" "${LOCAL2[@]}"
for round in $(seq "$ROUNDS"); do
  echo "round $round"
  ingest local local "$DATA"
  ingest spark-local-2 spark-local "$DATA" "${LOCAL2[@]}"
  ingest spark-cluster-2x1 spark-cluster "$DATA" "${CLUSTER[@]}"
  ingest spark-cluster-1x1 spark-cluster-1 "$DATA" "${CLUSTER[@]}" --spark-conf spark.cores.max=1
  ingest spark-local-2-uri spark-uri "file://$DATA" "${LOCAL2[@]}"
  # 1 % new rows into the first store's copy: both engines.
  for engine in local spark-local-2; do
    rm -rf "$WORK/store-small-$engine" && cp -r "$WORK/store-local" "$WORK/store-small-$engine"
    args=()
    [ "$engine" = local ] || args=("${LOCAL2[@]}")
    measure "$engine-1pct" "" "$BIN" ingest --data "$SMALL" --store "$WORK/store-small-$engine" "${args[@]}"
  done
  # The same rows into a new store: what the 16.1M rows of history add.
  ingest local-1pct-new small-new-local "$SMALL"
  ingest spark-local-2-1pct-new small-new-spark "$SMALL" "${LOCAL2[@]}"
done
stop
trap - EXIT

echo "medians of $ROUNDS rounds:"
sort -k1,1 -k2,2n "$RESULTS" | awk -F'\t' '
  { wall[$1] = wall[$1] " " $2; mem[$1] = (mem[$1] > $3 ? mem[$1] : $3); n[$1]++ }
  END { for (k in n) { split(substr(wall[k], 2), w, " "); printf "%-22s wall %7.1f s  peak memory (max) %6d MiB\n", k, w[int((n[k] + 1) / 2)], mem[k] } }' | sort

ACCOUNT=$(sed -n 2p "$DATA/accounts.csv" | cut -d, -f1)
WHOLE='granularity=day&from_date=2026-08-01&to_date=2026-11-01&timezone=Asia/Kolkata'
# the small day's own dates, with the last of the 16.1M set's, for an
# account with calls that day
SMALL_ACCOUNT=$(sed -n 2p "$SMALL/calls/part-000.csv" | cut -d, -f2)
DAY='granularity=day&from_date=2026-10-30&to_date=2026-11-03&timezone=Asia/Kolkata'
for store in local spark-local spark-cluster spark-cluster-1 spark-uri small-local small-spark-local-2 small-new-local small-new-spark; do
  query=$WHOLE account=$ACCOUNT
  [[ $store == small* ]] && query=$DAY account=$SMALL_ACCOUNT
  # one key for all: each store otherwise seals page tokens with its own
  TELEMETER_TOKEN_KEY=bench-compare "$BIN" summary --store "$WORK/store-$store" --auth-id "$account" --query "$query" --now 2026-11-04T00:00:00Z \
    --all-pages | sha256sum | sed "s/-$/$store/"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
