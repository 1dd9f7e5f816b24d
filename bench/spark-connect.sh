#!/usr/bin/env bash
# The floor of a Spark job submitted to a Spark Connect server that
# outlives it (docs/scale.md, "The small day's start-up").
#
# Starts a Connect server (local[2], on 127.0.0.1), warms it with one
# client, then runs ROUNDS (default 5) client processes. Each connects,
# and runs three jobs of four tasks, as the Spark engine's ingest runs
# three stages; each task starts telemeter (`--version`), as a stage's
# first task starts `spark-task serve`. Prints each client's wall time
# and each job's, then the medians. No row is read: this is what the
# ingest would pay before its work, to compare with bench/spark.sh's
# small day into a new store (spark-local-2-1pct-new).
# Needs SPARK_HOME and, in $PYSPARK_PYTHON, pyspark's Connect client:
#   pip install 'pyspark[connect]==4.0.1'
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
PORT=${CONNECT_PORT:-15002}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-release}
cargo build --release --quiet
BIN=$CARGO_TARGET_DIR/release/telemeter
: "${SPARK_HOME:?set SPARK_HOME (README, Running on Spark)}"
PY=${PYSPARK_PYTHON:-python3}
"$PY" -c 'import grpc, pyspark.sql.connect' 2>/dev/null \
  || { echo "$PY lacks the Connect client: pip install 'pyspark[connect]==4.0.1'" >&2; exit 1; }
export SPARK_LOCAL_IP=127.0.0.1
WORK=$(mktemp -d)
"$SPARK_HOME/bin/spark-submit" --class org.apache.spark.sql.connect.service.SparkConnectServer \
  --master 'local[2]' --conf spark.connect.grpc.binding.port="$PORT" --conf spark.ui.enabled=false \
  --conf spark.log.level=WARN spark-internal >"$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 120); do
  (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break
  sleep 0.5
done
cat >"$WORK/client.py" <<'PY'
import subprocess, sys, time
from pyspark.sql import SparkSession

binary, port = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()


def task(batches):
    # As the ingest's tasks do (telemeter_ingest.forget_zip_finders): the
    # worker's next task does not re-read pyspark.zip's directory.
    import zipimport

    for path, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter):
            del sys.path_importer_cache[path]
    for batch in batches:
        subprocess.run([binary, "--version"], check=True, stdout=subprocess.DEVNULL)
        yield batch


for job in range(3):
    start = time.time()
    spark.range(0, 4, 1, 4).mapInArrow(task, "id long").collect()
    print(f"job{job} {time.time() - start:.3f}")
PY
"$PY" "$WORK/client.py" "$BIN" "$PORT" >/dev/null
for round in $(seq "$ROUNDS"); do
  start=$(date +%s.%N)
  jobs=$("$PY" "$WORK/client.py" "$BIN" "$PORT" | tr '\n' ' ')
  end=$(date +%s.%N)
  echo "client $(echo "$end - $start" | bc) $jobs"
done | tee "$WORK/times"
python3 - "$WORK/times" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
print("median client %.2f s" % statistics.median(float(r[1]) for r in rows))
for j in range(3):
    print("median job%d %.2f s" % (j, statistics.median(float(r[3 + 2 * j]) for r in rows)))
PY
