#!/usr/bin/env python3
"""Peer implementations of telemeter's heavy step, for bench/run.sh.

The same raw CSV files, the same work as `telemeter summary` / `report`:
parse every column of the records the query reads (timestamps as instants,
money as DECIMAL(38,9), never floating point), drop re-delivered rows
(unique by record_id, per kind), keep the window (and the account), bucket
by day, group by account, day and the usage dimensions (product, type,
subaccount, country, direction, code), sum units, duration, amount and
surcharge, and sort.

Differences from telemeter, all of which make the peer's job lighter:
- days are UTC days for every account (telemeter uses each account's time
  zone from accounts.csv);
- a row that breaks the contract is not looked for (telemeter checks every
  field of every row and fails or sets the row aside);
- a conflicting re-delivery (same record_id, different content) is not
  looked for (telemeter compares a hash of every field);
- the output is the grouped frame (nothing written), not API pages.

`--engine polars-issue` is a lighter query, a second
baseline: polars infers the column types (so money is f64, not exact),
takes the day as the first ten characters of the timestamp text (no
timestamp parsing: right for the `Z` timestamps, the local date for
transcriptions' offsets), then filter, unique by record_id, group_by, sort.
Its totals are floating point, so bench/run.sh reports how far they are
from the exact spend instead of requiring equality.

`--engine polars-ingest` is the ingest baseline: every kind's CSV
to one typed Parquet file, unique by record_id (no checks, no rollups);
it prints the rows written as its groups.

Usage:
  peers.py --engine polars|polars-issue|duckdb --data DIR --from YYYY-MM-DD --to YYYY-MM-DD
           [--account AUTH_ID] [--threads N] [--totals FILE]
  peers.py --engine polars-ingest --data DIR --out DIR [--threads N]
Prints one line: engine, groups, total amount (exact), seconds; --totals
writes each account's amount (auth_id,amount) for a check against telemeter.
"""

import argparse
import datetime as dt
import os
import sys
import time

# Per kind: (folder, timestamp format (polars / strptime), units column,
# duration column, type column, product expression, code column, has
# surcharge, has direction/country).
KINDS = {
    "calls": dict(ts="%Y-%m-%dT%H:%M:%SZ", units=None, duration="billed_seconds", type="type",
                  product="product", code="hangup_cause", surcharge=True, geo=True),
    "messages": dict(ts="%Y-%m-%dT%H:%M:%S%.fZ", units="segments", duration=None, type="type",
                     product="'sms'", code="error_code", surcharge=True, geo=True),
    "transcriptions": dict(ts="%Y-%m-%d %H:%M:%S%:z", units=None, duration="duration_seconds", type="type",
                           product="'transcription'", code=None, surcharge=False, geo=False),
    "charges": dict(ts="%Y-%m-%dT%H:%M:%SZ", units="units", duration=None, type="description",
                    product="'other'", code=None, surcharge=False, geo=False),
}

GROUP = ["auth_id", "day", "product", "type", "subaccount", "country", "direction", "code"]


def files(data, kind):
    folder = os.path.join(data, kind)
    if not os.path.isdir(folder):
        return []
    # Both peers read gzip and zstd CSV (decompressed as they read).
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith((".csv", ".csv.gz", ".csv.zst")))


def group_and_sum(frames):
    """Both polars queries' last step: group, sum, sort, collect."""
    import polars as pl

    query = (
        pl.concat(frames)
        .group_by(GROUP)
        .agg(pl.col("units").sum(), pl.col("duration").sum(), pl.col("amount").sum(), pl.col("surcharge").sum())
        .sort(GROUP)
    )
    frame = query.collect()
    total = frame["amount"].sum() if frame.height else 0
    per_account = frame.group_by("auth_id").agg(pl.col("amount").sum()).sort("auth_id").rows()
    return frame.height, total, per_account


def run_polars(args):
    import polars as pl

    start = dt.datetime.fromisoformat(args.from_date).replace(tzinfo=dt.timezone.utc)
    end = dt.datetime.fromisoformat(args.to_date).replace(tzinfo=dt.timezone.utc)
    money = pl.Decimal(38, 9)
    frames = []
    for kind, spec in KINDS.items():
        paths = files(args.data, kind)
        if not paths:
            continue
        lf = pl.scan_csv(paths, infer_schema=False)  # every column a string: we parse
        if args.account:
            lf = lf.filter(pl.col("auth_id") == args.account)
        lf = lf.unique(subset=["record_id"], keep="any")
        ts = pl.col("timestamp").str.to_datetime(spec["ts"], time_zone="UTC", time_unit="ns")
        lit = lambda name: pl.lit(name.strip("'")) if name.startswith("'") else pl.col(name)
        cols = [
            pl.col("auth_id"),
            ts.alias("ts"),
            lit(spec["product"]).alias("product"),
            pl.col(spec["type"]).alias("type"),
            pl.col("subaccount_auth").fill_null("").alias("subaccount") if kind != "charges" else pl.lit("").alias("subaccount"),
            (pl.col("country") if spec["geo"] else pl.lit("")).fill_null("").alias("country"),
            (pl.col("direction") if spec["geo"] else pl.lit("")).fill_null("").alias("direction"),
            (pl.col(spec["code"]) if spec["code"] else pl.lit("")).fill_null("").alias("code"),
            (pl.col(spec["units"]).cast(pl.Int64) if spec["units"] else pl.lit(1, pl.Int64)).alias("units"),
            (pl.col(spec["duration"]).cast(money) if spec["duration"] else pl.lit(0).cast(money)).alias("duration"),
            pl.col("amount").cast(money).alias("amount"),
            (pl.col("surcharge").cast(money) if spec["surcharge"] else pl.lit(0).cast(money)).alias("surcharge"),
        ]
        lf = lf.select(cols).filter((pl.col("ts") >= start) & (pl.col("ts") < end))
        frames.append(lf.with_columns(pl.col("ts").dt.truncate("1d").alias("day")).drop("ts"))
    return group_and_sum(frames)


def run_polars_issue(args):
    import polars as pl

    frames = []
    for kind, spec in KINDS.items():
        paths = files(args.data, kind)
        if not paths:
            continue
        # Inferred types (money is f64), but a code column is text: a
        # numeric-looking first hundred rows would fail on a later label.
        codes = {spec["code"]: pl.String} if spec["code"] else None
        lf = pl.scan_csv(paths, schema_overrides=codes)
        if args.account:
            lf = lf.filter(pl.col("auth_id") == args.account)
        lf = lf.unique(subset=["record_id"], keep="any")
        lit = lambda name: pl.lit(name.strip("'")) if name.startswith("'") else pl.col(name).cast(pl.String)
        zero = pl.lit(0.0)
        cols = [
            pl.col("auth_id"),
            pl.col("timestamp").str.slice(0, 10).alias("day"),
            lit(spec["product"]).alias("product"),
            pl.col(spec["type"]).cast(pl.String).alias("type"),
            (pl.col("subaccount_auth").cast(pl.String) if kind != "charges" else pl.lit("")).fill_null("").alias("subaccount"),
            (pl.col("country").cast(pl.String) if spec["geo"] else pl.lit("")).fill_null("").alias("country"),
            (pl.col("direction").cast(pl.String) if spec["geo"] else pl.lit("")).fill_null("").alias("direction"),
            (pl.col(spec["code"]).cast(pl.String) if spec["code"] else pl.lit("")).fill_null("").alias("code"),
            (pl.col(spec["units"]).cast(pl.Int64) if spec["units"] else pl.lit(1, pl.Int64)).alias("units"),
            (pl.col(spec["duration"]).cast(pl.Float64) if spec["duration"] else zero).alias("duration"),
            pl.col("amount").cast(pl.Float64).alias("amount"),
            (pl.col("surcharge").cast(pl.Float64) if spec["surcharge"] else zero).alias("surcharge"),
        ]
        frames.append(lf.select(cols).filter((pl.col("day") >= args.from_date) & (pl.col("day") < args.to_date)))
    return group_and_sum(frames)


def run_polars_ingest(args):
    """The ingest baseline: each kind's CSV files to one
    typed Parquet file (timestamps as instants, money as DECIMAL(38,9),
    counts as Int64), unique by record_id, Snappy. No row checks, no
    conflict check, no rollups, no index: lighter than `telemeter ingest`."""
    import polars as pl

    money = pl.Decimal(38, 9)
    os.makedirs(args.out, exist_ok=True)
    rows = 0
    for kind, spec in KINDS.items():
        paths = files(args.data, kind)
        if not paths:
            continue
        lf = pl.scan_csv(paths, infer_schema=False).unique(subset=["record_id"], keep="any")
        typed = [pl.col("timestamp").str.to_datetime(spec["ts"], time_zone="UTC", time_unit="ns")]
        typed += [pl.col(c).cast(money) for c in ("amount", spec["duration"]) if c]
        if spec["surcharge"]:
            typed.append(pl.col("surcharge").cast(money))
        if spec["units"]:
            typed.append(pl.col(spec["units"]).cast(pl.Int64))
        path = os.path.join(args.out, f"{kind}.parquet")
        lf.with_columns(typed).sink_parquet(path, compression="snappy")
        rows += pl.scan_parquet(path).select(pl.len()).collect().item()
    return rows, 0, []


def run_duckdb(args):
    import duckdb

    con = duckdb.connect()
    if args.threads:
        con.execute(f"SET threads = {int(args.threads)}")
    con.execute("SET TimeZone = 'UTC'")
    selects = []
    for kind, spec in KINDS.items():
        paths = files(args.data, kind)
        if not paths:
            continue
        listing = "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"
        account = f"AND auth_id = '{args.account}'" if args.account else ""
        sub = "coalesce(subaccount_auth, '')" if kind != "charges" else "''"
        geo = ("coalesce(country, '')", "coalesce(direction, '')") if spec["geo"] else ("''", "''")
        code = f"coalesce({spec['code']}, '')" if spec["code"] else "''"
        units = f"CAST({spec['units']} AS BIGINT)" if spec["units"] else "1"
        duration = f"CAST({spec['duration']} AS DECIMAL(38,9))" if spec["duration"] else "CAST(0 AS DECIMAL(38,9))"
        surcharge = "CAST(surcharge AS DECIMAL(38,9))" if spec["surcharge"] else "CAST(0 AS DECIMAL(38,9))"
        selects.append(f"""
            SELECT auth_id, date_trunc('day', ts) AS day, {spec['product']} AS product, {spec['type']} AS type,
                   {sub} AS subaccount, {geo[0]} AS country, {geo[1]} AS direction, {code} AS code,
                   {units} AS units, {duration} AS duration, CAST(amount AS DECIMAL(38,9)) AS amount,
                   {surcharge} AS surcharge
            FROM (
                SELECT *, CAST("timestamp" AS TIMESTAMPTZ) AS ts
                FROM (SELECT * FROM read_csv({listing}, all_varchar = true, header = true) WHERE true {account})
                QUALIFY row_number() OVER (PARTITION BY record_id) = 1
            )
            WHERE ts >= TIMESTAMPTZ '{args.from_date} 00:00:00+00' AND ts < TIMESTAMPTZ '{args.to_date} 00:00:00+00'
        """)
    sql = f"""
        SELECT {', '.join(GROUP)}, sum(units) AS units, sum(duration) AS duration, sum(amount) AS amount,
               sum(surcharge) AS surcharge
        FROM ({' UNION ALL '.join(selects)})
        GROUP BY ALL ORDER BY ALL
    """
    con.execute(f"CREATE TEMP TABLE result AS {sql}")
    groups, total = con.execute("SELECT count(*), coalesce(sum(amount), 0) FROM result").fetchone()
    per_account = con.execute("SELECT auth_id, sum(amount) FROM result GROUP BY ALL ORDER BY ALL").fetchall()
    return groups, total, per_account


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["polars", "polars-issue", "duckdb", "polars-ingest"], required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--from", dest="from_date")
    parser.add_argument("--to", dest="to_date")
    parser.add_argument("--out", help="polars-ingest: the folder of its Parquet files")
    parser.add_argument("--account")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--totals")
    args = parser.parse_args()
    if args.engine == "polars-ingest" and not args.out:
        parser.error("--engine polars-ingest needs --out")
    if args.engine != "polars-ingest" and not (args.from_date and args.to_date):
        parser.error(f"--engine {args.engine} needs --from and --to")
    if args.threads and args.engine.startswith("polars"):
        os.environ["POLARS_MAX_THREADS"] = str(args.threads)
    began = time.perf_counter()
    engines = {"polars": run_polars, "polars-issue": run_polars_issue, "duckdb": run_duckdb,
               "polars-ingest": run_polars_ingest}
    run = engines[args.engine]
    groups, total, per_account = run(args)
    seconds = time.perf_counter() - began
    if args.totals:
        with open(args.totals, "w") as out:
            out.writelines(f"{account},{amount}\n" for account, amount in per_account)
    print(f"{args.engine} groups={groups} amount={total} seconds={seconds:.3f}")


if __name__ == "__main__":
    sys.exit(main())
