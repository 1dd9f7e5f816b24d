#!/usr/bin/env python3
"""The generator's records rewritten by tools we did not write, for bench/run.sh.

Real exports quote fields and end lines with CRLF; our generator does
neither. From one generated data folder (`telemeter generate --format csv`)
this writes the same records, file for file, in other dialects, each into a
folder of its own next to the source (`<data>-<dialect>`):

- `duckdb`: DuckDB's `COPY ... TO` with its defaults (quotes only where
  needed, so an empty string is written `""`). Every column is read as
  text and an empty field as the empty string, not NULL, so the values are
  the generator's, byte for byte.
- `quote-all-crlf`: Python's csv module with `QUOTE_ALL` and its default
  line ending, CRLF.
- `quote-all-crlf-gz`: the `quote-all-crlf` files compressed with gzip.

`accounts.csv` is copied as it is. A folder already there is kept (delete it
to write it again).

Usage: dialects.py --data DIR [--dialect NAME ...]
Prints each folder written.
"""

import argparse
import csv
import gzip
import os
import shutil

KINDS = ("calls", "messages", "transcriptions", "charges")
DIALECTS = ("duckdb", "quote-all-crlf", "quote-all-crlf-gz")


def files_of(data, kind):
    folder = os.path.join(data, kind)
    return sorted(f for f in os.listdir(folder) if f.endswith(".csv"))


def write_duckdb(data, out):
    import duckdb

    con = duckdb.connect()
    for kind in KINDS:
        os.makedirs(os.path.join(out, kind), exist_ok=True)
        for name in files_of(data, kind):
            source = os.path.join(data, kind, name).replace("'", "''")
            target = os.path.join(out, kind, name).replace("'", "''")
            # all_varchar: no value reparsed; coalesce: an empty field is an
            # empty string (which COPY quotes), as an export of a text column holds.
            con.execute(
                f"COPY (SELECT coalesce(COLUMNS(*), '') FROM read_csv('{source}', all_varchar = true, header = true)) "
                f"TO '{target}' (FORMAT csv, HEADER)"
            )


def write_quote_all(data, out, compress):
    for kind in KINDS:
        os.makedirs(os.path.join(out, kind), exist_ok=True)
        for name in files_of(data, kind):
            source = os.path.join(data, kind, name)
            target = os.path.join(out, kind, name + (".gz" if compress else ""))
            opener = (lambda p: gzip.open(p, "wt", newline="", compresslevel=6)) if compress else (
                lambda p: open(p, "w", newline=""))
            with open(source, newline="") as src, opener(target) as dst:
                writer = csv.writer(dst, quoting=csv.QUOTE_ALL)  # lineterminator is "\r\n"
                writer.writerows(csv.reader(src))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--dialect", action="append", choices=DIALECTS)
    args = parser.parse_args()
    data = os.path.normpath(args.data)
    for dialect in args.dialect or DIALECTS:
        out = f"{data}-{dialect}"
        if os.path.isdir(out):
            print(out, "(kept)")
            continue
        partial = out + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        os.makedirs(partial)
        shutil.copy(os.path.join(data, "accounts.csv"), os.path.join(partial, "accounts.csv"))
        if dialect == "duckdb":
            write_duckdb(data, partial)
        else:
            write_quote_all(data, partial, compress=dialect.endswith("-gz"))
        os.rename(partial, out)
        print(out)


if __name__ == "__main__":
    main()
