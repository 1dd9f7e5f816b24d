"""Spend per country and currency in one month, across every account of a
telemeter store, with DuckDB (docs/analysts.md).

    python spend_per_country_duckdb.py STORE 2026-11

Prints CSV: country,currency,spend, one line per pair, by country then
currency. Spend is the sum of `amount` (surcharges included) of the calls
and messages whose timestamp is in the month (UTC), exact to the nano-unit.
"""

import json
import sys
from datetime import date
from pathlib import Path

import duckdb


def dropped_rows(store):
    """The corrections files of the store's published ingests: each names
    the stored rows that stopped counting (entry `dropped`: an older
    revision, a voided record) by records file, source file and line."""
    manifest = json.loads((store / "manifest.json").read_text())
    return [str(store / i["corrections"]) for i in manifest["ingests"] if i.get("corrections")]


def published(store, kind):
    """The records files of `kind` in the store's published generation (only
    the files manifest.json lists: a folder may also hold files of an ingest
    that did not publish)."""
    manifest = json.loads((store / "manifest.json").read_text())
    kind = manifest["kinds"].get(kind, {"records": []})
    return [str(store / name) for name in kind["records"]], str(store / manifest["accounts_csv"])


def month_bounds(month):
    """The first instants (UTC, as TIMESTAMPTZ text) of month `YYYY-MM` and
    of the month after it."""
    year, number = map(int, month.split("-"))
    start = date(year, number, 1)
    end = date(year + number // 12, number % 12 + 1, 1)
    return f"{start} 00:00:00+00", f"{end} 00:00:00+00"


def main():
    store, month = Path(sys.argv[1]), sys.argv[2]
    start, end = month_bounds(month)
    calls, accounts = published(store, "calls")
    messages, _ = published(store, "messages")
    files = calls + messages
    if not files:
        return
    corrections = dropped_rows(store)
    dropped = (
        """SELECT records_file, source_file, CAST(source_line AS BIGINT) AS source_line
           FROM read_csv($corrections, all_varchar = true) WHERE entry = 'dropped'"""
        if corrections
        else "SELECT '' AS records_file, '' AS source_file, 0::BIGINT AS source_line WHERE false"
    )
    # Both kinds have auth_id, timestamp, country and amount: read them as
    # one table (union_by_name leaves the columns the other kind lacks NULL).
    rows = duckdb.sql(
        f"""
        WITH dropped AS ({dropped})
        SELECT u.country,
               coalesce(nullif(a.currency, ''), 'USD') AS currency,
               sum(u.amount) AS spend
        FROM read_parquet($files, union_by_name = true, filename = true) AS u
        LEFT JOIN read_csv($accounts, all_varchar = true) AS a USING (auth_id)
        WHERE u.country <> ''
          AND u.timestamp >= CAST($start AS TIMESTAMPTZ)
          AND u.timestamp < CAST($end AS TIMESTAMPTZ)
          AND NOT EXISTS (
              SELECT 1 FROM dropped AS d
              WHERE $store || '/' || d.records_file = u.filename
                AND d.source_file = u.source_file AND d.source_line = u.source_line)
        GROUP BY ALL
        ORDER BY country, currency
        """,
        params={"files": files, "accounts": accounts, "start": start, "end": end, "store": str(store)}
        | ({"corrections": corrections} if corrections else {}),
    ).fetchall()
    print("country,currency,spend")
    for country, currency, spend in rows:
        print(f"{country},{currency},{spend}")


if __name__ == "__main__":
    main()
