#!/usr/bin/env python3
"""The generator's records in shapes real platforms have, for A/B timings.

Our generator spreads rows over a few Zipf-sized accounts, in a few large
files. From one generated data folder this writes the same rows, file for
file unless said, into `<data>-<shape>` next to it:

- `accounts-N`: N accounts (e.g. `accounts-100000`), each row's account
  and subaccount taken from its record id's hash, so a re-delivered row
  stays a duplicate; `accounts.csv` lists them all.
- `files-N`: every file cut into files of N rows (e.g. `files-200`), each
  with the header.

Time them against the source with `/usr/bin/time -v`, alternating, the
page cache warmed before each run (docs/benchmarks.md, "Shapes of data").
Needs DuckDB (`bench/requirements-peers.txt`).
Usage: bench/shapes.py DATA SHAPE...
"""

import glob
import os
import shutil
import sys

import duckdb

KINDS = ["calls", "messages", "transcriptions", "charges"]
WITH_SUBACCOUNT = {"calls", "messages", "transcriptions"}


def many_accounts(data: str, out: str, accounts: int) -> None:
    con = duckdb.connect()
    h = "(hash(record_id) % 1000000)"
    for kind in KINDS:
        os.makedirs(f"{out}/{kind}")
        for path in sorted(glob.glob(f"{data}/{kind}/*.csv")):
            src = f"read_csv('{path}', all_varchar=true, header=true)"
            columns = con.sql(f"select * from {src} limit 0").columns
            exprs = {c: f'"{c}"' for c in columns}
            exprs["auth_id"] = f"'MA' || lpad(({h} % {accounts})::varchar, 18, '0')"
            if kind in WITH_SUBACCOUNT:
                exprs["subaccount_auth"] = (
                    "case when subaccount_auth is null then null else "
                    f"'SA' || lpad(({h} % {accounts})::varchar, 15, '0') || '_' || ({h} % 3)::varchar end"
                )
            select = ", ".join(f'{exprs[c]} AS "{c}"' for c in columns)
            con.sql(f"copy (select {select} from {src}) to '{out}/{kind}/{os.path.basename(path)}' (header)")
    con.sql(
        f"copy (select distinct auth_id, 'USD' as currency from read_csv('{out}/*/*.csv', all_varchar=true, "
        f"union_by_name=true) order by 1) to '{out}/accounts.csv' (header)"
    )


def many_files(data: str, out: str, rows: int) -> None:
    shutil.copy(f"{data}/accounts.csv", f"{out}/accounts.csv")
    for kind in KINDS:
        os.makedirs(f"{out}/{kind}")
        for path in sorted(glob.glob(f"{data}/{kind}/*.csv")):
            stem = os.path.basename(path)[: -len(".csv")]
            with open(path, "rb") as source:
                header = source.readline()
                part, lines = 0, []
                for line in source:
                    lines.append(line)
                    if len(lines) == rows:
                        write_part(f"{out}/{kind}/{stem}-{part:06}.csv", header, lines)
                        part, lines = part + 1, []
                if lines:
                    write_part(f"{out}/{kind}/{stem}-{part:06}.csv", header, lines)


def write_part(path: str, header: bytes, lines: list) -> None:
    with open(path, "wb") as out:
        out.write(header)
        out.writelines(lines)


def main() -> None:
    data, shapes = sys.argv[1].rstrip("/"), sys.argv[2:]
    for shape in shapes:
        name, _, count = shape.partition("-")
        out = f"{data}-{shape}"
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        if name == "accounts":
            many_accounts(data, out, int(count))
        elif name == "files":
            many_files(data, out, int(count))
        else:
            sys.exit(f"unknown shape '{shape}': accounts-N or files-N")
        print("wrote", out, flush=True)


if __name__ == "__main__":
    main()
