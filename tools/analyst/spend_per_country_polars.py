"""Spend per country and currency in one month, across every account of a
telemeter store, with polars (docs/analysts.md).

    python spend_per_country_polars.py STORE 2026-11

Prints CSV: country,currency,spend, one line per pair, by country then
currency. Spend is the sum of `amount` (surcharges included) of the calls
and messages whose timestamp is in the month (UTC), exact to the nano-unit.
"""

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import polars as pl


def main():
    store, month = Path(sys.argv[1]), sys.argv[2]
    # Only the files manifest.json lists: a folder may also hold files of an
    # ingest that did not publish.
    manifest = json.loads((store / "manifest.json").read_text())
    files = [
        str(store / name)
        for kind in ("calls", "messages")
        for name in manifest["kinds"].get(kind, {"records": []})["records"]
    ]
    if not files:
        return
    year, number = map(int, month.split("-"))
    start = datetime(year, number, 1, tzinfo=timezone.utc)
    end = datetime(year + number // 12, number % 12 + 1, 1, tzinfo=timezone.utc)
    # The stored rows that stopped counting (an older revision, a voided
    # record): the corrections files name them by records file, source file
    # and line (entry `dropped`).
    corrections = [str(store / i["corrections"]) for i in manifest["ingests"] if i.get("corrections")]
    dropped = (
        pl.concat([pl.read_csv(path, infer_schema=False) for path in corrections])
        .filter(pl.col("entry") == "dropped")
        .select(
            (pl.lit(str(store) + "/") + pl.col("records_file")).alias("path"),
            "source_file",
            pl.col("source_line").cast(pl.Int64),
        )
        if corrections
        else pl.DataFrame(schema={"path": pl.String, "source_file": pl.String, "source_line": pl.Int64})
    )
    # accounts.csv as of the published ingest: an empty currency is USD.
    accounts = pl.read_csv(store / manifest["accounts_csv"], columns=["auth_id", "currency"], infer_schema=False)
    spend = (
        pl.scan_parquet(files, missing_columns="insert", extra_columns="ignore", include_file_paths="path")
        .join(dropped.lazy(), on=["path", "source_file", "source_line"], how="anti")
        .select("auth_id", "timestamp", "country", "amount")
        .filter((pl.col("country") != "") & (pl.col("timestamp") >= start) & (pl.col("timestamp") < end))
        .join(accounts.lazy(), on="auth_id", how="left")
        .with_columns(pl.col("currency").replace("", None).fill_null("USD"))
        .group_by("country", "currency")
        .agg(pl.col("amount").sum().alias("spend"))
        .sort("country", "currency")
        .collect()
    )
    print("country,currency,spend")
    for country, currency, total in spend.iter_rows():
        print(f"{country},{currency},{total}")


if __name__ == "__main__":
    main()
