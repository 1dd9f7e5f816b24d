"""telemeter ingest --engine spark: the Spark job.

Run by `telemeter ingest --engine spark` through `spark-submit` (never by
hand): `spark-submit --files <telemeter binary> telemeter_ingest.py PLAN`.
PLAN (plan.json, written by telemeter in STORE/staging/<ingest>/) lists the
input files in the ingest's order, the stored records files of each kind
and the staging folder. The job writes, under that folder:

  checked/<n>.parquet         valid rows of input file n, normalized (by the
                              telemeter binary, one Spark task per file)
  checked/<n>.rejects.json    rows of file n set aside (--on-bad-row set-aside)
  new/<kind>/part-*.parquet   rows to store, sorted by (file, line)
  dups/<kind>/part-*.parquet  repeated rows: their file, where their first
                              row is, their text's bytes (so the publish
                              step cuts files as the local ingest does)
  rollups/part-*.parquet      their 15-minute rollups, exact integer sums
  result.json                 counts per kind, or the first error

and publishes nothing: telemeter writes the store's files from them and
swaps the manifest. Every sum is exact (integers of nano-units summed as
DECIMAL(38,0) under ANSI SQL, where an overflow is an error, never NULL).
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

from pyspark import SparkFiles, TaskContext
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

# The normalized content of a row: two rows with one record_id and equal
# content are duplicates (the local engine hashes the same fields).
CONTENT = [
    "auth_id", "subaccount", "secs", "nanos", "product", "type", "direction",
    "country", "units", "duration", "amount", "surcharge", "code",
]
# The columns of checked and new rows (src/store/spark/task.rs CHECKED_COLUMNS).
CHECKED = ["record_id"] + CONTENT + ["file", "line", "id_hi", "id_lo", "content"]
SLOT_SECONDS = 900
KINDS = ["calls", "messages", "transcriptions", "charges"]


def executable(name):
    """The telemeter binary shipped with --files, made executable."""
    path = SparkFiles.get(name)
    if os.access(path, os.X_OK):
        return path
    copy = os.path.join(tempfile.mkdtemp(prefix="telemeter-"), name)
    shutil.copyfile(path, copy)
    os.chmod(copy, stat.S_IRWXU)
    return copy


def check_files(binary, out, on_bad_row):
    """The task of a partition of input files: `telemeter spark-task` on each."""

    def run(files):
        exe = executable(binary)
        context = TaskContext.get()
        threads = str(max(1, context.cpus() if context else 1))
        for f in files:
            command = [
                exe, "--threads", threads, "spark-task", "--kind", f["kind"], "--file", f["path"],
                "--name", f["name"], "--source", str(f["index"]), "--on-bad-row", on_bad_row, "--out", out,
            ]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"telemeter spark-task failed on {f['name']}: {done.stderr.strip()}")
            yield json.loads(done.stdout)

    return run


def stored_rows(spark, kind, paths):
    """The stored records of a kind, in the checked rows' normalized columns."""
    frame = spark.read.parquet(*paths)
    ts = F.col("timestamp")
    nanos_of = lambda c: F.col(c) * F.lit(1000000000)  # DECIMAL(38,9) -> integer nano-units  # noqa: E731
    to_long = lambda e: e.cast("bigint")  # noqa: E731
    text = lambda c, present: F.col(c) if present else F.lit("")  # noqa: E731
    calls, messages = kind == "calls", kind == "messages"
    product = {"calls": F.col("product"), "messages": F.lit("message"),
               "transcriptions": F.lit("transcription"), "charges": F.lit("other")}[kind]
    units = {"messages": F.col("segments"), "charges": F.col("units")}.get(kind, F.lit(1))
    duration = {"calls": "billed_seconds", "transcriptions": "duration_seconds"}.get(kind)
    code = {"calls": "hangup_cause", "messages": "error_code"}.get(kind)
    ingest = F.regexp_extract(F.col("_metadata.file_name"), r"^(.*)-[0-9]+\.parquet$", 1)
    return frame.select(
        F.col("record_id"),
        F.col("auth_id"),
        text("subaccount_auth", kind != "charges").alias("subaccount"),
        F.expr("(timestamp - pmod(timestamp, 1000000000)) div 1000000000").alias("secs"),
        F.pmod(ts, F.lit(1000000000)).alias("nanos"),
        product.alias("product"),
        F.col("description" if kind == "charges" else "type").alias("type"),
        text("direction", calls or messages).alias("direction"),
        text("country", calls or messages).alias("country"),
        units.cast("bigint").alias("units"),
        (to_long(nanos_of(duration)) if duration else F.lit(0).cast("bigint")).alias("duration"),
        to_long(nanos_of("amount")).alias("amount"),
        (to_long(nanos_of("surcharge")) if calls or messages else F.lit(0).cast("bigint")).alias("surcharge"),
        (F.col(code) if code else F.lit("")).alias("code"),
        F.lit(-1).cast("bigint").alias("file"),
        F.col("source_line").cast("bigint").alias("line"),
        F.lit(None).cast("bigint").alias("id_hi"),
        F.lit(None).cast("bigint").alias("id_lo"),
        F.lit(None).cast("bigint").alias("content"),
        F.lit(0).alias("o"),
        F.concat(F.col("source_file"), F.lit(" (ingest "), ingest, F.lit(")")).alias("stored_name"),
    )


def dedup(spark, kind, new, stored_paths):
    """Marks each new row: new, dup (an identical earlier row) or conflict.

    Rows are ordered stored first, then by (file, line); the first row of a
    record_id is kept, each later one is compared with it."""
    rows = new.select(*CHECKED, F.lit(1).alias("o"), F.lit(None).cast("string").alias("stored_name"))
    if stored_paths:
        ids = new.select("record_id").distinct()
        stored = stored_rows(spark, kind, stored_paths).join(ids, "record_id", "left_semi")
        rows = rows.unionByName(stored)
    w = Window.partitionBy("record_id").orderBy("o", "file", "line")
    marked = (
        rows.withColumn("rn", F.row_number().over(w))
        .withColumn("first_content", F.first(F.struct(*CONTENT)).over(w))
        .withColumn("first_place", F.first(F.struct("o", "file", "line", "stored_name")).over(w))
        .filter(F.col("o") == 1)
        .withColumn(
            "mark",
            F.when(F.col("rn") == 1, F.lit("new"))
            .when(F.struct(*CONTENT) == F.col("first_content"), F.lit("dup"))
            .otherwise(F.lit("conflict")),
        )
    )
    return marked


def main():
    plan_path = sys.argv[1]
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    staging = plan["staging"]
    spark = SparkSession.builder.getOrCreate()
    sc = spark.sparkContext
    result = {"error": None, "kinds": {}}

    files = plan["files"]
    checked_dir = os.path.join(staging, "checked")
    os.makedirs(checked_dir, exist_ok=True)
    summaries = []
    if files:
        sc.setJobDescription("check every row (telemeter spark-task, one task per input file)")
        task = check_files(plan["binary"], checked_dir, plan["on_bad_row"])
        summaries = sc.parallelize(files, len(files)).mapPartitions(task).collect()
    by_index = {s["index"]: s for s in summaries}

    new_frames = []
    persisted = []  # kept until the rollups are summed from them
    for kind in KINDS:
        mine = [f for f in files if f["kind"] == kind]
        errors = sorted((s["index"], s["error"]) for s in (by_index[f["index"]] for f in mine) if s["error"])
        if errors:
            result["error"] = dict(type="bad_record", **errors[0][1])
            break
        counts = {
            "read": sum(by_index[f["index"]]["read"] for f in mine),
            "set_aside": sum(by_index[f["index"]]["set_aside"] for f in mine),
            "duplicates": 0,
            "used": 0,
            "rejected_files": [f["index"] for f in mine if by_index[f["index"]]["set_aside"] > 0],
        }
        result["kinds"][kind] = counts
        paths = [os.path.join(checked_dir, f"{f['index']}.parquet") for f in mine if by_index[f["index"]]["valid"] > 0]
        if not paths:
            continue
        sc.setJobDescription(f"deduplicate {kind}")
        marked = dedup(spark, kind, spark.read.parquet(*paths), plan["stored"].get(kind, [])).persist()
        conflict = (
            marked.filter(F.col("mark") == "conflict").orderBy("file", "line")
            .select("record_id", "first_place", "file", "line").limit(1).collect()
        )
        if conflict:
            row = conflict[0]
            first = row["first_place"]
            result["error"] = {
                "type": "conflict",
                "kind": kind,
                "record_id": row["record_id"],
                "first_index": None if first["o"] == 0 else first["file"],
                "first_name": first["stored_name"],
                "first_line": first["line"],
                "second_index": row["file"],
                "second_line": row["line"],
            }
            break
        for row in marked.groupBy("mark").count().collect():
            counts[{"new": "used", "dup": "duplicates"}[row["mark"]]] = row["count"]
        fresh = marked.filter(F.col("mark") == "new").select(*CHECKED)
        sc.setJobDescription(f"write new {kind} rows")
        fresh.orderBy("file", "line").write.mode("overwrite").parquet(os.path.join(staging, "new", kind))
        # The repeats, for the publish step to replay the local ingest's
        # candidate budget: where each one's first row is, and the bytes of
        # text the local ingest would hold for it.
        first_file = F.when(F.col("first_place.o") == 0, F.lit(-1)).otherwise(F.col("first_place.file"))
        text = sum(F.octet_length(F.col(c)) for c in ("record_id", "auth_id", "subaccount", "type", "code"))
        sc.setJobDescription(f"write repeated {kind} rows")
        (
            marked.filter(F.col("mark") == "dup")
            .select(
                "file",
                first_file.cast("bigint").alias("first_file"),
                F.col("first_place.line").cast("bigint").alias("first_line"),
                text.cast("bigint").alias("text"),
            )
            .write.mode("overwrite").parquet(os.path.join(staging, "dups", kind))
        )
        new_frames.append(fresh)
        persisted.append(marked)

    if result["error"] is None and new_frames:
        union = new_frames[0]
        for frame in new_frames[1:]:
            union = union.unionByName(frame)
        exact = lambda c: F.sum(F.col(c).cast("decimal(38,0)")).cast("string").alias(c)  # noqa: E731
        rollups = (
            union.withColumn("slot", F.col("secs") - F.pmod(F.col("secs"), F.lit(SLOT_SECONDS)))
            .groupBy("auth_id", "subaccount", "slot", "product", "type", "direction", "country", "code")
            .agg(
                F.count(F.lit(1)).cast("string").alias("records"),
                exact("units"), exact("duration"), exact("amount"), exact("surcharge"),
            )
        )
        sc.setJobDescription("sum 15-minute rollups")
        rollups.write.mode("overwrite").parquet(os.path.join(staging, "rollups"))

    for frame in persisted:
        frame.unpersist()
    temporary = os.path.join(staging, "result.json.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(temporary, os.path.join(staging, "result.json"))
    spark.stop()


if __name__ == "__main__":
    main()
