"""telemeter ingest --engine spark: the Spark job.

Run by `telemeter ingest --engine spark` through `spark-submit` (never by
hand): `spark-submit --files <telemeter binary> telemeter_ingest.py PLAN`.
PLAN (plan.json, written by telemeter in STORE/staging/<ingest>/) lists the
input files in the ingest's order, the stored records files of each kind
and the staging folder. The job writes, under that folder:

  checked/<n>.<s>.rows, .places, .offsets
                              valid rows of split s of input file n (0: a
                              file read whole), normalized (by the telemeter
                              binary), in line order; each one's line, text
                              size and id hash; every 4096th row's offset
  checked/<n>.<s>.index       their dedup entries (id and content hashes,
                              place), by id-hash partition
  checked/<n>.<s>.rejects.json
                              its rows set aside (--on-bad-row set-aside)
  dedup.json                  each kind's entries files, new and stored
  dups/<kind>/part-*.parquet  repeated rows: their place and that of the
                              row they repeat (by the telemeter binary, one
                              Spark task per kind and range of partitions)
  deduped.json                counts per kind, when no row failed: telemeter
                              then plans the records files (replaying its
                              record-id filter) and answers with
                              writes.json, which the job waits for
  writes/<n>.segments         the rows of records file n (by telemeter)
  folded/                     each write task's rollup groups and strings
  result.json                 counts per kind and what each write task
                              wrote, or the first error

and, when DATA is a URI (plan's data_uri: s3a://, hdfs://, file://...),
which the job lists and reads through Hadoop's FileSystem:

  listing.json                every file under DATA's kind folders (name,
                              URI, size) and the ones checked, in order
  side/                       accounts.csv, endpoints.csv, registrations.csv
                              and recordings/, copied for telemeter to read

Its write stage (one Spark task per file of writes.json, each running
`telemeter spark-task write`) writes the new rows' records and index files
to the store, which no manifest lists yet, and folds their rollups
(folded/); telemeter then merges the rollups and swaps the manifest.
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from urllib.parse import unquote

from py4j.protocol import Py4JJavaError

from pyspark import SparkContext, SparkFiles, TaskContext
from pyspark.sql import SparkSession

KINDS = ["calls", "messages", "transcriptions", "charges"]
# The dedup's id-hash partitions (src/records/dedup.rs, PARTITIONS).
PARTITIONS = 64
# A Spark task costs about 0.1 s besides its work (local[2]): inputs get
# few, large tasks, but at least two a core. Input bytes per check task
# (whole files or splits: each is one `spark-task check`; telemeter splits
# a plain CSV file past --spark-split-mb, 256 by default), and new rows per
# dedup task (re-tune with bench/spark.sh, which also ingests a small day).
BYTES_PER_CHECK_TASK = 256 << 20
ROWS_PER_DEDUP_TASK = 1 << 20


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


def check_tasks(sc, files):
    """How many tasks check the (local) input files: one per
    BYTES_PER_CHECK_TASK of them, at least two per core, at most one per
    file or split."""
    size = sum(f["bytes"] for f in files)
    wanted = max(2 * sc.defaultParallelism, -(-size // BYTES_PER_CHECK_TASK))
    return max(1, min(len(files), wanted))


def run_task(exe, threads, f, on_bad_row, out):
    """`telemeter spark-task check` on one input file (or split of one):
    its summary."""
    command = [
        exe, "--threads", threads, "spark-task", "check", "--kind", f["kind"], "--file", f["path"],
        "--name", f["name"], "--source", str(f["index"]), "--on-bad-row", on_bad_row, "--out", out,
    ]
    split = f.get("split")
    if split:
        for key in ("number", "from", "to", "line", "size"):
            command += ["--split" if key == "number" else f"--{key}", str(split[key])]
    return run_binary(command, f["name"])


def run_binary(command, what):
    """A `telemeter spark-task` command's summary (its one line of JSON)."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"telemeter spark-task failed on {what}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def dedup_ranges(binary, inputs, out):
    """The task of a partition of (kind, first, end) ranges of id-hash
    partitions: `telemeter spark-task dedup` on each."""

    def run(ranges):
        exe = None
        for kind, first, end in ranges:
            exe = exe or executable(binary)
            command = [
                exe, "--threads", "1", "spark-task", "dedup", "--inputs", inputs, "--kind", kind,
                "--from", str(first), "--to", str(end), "--out", os.path.join(out, kind),
            ]
            yield dict(run_binary(command, f"{kind} partitions {first}..{end}"), kind=kind)

    return run


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


def list_data(sc, uri, staging, side_names):
    """Lists DATA (a URI) through Hadoop's FileSystem, as telemeter lists a
    local data directory: record files under each kind's folder, sorted by
    kind then name. Writes staging/listing.json (every file found, for
    telemeter to check against its own rule and to publish from) and copies
    the side inputs (`side_names`: files or folders at DATA's top, the
    plan's "side") to staging/side/. Returns the plan's files."""
    jvm = sc._jvm
    hadoop = jvm.org.apache.hadoop.fs.Path
    root = hadoop(uri)
    fs = root.getFileSystem(sc._jsc.hadoopConfiguration())
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
    return [
        dict(index=i, kind=f["kind"], path=f["uri"], name=f["name"], size=f["size"], bytes=f["size"], split=None)
        for i, f in enumerate(records)
    ]


def read_contents(files, use):
    """`use` of the input files' bytes (path, content), one Spark partition
    per file (Spark's binaryFile source: any Hadoop filesystem, files up to
    2 GiB). The only read through Spark SQL: its session is made here (a
    session costs about 1.5 s of start-up that local data need not pay)."""
    spark = SparkSession.builder.getOrCreate()
    # A file "costs" more than a partition holds: each gets its own.
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(128 << 20))
    spark.conf.set("spark.sql.files.openCostInBytes", str(1 << 40))
    paths = [glob_escape(f["path"]) for f in files]
    reader = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
    return use(reader.load(paths).select("path", "content"))


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


def by_file(files, summaries):
    """The check tasks' summaries by input file index, a file's splits
    added up: its counts, its first bad row (the splits are in line order)
    and its splits with valid rows."""
    by_split = {(s["index"], s["split"]): s for s in summaries}
    missing = [f["name"] for f in files if (f["index"], (f.get("split") or {}).get("number", 0)) not in by_split]
    if missing:
        raise RuntimeError(f"Spark read no contents for {', '.join(missing)}")
    found = {}
    for (index, split), s in sorted(by_split.items()):
        merged = found.setdefault(index, {"read": 0, "valid": 0, "set_aside": 0, "error": None, "splits": []})
        for key in ("read", "valid", "set_aside"):
            merged[key] += s[key]
        merged["error"] = merged["error"] or s["error"]
        if s["valid"] > 0:
            merged["splits"].append(split)
    return found


def deduplicate(sc, binary, staging, plan, files, by_index, kinds):
    """Deduplicates the new rows of `kinds` (one Spark task per kind and
    range of id-hash partitions, each running `telemeter spark-task dedup`
    on the entries files listed in staging/dedup.json): their counts and
    first conflicts, by kind."""
    checked = os.path.join(staging, "checked")
    inputs = {"kinds": {}}
    indexes = sorted({f["index"] for f in files})
    kind_of = {f["index"]: f["kind"] for f in files}
    for kind in kinds:
        new = [
            [index, os.path.join(checked, f"{index}.{split}.index")]
            for index in indexes
            if kind_of[index] == kind
            for split in by_index[index]["splits"]
        ]
        if new:
            inputs["kinds"][kind] = {"new": new, "stored": plan["stored"].get(kind, [])}
    if not inputs["kinds"]:
        return {}
    path = os.path.join(staging, "dedup.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(inputs, f)
    # A kind's partitions hold about equal shares of its rows: a range per
    # ROWS_PER_DEDUP_TASK new rows, at most two per core.
    ranges = []
    for kind in inputs["kinds"]:
        rows = sum(by_index[index]["valid"] for index in indexes if kind_of[index] == kind)
        tasks = max(1, min(PARTITIONS, 2 * sc.defaultParallelism, -(-rows // ROWS_PER_DEDUP_TASK)))
        bounds = [PARTITIONS * i // tasks for i in range(tasks + 1)]
        ranges += [(kind, a, b) for a, b in zip(bounds, bounds[1:])]
    sc.setJobDescription("deduplicate (telemeter spark-task, one task per kind and range of partitions)")
    task = dedup_ranges(binary, path, os.path.join(staging, "dups"))
    found = {}
    for summary in sc.parallelize(ranges, len(ranges)).mapPartitions(task).collect():
        kind = found.setdefault(summary["kind"], {"new": 0, "duplicates": 0, "conflict": None})
        kind["new"] += summary["new"]
        kind["duplicates"] += summary["duplicates"]
        conflicts = [c for c in (kind["conflict"], summary["conflict"]) if c]
        kind["conflict"] = min(conflicts, key=lambda c: (c["second_file"], c["second_line"]), default=None)
    return found


def write_files(binary, plan):
    """The task of a partition of the write plan's files: `telemeter
    spark-task write` on each."""

    def run(tasks):
        exe = None
        for task in tasks:
            exe = exe or executable(binary)
            command = [exe, "--threads", "1", "spark-task", "write", "--plan", plan, "--task", str(task)]
            yield run_binary(command, f"file {task} of the write plan")

    return run


def alive(pid):
    """Whether process `pid` (on this host) runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def await_plan(staging, parent, telemeter):
    """The write plan telemeter answers deduped.json with (None when
    telemeter is gone, or stopped spark-submit)."""
    path = os.path.join(staging, "writes.json")
    while not os.path.exists(path):
        # spark-submit ended (telemeter stopped it), or telemeter did: no
        # plan will come.
        if os.getppid() != parent or not alive(telemeter):
            return None
        time.sleep(0.005)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_stage(sc, binary, staging, telemeter, result):
    """Hands telemeter the counts (deduped.json), waits for its write plan,
    and runs one write task per file in it: their summaries."""
    parent = os.getppid()
    temporary = os.path.join(staging, "deduped.json.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(temporary, os.path.join(staging, "deduped.json"))
    plan = await_plan(staging, parent, telemeter)
    if plan is None:
        sys.exit(1)
    tasks = len(plan["tasks"])
    if tasks == 0:
        return []
    sc.setJobDescription("write the new rows (telemeter spark-task, one task per records file)")
    task = write_files(binary, os.path.join(staging, "writes.json"))
    return sc.parallelize(range(tasks), tasks).mapPartitions(task).collect()


def finish(sc, staging, result):
    """Writes result.json (atomically: telemeter reads it after the job)."""
    temporary = os.path.join(staging, "result.json.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(temporary, os.path.join(staging, "result.json"))
    sc.stop()


def main():
    plan_path = sys.argv[1]
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    staging = plan["staging"]
    sc = SparkContext.getOrCreate()
    result = {"error": None, "kinds": {}}

    files = plan["files"]
    checked_dir = os.path.join(staging, "checked")
    os.makedirs(checked_dir, exist_ok=True)
    summaries = []
    if plan.get("data_uri"):
        # DATA is a URI: listed and copied here through Hadoop's FileSystem.
        try:
            files = list_data(sc, plan["data_uri"], staging, plan["side"])
        except (Py4JJavaError, Unreadable) as e:
            message = e.java_exception.toString() if isinstance(e, Py4JJavaError) else str(e)
            result["error"] = {"type": "unreadable", "uri": plan["data_uri"], "message": message}
            return finish(sc, staging, result)
    if files:
        sc.setJobDescription("check every row (telemeter spark-task, one task per input file or split)")
        if plan.get("data_uri"):
            task = check_contents(plan["binary"], checked_dir, plan["on_bad_row"], files)
            summaries = read_contents(files, lambda contents: contents.rdd.mapPartitions(task).collect())
        else:
            task = check_files(plan["binary"], checked_dir, plan["on_bad_row"])
            summaries = sc.parallelize(files, check_tasks(sc, files)).mapPartitions(task).collect()
    by_index = by_file(files, summaries)
    # Each kind's input files (by index, in order; a split file once).
    of_kind = {kind: sorted({f["index"] for f in files if f["kind"] == kind}) for kind in KINDS}

    # Kinds in order; within a kind a bad row comes before a conflict, so
    # the kinds after the first with a bad row need no dedup.
    errors = {}
    for kind in KINDS:
        errors[kind] = [(index, by_index[index]["error"]) for index in of_kind[kind] if by_index[index]["error"]]
    clean = []
    for kind in KINDS:
        if errors[kind]:
            break
        clean.append(kind)
    found = deduplicate(sc, plan["binary"], staging, plan, files, by_index, clean)
    for kind in KINDS:
        if errors[kind]:
            result["error"] = dict(type="bad_record", **errors[kind][0][1])
            break
        mine = [by_index[index] for index in of_kind[kind]]
        dedup = found.get(kind, {"new": 0, "duplicates": 0, "conflict": None})
        if dedup["conflict"]:
            result["error"] = dict(type="conflict", kind=kind, **dedup["conflict"])
            break
        result["kinds"][kind] = {
            "read": sum(s["read"] for s in mine),
            "set_aside": sum(s["set_aside"] for s in mine),
            "duplicates": dedup["duplicates"],
            "used": dedup["new"],
            "rejected_files": [index for index in of_kind[kind] if by_index[index]["set_aside"] > 0],
        }
    if not result["error"]:
        result["writes"] = write_stage(sc, plan["binary"], staging, plan["pid"], result)

    finish(sc, staging, result)


if __name__ == "__main__":
    main()
