"""telemeter ingest --engine spark: the Spark job.

Run by `telemeter ingest --engine spark` through `spark-submit` (never by
hand): `spark-submit --files <telemeter binary> telemeter_ingest.py PLAN`.
PLAN (plan.json, written by telemeter in STORE/staging/<ingest>/) lists the
input files in the ingest's order, the stored records files of each kind
and the staging folder. The job writes, under that folder:

  checked/<n>.parquet         valid rows of input file n, normalized (by the
                              telemeter binary, one Spark task per file), in
                              line order
  checked/<n>.rejects.json    rows of file n set aside (--on-bad-row set-aside)
  dups/<kind>/part-*.parquet  repeated rows: their file, where their first
                              row is, their text's bytes (so the publish
                              step cuts files as the local ingest does)
  result.json                 counts per kind, or the first error

and, when DATA is a URI (plan's data_uri: s3a://, hdfs://, file://...),
which the job lists and reads through Hadoop's FileSystem:

  listing.json                every file under DATA's kind folders (name,
                              URI, size) and the ones checked, in order
  side/                       accounts.csv, endpoints.csv, registrations.csv
                              and recordings/, copied for telemeter to read

and publishes nothing: telemeter writes the store's files from them (the
checked rows but the repeats, their rollups folded as they are written) and
swaps the manifest.
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from urllib.parse import unquote

from py4j.protocol import Py4JJavaError

from pyspark import SparkFiles, TaskContext
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

# The normalized content of a row: two rows with one record_id and equal
# content (compared by a hash of these) are duplicates (the local engine
# hashes the same fields).
CONTENT = [
    "auth_id", "subaccount", "secs", "nanos", "product", "type", "direction",
    "country", "units", "duration", "amount", "surcharge", "code",
]
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
            yield run_task(exe, threads, f, on_bad_row, out)

    return run


def run_task(exe, threads, f, on_bad_row, out):
    """`telemeter spark-task` on one input file: its summary."""
    command = [
        exe, "--threads", threads, "spark-task", "--kind", f["kind"], "--file", f["path"],
        "--name", f["name"], "--source", str(f["index"]), "--on-bad-row", on_bad_row, "--out", out,
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"telemeter spark-task failed on {f['name']}: {done.stderr.strip()}")
    return json.loads(done.stdout)


# How telemeter names record files (src/records/files.rs, Format::of):
# telemeter checks the listing against its own rule before publishing.
RECORD_SUFFIXES = (".csv", ".csv.gz", ".csv.zst", ".parquet")


class Unreadable(Exception):
    """DATA (a URI) cannot be listed as a data directory."""


def local(path):
    """A local (or mounted) path, for Spark: `file:` whatever the cluster's
    default filesystem (on a YARN cluster a bare path means HDFS)."""
    return "file://" + path


def hidden(relative):
    """Whether a file's path below its folder has a hidden part (telemeter's
    walk skips hidden folders and files)."""
    return any(part.startswith(".") for part in relative.split("/"))


def walk(fs, folder):
    """Every file below `folder` (a Hadoop Path): (relative name, status)."""
    base = fs.makeQualified(folder).toString().rstrip("/") + "/"
    found = []
    listing = fs.listFiles(folder, True)
    while listing.hasNext():
        status = listing.next()
        path = status.getPath().toString()
        if not path.startswith(base):
            raise RuntimeError(f"{path} is listed under {base} but outside it")
        relative = path[len(base):]
        if not hidden(relative):
            found.append((relative, status))
    return found


def list_data(spark, uri, staging, side_names):
    """Lists DATA (a URI) through Hadoop's FileSystem, as telemeter lists a
    local data directory: record files under each kind's folder, sorted by
    kind then name. Writes staging/listing.json (every file found, for
    telemeter to check against its own rule and to publish from) and copies
    the side inputs (`side_names`: files or folders at DATA's top, the
    plan's "side") to staging/side/. Returns the plan's files."""
    jvm = spark._jvm
    hadoop = jvm.org.apache.hadoop.fs.Path
    root = hadoop(uri)
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())
    if not fs.getFileStatus(root).isDirectory():
        raise Unreadable(f"{uri} is not a directory")
    voids = hadoop(root, "voids")
    if fs.exists(voids) and walk(fs, voids):
        raise Unreadable(
            f"{uri}/voids: the Spark engine reads voids only from a local data folder (or a mounted one); "
            "ingest the voids from a local path"
        )
    listing = []
    for kind in KINDS:
        folder = hadoop(root, kind)
        if not fs.exists(folder):
            continue
        for relative, status in walk(fs, folder):
            name = f"{kind}/{relative}"
            listing.append({"kind": kind, "name": name, "uri": status.getPath().toString(), "size": status.getLen()})
    listing.sort(key=lambda f: (KINDS.index(f["kind"]), f["name"].encode("utf-8")))
    side = os.path.join(staging, "side")
    os.makedirs(side)
    copies = []
    for name in side_names:
        path = hadoop(root, name)
        if not fs.exists(path):
            continue
        if fs.getFileStatus(path).isDirectory():
            os.makedirs(os.path.join(side, name))
            copies += [(status.getPath(), f"{name}/{relative}") for relative, status in walk(fs, path)]
        else:
            copies.append((path, name))
    for source, name in copies:
        target = os.path.join(side, *name.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fs.copyToLocalFile(False, source, hadoop(local(target)), True)
    records = [f for f in listing if f["name"].lower().endswith(RECORD_SUFFIXES)]
    for f in records:
        if f["name"].rsplit("/", 1)[-1].startswith("_"):
            raise Unreadable(
                f"{f['uri']}: Spark's file sources skip names that start with '_' (telemeter reads such a file "
                "from a local path): rename it"
            )
    temporary = os.path.join(staging, "listing.json.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump({"files": listing, "checked": [f["name"] for f in records]}, f)
    os.replace(temporary, os.path.join(staging, "listing.json"))
    return [dict(index=i, kind=f["kind"], path=f["uri"], name=f["name"], size=f["size"]) for i, f in enumerate(records)]


def read_contents(spark, files, use):
    """`use` of the input files' bytes (path, content), one Spark partition
    per file (Spark's binaryFile source: any Hadoop filesystem, files up to
    2 GiB)."""
    # A file "costs" more than a partition holds: each gets its own. Only
    # for this read: the Parquet reads after it keep the session's settings.
    settings = {"spark.sql.files.maxPartitionBytes": str(128 << 20), "spark.sql.files.openCostInBytes": str(1 << 40)}
    saved = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        paths = [glob_escape(f["path"]) for f in files]
        reader = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
        return use(reader.load(paths).select("path", "content"))
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def glob_escape(path):
    """A path Spark's reader takes as itself, not as a glob pattern."""
    return "".join("\\" + c if c in "\\*?[]{}" else c for c in path)


def check_contents(binary, out, on_bad_row, files):
    """The task of a partition of input files read by Spark: each file's
    bytes written to the executor's scratch folder, then `telemeter
    spark-task` on that copy (under the file's own name)."""
    by_path = {f["path"]: f for f in files}

    def run(rows):
        exe = executable(binary)
        context = TaskContext.get()
        threads = str(max(1, context.cpus() if context else 1))
        for row in rows:
            f = by_path.get(row["path"]) or by_path.get(unquote(row["path"]))
            if f is None:
                raise RuntimeError(f"Spark read {row['path']}, which is not in the listing")
            content = row["content"]
            if len(content) != f["size"]:
                raise RuntimeError(
                    f"{f['name']} changed while the ingest ran: listed with {f['size']} bytes, read {len(content)}"
                )
            scratch = tempfile.mkdtemp(prefix="telemeter-", dir=SparkFiles.getRootDirectory())
            try:
                copy = os.path.join(scratch, "input")
                with open(copy, "wb") as data:
                    data.write(content)
                del content
                yield run_task(exe, threads, dict(f, path=copy), on_bad_row, out)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)

    return run


def stored_rows(spark, kind, paths, revisions):
    """The stored records of a kind, in the checked rows' normalized columns
    (record_id, CONTENT, line, revision) and the name of their source.
    A stored row's revision is not in its records file: `revisions` lists
    those above 0 (records file name, source file, source line, revision)
    from the store's corrections files."""
    frame = spark.read.parquet(*(local(p) for p in paths)).withColumn("records_name", F.col("_metadata.file_name"))
    revision = F.lit(0).cast("bigint")
    if revisions:
        schema = "records_name string, source_file string, source_line long, revision long"
        known = spark.createDataFrame([tuple(r) for r in revisions], schema)
        frame = frame.join(F.broadcast(known), ["records_name", "source_file", "source_line"], "left")
        revision = F.coalesce(F.col("revision"), F.lit(0)).cast("bigint")
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
    ingest = F.regexp_extract(F.col("records_name"), r"^(.*)-[0-9]+\.parquet$", 1)
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
        revision.alias("revision"),
        F.concat(F.col("source_file"), F.lit(" (ingest "), ingest, F.lit(")")).alias("stored_name"),
    )


def dedup(spark, kind, new, stored_paths, revisions):
    """Marks each new row: new, dup (an identical earlier row) or conflict.

    Rows are ordered stored first, then by (file, line); the first row of a
    record_id and revision is kept, each later one is compared with it
    (two revisions of a record are neither: corrections.md). Only narrow
    rows are shuffled: a row's content is compared by a 64-bit hash of its
    normalized values (as the local engine's dedup compares its content
    hashes), and `text` is the bytes of text the local ingest would hold
    for it."""

    def narrow(rows, o, stored_name):
        text = sum(F.octet_length(F.col(c)) for c in ("record_id", "auth_id", "subaccount", "type", "code"))
        return rows.select(
            "record_id", "revision", "file", "line",
            F.xxhash64(*CONTENT).alias("same"),
            text.cast("bigint").alias("text"),
            F.lit(o).alias("o"),
            stored_name.alias("stored_name"),
        )

    rows = narrow(new, 1, F.lit(None).cast("string"))
    if stored_paths:
        ids = new.select("record_id").distinct()
        stored = stored_rows(spark, kind, stored_paths, revisions).join(ids, "record_id", "left_semi")
        rows = rows.unionByName(narrow(stored, 0, F.col("stored_name")))
    w = Window.partitionBy("record_id", "revision").orderBy("o", "file", "line")
    marked = (
        rows.withColumn("rn", F.row_number().over(w))
        .withColumn("first_same", F.first("same").over(w))
        .withColumn("first_place", F.first(F.struct("o", "file", "line", "stored_name")).over(w))
        .filter(F.col("o") == 1)
        .withColumn(
            "mark",
            F.when(F.col("rn") == 1, F.lit("new"))
            .when(F.col("same") == F.col("first_same"), F.lit("dup"))
            .otherwise(F.lit("conflict")),
        )
    )
    return marked


# Parquet bytes (checked rows and stored records) per shuffle partition.
# Spark's default of 200 partitions costs a small day minutes of task
# overhead (161k rows in local[2]: 219 s against 63 s); a large day wants
# a partition per core at least. Re-tune with bench/spark.sh.
BYTES_PER_SHUFFLE_PARTITION = 32 << 20


def set_shuffle_partitions(spark, files, by_index, checked_dir, stored):
    """spark.sql.shuffle.partitions for the dedup's shuffle, unless the job's configuration names it (--spark-conf): one
    per BYTES_PER_SHUFFLE_PARTITION of Parquet they read, and never fewer
    than the cluster's cores."""
    key = "spark.sql.shuffle.partitions"
    if spark.sparkContext.getConf().contains(key):
        return
    paths = [os.path.join(checked_dir, f"{f['index']}.parquet") for f in files if by_index[f["index"]]["valid"] > 0]
    paths += [p for kind_paths in stored.values() for p in kind_paths]
    size = sum(os.path.getsize(p) for p in paths if os.path.exists(p))
    wanted = -(-size // BYTES_PER_SHUFFLE_PARTITION)
    spark.conf.set(key, str(max(spark.sparkContext.defaultParallelism, wanted, 1)))


def finish(spark, staging, result):
    """Writes result.json (atomically: telemeter reads it after the job)."""
    temporary = os.path.join(staging, "result.json.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(temporary, os.path.join(staging, "result.json"))
    spark.stop()


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
    if plan.get("data_uri"):
        # DATA is a URI: listed and copied here through Hadoop's FileSystem.
        try:
            files = list_data(spark, plan["data_uri"], staging, plan["side"])
        except (Py4JJavaError, Unreadable) as e:
            message = e.java_exception.toString() if isinstance(e, Py4JJavaError) else str(e)
            result["error"] = {"type": "unreadable", "uri": plan["data_uri"], "message": message}
            return finish(spark, staging, result)
    if files:
        sc.setJobDescription("check every row (telemeter spark-task, one task per input file)")
        if plan.get("data_uri"):
            task = check_contents(plan["binary"], checked_dir, plan["on_bad_row"], files)
            summaries = read_contents(spark, files, lambda contents: contents.rdd.mapPartitions(task).collect())
        else:
            task = check_files(plan["binary"], checked_dir, plan["on_bad_row"])
            summaries = sc.parallelize(files, len(files)).mapPartitions(task).collect()
    by_index = {s["index"]: s for s in summaries}
    missing = [f["name"] for f in files if f["index"] not in by_index]
    if missing:
        raise RuntimeError(f"Spark read no contents for {', '.join(missing)}")

    set_shuffle_partitions(spark, files, by_index, checked_dir, plan["stored"])
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
        new = spark.read.parquet(*(local(p) for p in paths))
        stored = plan["stored"].get(kind, [])
        marked = dedup(spark, kind, new, stored, plan["revisions"].get(kind, [])).persist()
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
        # The repeats: telemeter stores the checked rows but these (so the
        # new rows are never sorted or written again here), and replays the
        # local ingest's candidate budget from where each one's first row
        # is and the bytes of text the local ingest would hold for it.
        first_file = F.when(F.col("first_place.o") == 0, F.lit(-1)).otherwise(F.col("first_place.file"))
        sc.setJobDescription(f"write repeated {kind} rows")
        (
            marked.filter(F.col("mark") == "dup")
            .select(
                "file",
                "line",
                first_file.cast("bigint").alias("first_file"),
                F.col("first_place.line").cast("bigint").alias("first_line"),
                "text",
            )
            .write.mode("overwrite").parquet(local(os.path.join(staging, "dups", kind)))
        )
        marked.unpersist()

    finish(spark, staging, result)


if __name__ == "__main__":
    main()
