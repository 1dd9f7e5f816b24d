#!/usr/bin/env bash
# bench/run.sh once per CSV dialect (see bench/dialects.py): the
# generator's, DuckDB's COPY, Python's csv with QUOTE_ALL and CRLF, and
# that gzipped. Arguments go to every run; each dialect's numbers go to
# $BENCH_WORK/<dialect>/ (the generator's to $BENCH_WORK).
set -euo pipefail
cd "$(dirname "$0")/.."
for dialect in plain duckdb quote-all-crlf quote-all-crlf-gz; do
  DIALECT=$dialect bench/run.sh "$@"
done
