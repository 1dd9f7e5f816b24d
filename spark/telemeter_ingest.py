"""telemeter ingest --engine spark: the Spark job.

Run by `telemeter ingest --engine spark` through `spark-submit` (never by
hand): `spark-submit --files <telemeter binary> telemeter_ingest.py PLAN`
(no --files with a local master: PLAN then names telemeter's own program).
PLAN (plan.json, written by telemeter in STORE/staging/<ingest>/) lists the
input files in the ingest's order, the stored index files of each kind
and the staging folder. The job writes, under that folder:

  checked/<n>.<s>.rows, .places, .offsets
                              valid rows of split s of input file n (0: a
                              file read whole), normalized (by the telemeter
                              binary), in line order; each one's line, text
                              size and id hash; every 4096th row's offset
  checked/<n>.<s>.index       their dedup entries (id and content hashes,
                              place), by id-hash partition
  checked/<n>.<s>.rejects.csv
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

import os
import sys

# Beside this job in the staging folder, so first on the search path.
from telemeter_daemon import installed_first

installed_first()

import json
import shutil
import stat
import subprocess
import tempfile
import time
import types
import zipimport
from urllib.parse import unquote

from py4j import protocol as py4j_protocol
from py4j.protocol import Py4JJavaError

from pyspark import SparkConf, SparkContext, SparkFiles, TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as spark_types

# pyarrow (the Arrow batches of files at a URI) is imported where it is
# used: data on a local path needs only pyspark.

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
# Spark's settings of the Python workers' daemon module and of the
# executors' Python search path.
DAEMON_MODULE = "spark.python.daemon.module"
EXECUTOR_PATH = "spark.executorEnv.PYTHONPATH"
# The most bytes of lines in one Arrow batch of a file at a URI.
ARROW_BATCH_BYTES = 64 << 20
# A block size no file reaches: Spark reads each file whole.
WHOLE = 1 << 62
# Hadoop's line reader drops a UTF-8 byte order mark at a file's start.
BOM = b"\xef\xbb\xbf"


def executable(name):
    """The telemeter binary shipped with --files, made executable; or,
    with a local master, the path of telemeter's own program. A shipped
    file that is not executable (Spark makes it so where it fetches it)
    gets one executable copy per executor, beside it, so Spark removes it
    with the executor's files: each worker that finds none copies it to a
    name of its own and renames that into place."""
    if os.path.isabs(name):
        return name
    path = SparkFiles.get(name)
    if os.access(path, os.X_OK):
        return path
    copy = path + ".exe"
    if not os.access(copy, os.X_OK):
        handle, temporary = tempfile.mkstemp(prefix=name + ".", dir=os.path.dirname(path))
        with os.fdopen(handle, "wb") as out, open(path, "rb") as shipped:
            shutil.copyfileobj(shipped, out)
        os.chmod(temporary, stat.S_IRWXU)
        os.replace(temporary, copy)
    return copy


def python_daemon(conf, staging):
    """`conf` with the executors' Python workers started by
    telemeter_daemon (beside this job in `staging`, which joins the
    executors' search path), unless a daemon module is configured
    (--spark-conf or spark-defaults.conf) or the folder's path cannot
    join a search path."""
    if conf.contains(DAEMON_MODULE) or os.pathsep in staging:
        return conf
    theirs = conf.get(EXECUTOR_PATH, "")
    conf.set(DAEMON_MODULE, "telemeter_daemon")
    conf.set(EXECUTOR_PATH, theirs + os.pathsep + staging if theirs else staging)
    return conf


def drop_numpy_converters():
    """Takes pyspark's NumPy converters out of py4j's: the job hands the
    JVM no NumPy value, and their first check of an argument (the first
    call into the JVM, SparkConf's) imports pyspark.testing.utils, hence
    pandas when it is installed: 0.2 s before the SparkContext exists.
    A file at a URI imports pandas where its Arrow batches need it. A
    pyspark without either class keeps its converters as they are."""
    names = ("NumpyArrayConverter", "NumpyScalarConverter")
    numpy = tuple(c for c in (getattr(spark_types, n, None) for n in names) if isinstance(c, type))
    converters = py4j_protocol.INPUT_CONVERTER
    converters[:] = [c for c in converters if not isinstance(c, numpy)]


def forget_zip_finders():
    """Drops the finders of zip archives (pyspark.zip, one per package
    imported from it, and Spark's jars) from this Python worker's import
    cache. PySpark's worker calls importlib.invalidate_caches() before
    every task, and Python before 3.12 then re-reads each such archive's
    whole directory, in Python (docs/scale.md has its cost). Called before
    each `spark-task` run, so the worker's next task (workers are reused)
    skips that; an import that needs a finder makes it again from the
    directory read once."""
    for path, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter):
            del sys.path_importer_cache[path]


def check_files(binary, out, on_bad_row):
    """The task of a partition of input files: `telemeter spark-task` on each."""

    def run(files):
        threads = task_threads()
        for f in files:
            yield run_task(binary, threads, f, on_bad_row, out)

    return run


def check_tasks(sc, files):
    """How many tasks check the (local) input files: one per
    BYTES_PER_CHECK_TASK of them, at least two per core, at most one per
    file or split."""
    size = sum(f["bytes"] for f in files)
    wanted = max(2 * sc.defaultParallelism, -(-size // BYTES_PER_CHECK_TASK))
    return max(1, min(len(files), wanted))


def task_threads():
    """The cores Spark gives this task (spark.task.cpus): the threads of
    its `telemeter spark-task` work."""
    context = TaskContext.get()
    return str(max(1, context.cpus() if context else 1))


def run_task(binary, threads, f, on_bad_row, out):
    """`telemeter spark-task check` on one input file (or split of one):
    its summary."""
    words = [
        "check", "--kind", f["kind"], "--file", f["path"], "--name", f["name"], "--source", str(f["index"]),
        "--on-bad-row", on_bad_row, "--out", out,
    ]
    split = f.get("split")
    if split:
        for key in ("number", "from", "to", "line", "size", "empty_before"):
            flag = "--split" if key == "number" else "--" + key.replace("_", "-")
            words += [flag, str(split.get(key, 0))]
    return run_binary(binary, threads, words, f["name"])


def run_binary(binary, threads, words, what):
    """The summary of `telemeter spark-task <words>` (one line of JSON),
    run by this Python worker's `spark-task serve` process of `binary`
    (the name it was shipped under) and `threads`."""
    forget_zip_finders()
    servers = served()
    server = servers.get((binary, threads))
    if server is None or not server.ready():
        if server is not None:
            server.stop()
        server = servers[(binary, threads)] = Server(executable(binary), threads)
    return server.run(words, what)


def served():
    """This Python worker's `spark-task serve` processes, by (binary,
    threads). They live in a module of their own: the job's functions
    reach a worker by value, with fresh globals for every task, while the
    worker (and sys.modules) lives on from task to task."""
    module = sys.modules.get("telemeter_served")
    if module is None:
        module = types.ModuleType("telemeter_served")
        module.servers = {}
        sys.modules["telemeter_served"] = module
    return module.servers


class Server:
    """`telemeter spark-task serve`: tasks run one after another in one
    process, which reuses the memory its earlier tasks freed (a fresh
    process per task would pay a page fault for every page it touches: a
    third of the tasks' time, docs/scale.md). It ends when this worker
    does, even in the middle of a task. Its standard error goes to an
    unnamed file, read back for the message of a task that fails or of a
    crash."""

    def __init__(self, exe, threads):
        self.said = tempfile.TemporaryFile(mode="a+b")
        self.process = subprocess.Popen(
            [exe, "--threads", threads, "spark-task", "serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.said,
        )
        self.busy = False

    def ready(self):
        """Alive, and not in the middle of a task (one that was
        interrupted: its answer would be taken for the next task's)."""
        return not self.busy and self.process.poll() is None

    def stop(self):
        self.process.kill()
        self.process.wait()
        self.said.close()

    def run(self, words, what):
        start = os.fstat(self.said.fileno()).st_size
        self.busy = True
        try:
            self.process.stdin.write((json.dumps(words) + "\n").encode("utf-8"))
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except OSError:
            line = b""
        self.busy = False
        said = os.pread(self.said.fileno(), 1 << 20, start).decode("utf-8", "replace").strip()
        if not line:
            self.process.wait()
            raise RuntimeError(
                f"telemeter spark-task failed on {what}: it stopped (status {self.process.returncode}): {said}"
            )
        answer = json.loads(line)
        if "error" in answer:
            message = f"{said}\n{answer['error']}" if said else answer["error"]
            raise RuntimeError(f"telemeter spark-task failed on {what}: {message}")
        return answer["summary"]


def dedup_ranges(binary, inputs, out):
    """The task of a partition of (kind, first, end) ranges of id-hash
    partitions: `telemeter spark-task dedup` on each."""

    def run(ranges):
        for kind, first, end in ranges:
            words = [
                "dedup", "--inputs", inputs, "--kind", kind, "--from", str(first), "--to", str(end),
                "--out", os.path.join(out, kind),
            ]
            yield dict(run_binary(binary, "1", words, f"{kind} partitions {first}..{end}"), kind=kind)

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
    plan's "side") to staging/side/. Returns the plan's files.

    The listing also holds how many record folders exist and the entries
    at DATA's top, for telemeter's notices (files nothing reads)."""
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
    listing, folders = [], 0
    for kind in KINDS:
        folder = hadoop(root, kind)
        if not fs.exists(folder):
            continue
        folders += 1
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
        if ":" in f["name"]:
            raise Unreadable(
                f"{f['uri']}: Hadoop's paths cannot hold ':' in a file or folder name below DATA (telemeter "
                "reads such a file from a local path): rename it"
            )
    top = [{"name": e.getPath().getName(), "dir": e.isDirectory()} for e in fs.listStatus(root)]
    temporary = os.path.join(staging, "listing.json.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump({"files": listing, "checked": [f["name"] for f in records], "folders": folders, "top": top}, f)
    os.replace(temporary, os.path.join(staging, "listing.json"))
    return [
        dict(index=i, kind=f["kind"], path=f["uri"], name=f["name"], size=f["size"], bytes=f["size"], split=None)
        for i, f in enumerate(records)
    ]


def session(block_bytes):
    """The Spark SQL session, made on first use (about 1.5 s of start-up
    that local data need not pay), its file reads cut into blocks of at
    most `block_bytes`, each block a partition of its own."""
    spark = SparkSession.builder.getOrCreate()
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(block_bytes))
    # A file "costs" more than a partition holds: no two blocks share one.
    spark.conf.set("spark.sql.files.openCostInBytes", str(1 << 40))
    # The Arrow batches a task gets hold 10,000 lines (Spark's default) or
    # ARROW_BATCH_BYTES, whichever comes first: lines of up to telemeter's
    # 1 MiB limit cannot make one batch gigabytes.
    spark.conf.set("spark.sql.execution.arrow.maxBytesPerBatch", str(ARROW_BATCH_BYTES))
    return spark


def glob_escape(path):
    """A path Spark's reader takes as itself, not as a glob pattern."""
    return "".join("\\" + c if c in "\\*?[]{}" else c for c in path)


def of_listing(files, encoded):
    """The listed file Spark names by `path`: URL-encoded (`encoded`, the
    text source's `_metadata.file_path`), or as Hadoop lists it
    (binaryFile's `path`), where a name holding "%20" must not be taken
    for one holding a space."""
    by_path = {f["path"]: f for f in files}

    def find(path):
        f = by_path.get(unquote(path) if encoded else path)
        if f is None:
            raise RuntimeError(f"Spark read {path}, which is not in the listing")
        return f

    return find


def bom_taken(f, read):
    """Whether Hadoop's line reader took a UTF-8 byte order mark from the
    start of file `f`, which its lines hold `read` bytes of (each with a
    newline, the last perhaps added)."""
    for bom in (False, True):
        if read + len(BOM) * bom in (f["size"], f["size"] + 1):
            return bom
    raise changed(f, f"listed with {f['size']} bytes, read {read} in lines")


def changed(f, what):
    """The error of a file whose bytes are not those listed."""
    return RuntimeError(f"{f['name']} changed while the ingest ran: {what}")


def read_lines(spark, files):
    """The lines of `files` (Spark's text source, cut at newlines only, so
    a line keeps its carriage return), as bytes, with the file, the block
    and the file's size: a file is read a block at a time, never held
    whole."""
    reader = spark.read.option("lineSep", "\n").option("recursiveFileLookup", "true")
    return reader.text([glob_escape(f["path"]) for f in files]).select(
        F.col("value").cast("binary").alias("line"),
        F.col("_metadata.file_path").alias("path"),
        F.col("_metadata.file_block_start").alias("start"),
        F.col("_metadata.file_size").alias("size"),
    )


def block_layout(files, block_bytes):
    """Reads the plain CSV files larger than `block_bytes` once, counting
    each block's lines: for every block that holds a line, keyed by (file
    index, block start), its split number, the number of its first line,
    the empty lines just before it, the file's first line (its header) and
    whether the file's last line has no newline."""
    big = [f for f in files if f["size"] > block_bytes]
    if not big:
        return {}
    lines = read_lines(session(block_bytes), big).withColumn("row", F.monotonically_increasing_id())
    size = F.octet_length("line")
    full = (size > 0) & (F.col("line") != F.lit(bytearray(b"\r")))
    stats = lines.groupBy("path", "start").agg(
        F.count(F.lit(1)).alias("lines"),
        F.sum(size + 1).alias("bytes"),
        F.min("row").alias("first"),
        F.max("row").alias("last"),
        F.max(F.when(full, F.col("row"))).alias("last_full"),
        F.min_by(F.when(F.col("start") == 0, F.col("line")), F.col("row")).alias("head"),
        F.max("size").alias("size"),
    ).collect()
    find = of_listing(big, encoded=True)
    blocks = {}
    for s in stats:
        f = find(s["path"])
        if s["size"] != f["size"]:
            raise changed(f, f"listed with {f['size']} bytes, read with {s['size']}")
        if s["last"] - s["first"] + 1 != s["lines"]:
            raise RuntimeError(f"{f['name']}: a Spark partition held more than one block")
        blocks.setdefault(f["index"], []).append(s)
    layout = {}
    for f in big:
        mine = sorted(blocks.get(f["index"], []), key=lambda s: s["start"])
        total = sum(s["bytes"] for s in mine)
        bom = bom_taken(f, total)
        if not mine or mine[0]["start"] != 0:
            raise changed(f, "no line at its start")
        head = BOM * bom + bytes(mine[0]["head"])
        before, empty_run = 0, 0
        for number, s in enumerate(mine):
            layout[(f["index"], s["start"])] = {
                "number": number,
                "line": before + 1,
                "lines": s["lines"],
                "bytes": s["bytes"],
                # telemeter limits a run of empty lines, whatever blocks
                # it spans.
                "empty_before": empty_run,
                "head": head,
                "bom": bom and number == 0,
                "no_last_newline": number == len(mine) - 1 and total + len(BOM) * bom == f["size"] + 1,
            }
            before += s["lines"]
            empty_run = empty_run + s["lines"] if s["last_full"] is None else s["last"] - s["last_full"]
    return layout


class Block:
    """A block of a file at a URI, copied line by line to a scratch file
    that `telemeter spark-task check` reads as the block's split: the
    file's header (for a block after the first), then the block's
    lines."""

    def __init__(self, f, start, size, layout, scratch):
        if size != f["size"]:
            raise changed(f, f"listed with {f['size']} bytes, read with {size}")
        self.f, self.start, self.path = f, start, os.path.join(scratch, "input")
        self.layout = layout.get((f["index"], start))
        if self.layout is None and start != 0:
            raise changed(f, f"a block at byte {start} that was not counted")
        self.out = open(self.path, "wb")
        self.prefix = 0
        if start > 0:
            self.prefix = len(self.layout["head"]) + 1
            self.out.write(self.layout["head"] + b"\n")
        elif self.layout and self.layout["bom"]:
            self.out.write(BOM)
        self.lines, self.bytes = 0, 0

    def write(self, lines):
        """Appends a batch of lines (an Arrow binary array), each with its
        newline."""
        import pyarrow.compute as pc

        joined = pc.binary_join_element_wise(lines, b"\n", b"")
        length = (pc.sum(pc.binary_length(lines)).as_py() or 0) + len(lines)
        self.out.write(memoryview(joined.buffers()[2])[:length])
        self.lines += len(lines)
        self.bytes += length

    def check(self, binary, threads, on_bad_row, out):
        """Closes the copy and checks it: the task's summary."""
        self.out.close()
        f, layout = self.f, self.layout
        if layout is None:
            # A file read whole: its lines hold its bytes, but for a byte
            # order mark (put back) and perhaps a last newline (taken).
            bom = bom_taken(f, self.bytes)
            if bom:
                with_bom = self.path + ".bom"
                with open(self.path, "rb") as lines, open(with_bom, "wb") as copy:
                    copy.write(BOM)
                    shutil.copyfileobj(lines, copy, 1 << 20)
                os.replace(with_bom, self.path)
            trim = self.bytes + len(BOM) * bom == f["size"] + 1
        else:
            if (self.lines, self.bytes) != (layout["lines"], layout["bytes"]):
                counted, read = (layout["lines"], layout["bytes"]), (self.lines, self.bytes)
                raise changed(f, f"(lines, bytes) {counted} counted at byte {self.start}, {read} read")
            trim = layout["no_last_newline"]
        size = os.path.getsize(self.path) - trim
        if trim:
            os.truncate(self.path, size)
        task = dict(f, path=self.path, split=None)
        if self.start > 0:
            task["split"] = {
                "number": layout["number"], "from": self.prefix, "to": size, "line": layout["line"],
                "size": size, "empty_before": layout["empty_before"],
            }
        return run_task(binary, threads, task, on_bad_row, out)


def check_blocks(binary, out, on_bad_row, files, layout):
    """The task of a partition of blocks of files at a URI (mapInArrow):
    each block's lines copied to the executor's scratch folder and
    checked there; yields the summaries as JSON."""
    find = of_listing(files, encoded=True)

    def run(batches):
        threads = task_threads()
        scratch = tempfile.mkdtemp(prefix="telemeter-", dir=SparkFiles.getRootDirectory())
        block = None
        try:
            for batch in batches:
                for at, end in runs(batch):
                    path, start = batch.column(1)[at].as_py(), batch.column(2)[at].as_py()
                    f = find(path)
                    if block is None or (block.f["index"], block.start) != (f["index"], start):
                        if block is not None:
                            yield summary_batch(block.check(binary, threads, on_bad_row, out))
                        block = Block(f, start, batch.column(3)[at].as_py(), layout, scratch)
                    block.write(batch.column(0).slice(at, end - at))
            if block is not None:
                yield summary_batch(block.check(binary, threads, on_bad_row, out))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    return run


def runs(batch):
    """The (first, end) rows of each run of one block in an Arrow batch of
    lines (a batch may end one file's block and start the next's)."""
    import pyarrow.compute as pc

    n = batch.num_rows
    if n == 0:
        return []
    paths, starts = batch.column(1), batch.column(2)
    if n == 1:
        return [(0, 1)]
    moved = pc.or_(
        pc.not_equal(paths.slice(1), paths.slice(0, n - 1)),
        pc.not_equal(starts.slice(1), starts.slice(0, n - 1)),
    )
    cuts = [0] + [i + 1 for i in pc.indices_nonzero(moved).to_pylist()] + [n]
    return list(zip(cuts, cuts[1:]))


def summary_batch(summary):
    """A task's summary as an Arrow batch of one JSON string."""
    import pyarrow as pa

    return pa.RecordBatch.from_pydict({"summary": [json.dumps(summary)]})


def check_streamed(binary, out, on_bad_row, plain, parquet, block_bytes):
    """Checks files at a URI that Spark streams as lines: `plain` CSV
    files in blocks of `block_bytes` (0: whole), `parquet` files whole.
    Their summaries, the (file index, split) pieces that must have one,
    and how many files were cut into how many blocks."""
    layout = block_layout(plain, block_bytes) if block_bytes else {}
    counted = {index for index, _ in layout}
    blocks = [sum(1 for i, _ in layout if i == index) for index in counted]
    cuts = {"split_files": sum(1 for n in blocks if n > 1), "splits": sum(n for n in blocks if n > 1)}
    pieces = [(index, v["number"]) for (index, _), v in layout.items()]
    pieces += [(f["index"], 0) for f in plain + parquet if f["index"] not in counted]
    summaries = []
    for group, cut in ((plain, block_bytes or WHOLE), (parquet, WHOLE)):
        if group:
            task = check_blocks(binary, out, on_bad_row, group, layout)
            lines = read_lines(session(cut), group).mapInArrow(task, "summary string")
            summaries += [json.loads(row["summary"]) for row in lines.collect()]
    return summaries, pieces, cuts


def read_contents(files):
    """The input files' bytes (path, content), one Spark partition per file
    (Spark's binaryFile source: any Hadoop filesystem, files up to 2 GiB):
    for compressed files, which Spark's text source would decode with
    Hadoop's codecs, not telemeter's, and files of at most 3 bytes."""
    spark = session(128 << 20)
    paths = [glob_escape(f["path"]) for f in files]
    reader = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
    return reader.load(paths).select("path", "content")


def check_contents(binary, out, on_bad_row, files):
    """The task of a partition of input files read by Spark: each file's
    bytes written to the executor's scratch folder, then `telemeter
    spark-task` on that copy (under the file's own name)."""
    find = of_listing(files, encoded=False)

    def run(rows):
        threads = task_threads()
        for row in rows:
            f = find(row["path"])
            content = row["content"]
            if len(content) != f["size"]:
                raise changed(f, f"listed with {f['size']} bytes, read {len(content)}")
            scratch = tempfile.mkdtemp(prefix="telemeter-", dir=SparkFiles.getRootDirectory())
            try:
                copy = os.path.join(scratch, "input")
                with open(copy, "wb") as data:
                    data.write(content)
                del content
                yield run_task(binary, threads, dict(f, path=copy), on_bad_row, out)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)

    return run


def check_listed(sc, plan, files, out, staging):
    """Checks the files listed at DATA (a URI): plain CSV and Parquet files
    streamed by Spark as lines (the CSV files in blocks of the plan's
    split_bytes), compressed files and files of at most 3 bytes through
    binaryFile, empty files (which Spark's file sources skip) as an empty
    file in the staging folder. The summaries, the (file index, split)
    pieces that must have one, and how many files were cut into how many
    blocks."""
    binary, on_bad_row = plan["binary"], plan["on_bad_row"]
    # Hadoop's line reader gives no line for a file that is only a byte
    # order mark: such files (and smaller ones) go through binaryFile.
    named = lambda suffix: [f for f in files if f["size"] > len(BOM) and f["name"].lower().endswith(suffix)]
    plain, parquet = named(".csv"), named(".parquet")
    streamed = {f["index"] for f in plain + parquet}
    contents = [f for f in files if f["size"] > 0 and f["index"] not in streamed]
    empty = [f for f in files if f["size"] == 0]
    summaries, pieces, cuts = check_streamed(binary, out, on_bad_row, plain, parquet, plan["split_bytes"])
    if contents:
        task = check_contents(binary, out, on_bad_row, contents)
        summaries += read_contents(contents).rdd.mapPartitions(task).collect()
    if empty:
        nothing = os.path.join(staging, "empty")
        open(nothing, "wb").close()
        task = check_files(binary, out, on_bad_row)
        summaries += sc.parallelize([dict(f, path=nothing) for f in empty], 1).mapPartitions(task).collect()
    return summaries, pieces + [(f["index"], 0) for f in contents + empty], cuts


def by_file(pieces, names, summaries):
    """The check tasks' summaries by input file index, a file's splits
    added up: its counts, its error (a fault of the whole file, else its
    first bad row: the splits are in line order) and its splits with valid
    rows. `pieces` are the (file index, split)
    that must have a summary, `names` the files' names by index."""
    by_split = {(s["index"], s["split"]): s for s in summaries}
    missing = sorted({names[index] for index, split in pieces if (index, split) not in by_split})
    if missing:
        raise RuntimeError(f"Spark read no contents for {', '.join(missing)}")
    found = {}
    for (index, split), s in sorted(by_split.items()):
        merged = found.setdefault(index, {"read": 0, "valid": 0, "set_aside": 0, "error": None, "splits": []})
        for key in ("read", "valid", "set_aside"):
            merged[key] += s[key]
        # A fault of the whole file (a run of empty lines past the limit
        # across a block's edge, whose first lines the block before it
        # reports as bad rows) refuses the file, as the local reader's
        # check of its lines, ahead of their rows, does.
        error, first = s["error"], merged["error"]
        if error and (not first or (error.get("whole_file") and not first.get("whole_file"))):
            merged["error"] = error
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
            {"file": index, "entries": os.path.join(checked, f"{index}.{split}.index")}
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


def write_files(binary, writes_path):
    """The task of a partition of the write plan's files (`writes_path`,
    writes.json): `telemeter spark-task write` on each."""

    def run(tasks):
        for task in tasks:
            words = ["write", "--plan", writes_path, "--task", str(task)]
            yield run_binary(binary, "1", words, f"file {task} of the write plan")

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


def await_plan(staging, parent, telemeter, poll):
    """The write plan telemeter answers deduped.json with (None when
    telemeter is gone, or stopped spark-submit), looked for every `poll`
    seconds."""
    path = os.path.join(staging, "writes.json")
    while not os.path.exists(path):
        # spark-submit ended (telemeter stopped it), or telemeter did: no
        # plan will come.
        if os.getppid() != parent or not alive(telemeter):
            return None
        time.sleep(poll)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_stage(sc, plan, result):
    """Hands telemeter the counts (deduped.json), waits for its write plan,
    and runs one write task per file in it: their summaries."""
    binary, staging = plan["binary"], plan["staging"]
    parent = os.getppid()
    temporary = os.path.join(staging, "deduped.json.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(temporary, os.path.join(staging, "deduped.json"))
    writes = await_plan(staging, parent, plan["pid"], plan["poll_seconds"])
    if writes is None:
        sys.exit(1)
    tasks = len(writes["tasks"])
    if tasks == 0:
        return []
    sc.setJobDescription("write the new rows (telemeter spark-task, one task per records file)")
    task = write_files(binary, os.path.join(staging, "writes.json"))
    return sc.parallelize(range(tasks), tasks).mapPartitions(task).collect()


def finish(staging, result):
    """Writes result.json (atomically: telemeter reads it after the job),
    and ends the job. Not with sc.stop(): PySpark's stops its accumulator
    server, whose handler waits up to a second for its next poll, a
    second every ingest waits for (telemeter waits for spark-submit).
    This Python process ends at once instead, and the JVM stops the
    SparkContext from its shutdown hook as spark-submit exits."""
    temporary = os.path.join(staging, "result.json.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(temporary, os.path.join(staging, "result.json"))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    plan_path = sys.argv[1]
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    staging = plan["staging"]
    drop_numpy_converters()
    sc = SparkContext.getOrCreate(python_daemon(SparkConf(), staging))
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
            return finish(staging, result)
    if files and plan.get("data_uri"):
        sc.setJobDescription("check every row (telemeter spark-task, one task per file or block)")
        summaries, pieces, result["blocks"] = check_listed(sc, plan, files, checked_dir, staging)
    elif files:
        sc.setJobDescription("check every row (telemeter spark-task, input files or splits, about 256 MiB a task)")
        task = check_files(plan["binary"], checked_dir, plan["on_bad_row"])
        summaries = sc.parallelize(files, check_tasks(sc, files)).mapPartitions(task).collect()
        pieces = [(f["index"], (f.get("split") or {}).get("number", 0)) for f in files]
    else:
        summaries, pieces = [], []
    by_index = by_file(pieces, {f["index"]: f["name"] for f in files}, summaries)
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
        result["writes"] = write_stage(sc, plan, result)

    finish(staging, result)


if __name__ == "__main__":
    main()
