"""telemeter ingest --engine spark: the Python workers' daemon.

Written by telemeter to the staging folder beside the job, which adds
that folder to the executors' search path (spark.executorEnv.PYTHONPATH)
and names this module Spark's daemon (spark.python.daemon.module): it
sets the search path, then runs pyspark.daemon unchanged. The job sets
its own search path with the same function.
"""

import importlib.machinery
import os
import sys


def installed_first():
    """Puts this Python's installed pyspark ahead of SPARK_HOME's
    python/lib zips on sys.path when those zips are that very install's
    (pip's layout: SPARK_HOME is the pyspark package), and Spark's jars
    last. Python compiles a zip's modules at every start, where an
    install has them compiled, and looks every later import up in each
    zip and jar before the standard library (docs/scale.md has the
    cost)."""
    paths = list(sys.path)
    jars = [p for p in paths if p.endswith(".jar")]
    zips = [p for p in paths if p.endswith(".zip")]
    plain = [p for p in paths if p not in jars and p not in zips]
    spec = importlib.machinery.PathFinder.find_spec("pyspark", plain)
    home = os.path.realpath(os.path.dirname(spec.origin)) if spec and spec.origin else None
    ours = [p for p in zips if home and os.path.realpath(os.path.join(p, "..", "..", "..")) == home]
    sys.path[:] = [p for p in paths if p not in jars and p not in ours] + ours + jars


if __name__ == "__main__":
    installed_first()
    from pyspark import daemon

    daemon.manager()
