#!/usr/bin/env python3
"""Independent reference implementation of the Usage Summary contract.

Written from the contracts only (docs/contracts/records.md, usage-summary.md,
api.md sections 2.3, 4.5, 7, 8, and its time-zone rules), not
from the Rust code, so that it can judge the engine: tests/it/differential.rs
runs both on random data sets and compares them.

Python 3.11 standard library only. Money and durations are `decimal.Decimal`
(never float); instants are integer (seconds, nanoseconds) pairs.

Usage:
  usage_summary.py summary --data D --auth-id A [--query Q] [--now RFC3339]
      prints the expected result (all pages concatenated) as JSON
  usage_summary.py compare --data D --cases CASES.jsonl --actual ACTUAL.jsonl
      CASES: one {"auth_id","query","now"} per line; ACTUAL: one
      {"exit","stdout","stderr"} per line (the output of
      `telemeter summary --all-pages ...` for the same case). Prints every
      mismatch with a diff; exit 1 when there is one.

Not covered: Parquet and .csv.zst inputs (skipped), page tokens (the
comparison uses --all-pages), authentication.
"""

from __future__ import annotations

import argparse
import calendar
import csv
import datetime as dt
import difflib
import gzip
import io
import json
import os
import re
import sys
import urllib.parse
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

HERE = Path(__file__).resolve().parent
LABELS = HERE.parent.parent / "docs" / "contracts"
UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)

KINDS = ("calls", "messages", "transcriptions", "charges")
COLUMNS = {
    "calls": ("record_id", "auth_id", "subaccount_auth", "timestamp", "product", "type", "direction",
              "country", "billed_seconds", "amount", "surcharge", "hangup_cause"),
    "messages": ("record_id", "auth_id", "subaccount_auth", "timestamp", "type", "direction", "country",
                 "segments", "amount", "surcharge", "error_code"),
    "transcriptions": ("record_id", "auth_id", "subaccount_auth", "timestamp", "type", "duration_seconds",
                       "amount"),
    "charges": ("record_id", "auth_id", "timestamp", "description", "units", "amount"),
    "voids": ("record_id", "kind", "revision"),  # corrections.md; `reason` is optional
}
PRODUCTS = ("message", "voice", "zentrunk", "transcription", "other")
GRANULARITIES = ("hour", "day", "month", "year")
NEXT_COARSER = {"hour": "day", "day": "month", "month": "year"}
USAGE_KEYS = ("from_date", "to_date", "product", "type", "subaccount_auth", "country", "direction",
              "total_units", "duration_seconds", "total_amount", "surcharge", "error_code", "hangup_cause",
              "error_reason")
META_KEYS = ("auth_id", "subaccount_auth", "granularity", "from_date", "to_date", "currency", "page_size",
             "total_spend", "total_subaccount_spend", "subaccount_spend")


class DataError(Exception):
    """A file or row that breaks records.md."""


class BadRequest(Exception):
    """A request the API answers with 400.

    `klass` names the failing check, `param` the parameter the message must
    name, `value` the value it must quote (when any), `hint` another text the
    message must contain (e.g. the next coarser granularity)."""

    def __init__(self, klass: str, param: str, value: str | None = None, hint: str | None = None):
        super().__init__(f"{klass}: {param}={value!r} {hint or ''}")
        self.klass, self.param, self.value, self.hint = klass, param, value, hint


class Num(str):
    """A JSON number kept as its exact text."""


# ---------------------------------------------------------------- values

ID_MAX = 128
DECIMAL_RE = re.compile(r"^[0-9]+(\.[0-9]{1,9})?$")
COUNT_RE = re.compile(r"^[0-9]+$")
TS_RE = re.compile(
    r"^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})?$")
COUNTRY_RE = re.compile(r"^[A-Z]{2}$")
CURRENCY_RE = re.compile(r"^[A-Z]{3}$")
DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
# The ranges telemeter accepts beyond the contract's rules (README): counts
# that fit a signed 64-bit integer, decimals of at most that many
# nano-units, timestamps in the UTC years 1678 to 2261.
MAX_COUNT = 2**63 - 1
MAX_DECIMAL = Decimal(2**63 - 1) / Decimal(10**9)
FIRST_YEAR, LAST_YEAR = 1678, 2261


def has_control(value: str) -> bool:
    """Unicode Cc: U+0000..U+001F and U+007F..U+009F."""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value)


def check_text(value: str, column: str) -> str:
    """A text column (a code, a description): no control characters, so no line breaks."""
    if has_control(value):
        raise DataError(f"{column}: control character")
    return value


def check_id(value: str, column: str, empty_ok: bool = False) -> str:
    if value == "":
        if empty_ok:
            return value
        raise DataError(f"{column}: empty id")
    if len(value.encode()) > ID_MAX:
        raise DataError(f"{column}: id longer than {ID_MAX} bytes")
    if has_control(value):
        raise DataError(f"{column}: control character in id")
    return value


def parse_decimal(value: str, column: str, positive: bool = False) -> Decimal:
    if not DECIMAL_RE.match(value):
        raise DataError(f"{column}: {value!r} is not a decimal")
    d = Decimal(value)
    if d > MAX_DECIMAL:
        raise DataError(f"{column}: {value!r} is too large")
    if positive and d <= 0:
        raise DataError(f"{column}: {value!r} must be greater than 0")
    return d


def parse_count(value: str, column: str, minimum: int = 0) -> int:
    if not COUNT_RE.match(value):
        raise DataError(f"{column}: {value!r} is not a count")
    n = int(value)
    if n > MAX_COUNT:
        raise DataError(f"{column}: {value!r} is more than {MAX_COUNT}")
    if n < minimum:
        raise DataError(f"{column}: {value!r} is below {minimum}")
    return n


def parse_instant(value: str, column: str = "timestamp") -> tuple[int, int]:
    """RFC 3339 (T or space, optional fraction, optional offset = UTC) -> (epoch seconds, nanos)."""
    m = TS_RE.match(value)
    if not m:
        raise DataError(f"{column}: {value!r} is not a timestamp")
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    frac = m.group(7)
    nanos = int((frac[1:] + "000000000")[:9]) if frac else 0
    off = m.group(8)
    if off in (None, "Z", "z"):  # RFC 3339 5.6: "T" and "Z" may be lower case
        offset = 0
    else:
        oh, om = int(off[1:3]), int(off[4:6])
        if oh > 23 or om > 59:
            raise DataError(f"{column}: {value!r} has a bad offset")
        offset = (oh * 3600 + om * 60) * (1 if off[0] == "+" else -1)
    try:
        naive = dt.datetime(y, mo, d, h, mi, s, tzinfo=UTC)
    except ValueError as e:
        raise DataError(f"{column}: {value!r}: {e}") from None
    secs = int((naive - EPOCH).total_seconds()) - offset
    first = int((dt.datetime(FIRST_YEAR, 1, 1, tzinfo=UTC) - EPOCH).total_seconds())
    end = int((dt.datetime(LAST_YEAR + 1, 1, 1, tzinfo=UTC) - EPOCH).total_seconds())
    if not first <= secs < end:
        raise DataError(f"{column}: {value!r} is outside the years {FIRST_YEAR} to {LAST_YEAR} (UTC)")
    return secs, nanos


def parse_country(value: str, column: str = "country") -> str:
    if value != "" and not COUNTRY_RE.match(value):
        raise DataError(f"{column}: {value!r} is not a country")
    return value


def parse_direction(value: str) -> str:
    if value not in ("inbound", "outbound"):
        raise DataError(f"direction: {value!r}")
    return value


def fmt_decimal(d: Decimal) -> Num:
    """Exact decimal text: no exponent, trailing zeros trimmed, at least one fractional digit."""
    text = format(d, "f")
    if "." in text:
        text = text.rstrip("0")
        if text.endswith("."):
            text += "0"
    else:
        text += ".0"
    if text.startswith("-"):
        raise AssertionError("negative amount")
    return Num(text)


# ---------------------------------------------------------------- records

def parse_row(kind: str, row: dict[str, str]) -> dict:
    """The typed record of one CSV row (contract columns only)."""
    r: dict = {}
    r["record_id"] = check_id(row["record_id"], "record_id")
    r["auth_id"] = check_id(row["auth_id"], "auth_id")
    r["ts"] = parse_instant(row["timestamp"])
    if kind != "charges":
        r["subaccount_auth"] = check_id(row["subaccount_auth"], "subaccount_auth", empty_ok=True)
        r["type"] = check_id(row["type"], "type")
        r["amount"] = parse_decimal(row["amount"], "amount")
    if kind == "calls":
        if row["product"] not in ("voice", "zentrunk"):
            raise DataError(f"product: {row['product']!r}")
        r["product"] = row["product"]
        r["direction"] = parse_direction(row["direction"])
        r["country"] = parse_country(row["country"])
        r["billed_seconds"] = parse_decimal(row["billed_seconds"], "billed_seconds")
        r["surcharge"] = parse_decimal(row["surcharge"], "surcharge")
        r["hangup_cause"] = check_text(row["hangup_cause"], "hangup_cause")
    elif kind == "messages":
        r["product"] = "message"
        r["direction"] = parse_direction(row["direction"])
        r["country"] = parse_country(row["country"])
        r["segments"] = parse_count(row["segments"], "segments", 1)
        r["surcharge"] = parse_decimal(row["surcharge"], "surcharge")
        r["error_code"] = check_text(row["error_code"], "error_code")
    elif kind == "transcriptions":
        r["product"] = "transcription"
        r["duration_seconds"] = parse_decimal(row["duration_seconds"], "duration_seconds")
    else:
        if row["description"] == "":
            raise DataError("description: empty")
        r["description"] = check_text(row["description"], "description")
        r["units"] = parse_count(row["units"], "units")
        r["amount"] = parse_decimal(row["amount"], "amount", positive=True)
    if "surcharge" in r and r["surcharge"] > r["amount"]:
        raise DataError("surcharge: greater than amount")
    return r


def read_csv_text(path: Path) -> str:
    if path.name.endswith(".csv.gz"):
        with gzip.open(path, "rb") as f:
            data = f.read()
    else:
        data = path.read_bytes()
    return data.decode("utf-8-sig")


def load(data: Path) -> tuple[dict, dict[str, list[dict]]]:
    """accounts by id, and the deduplicated records of every kind."""
    accounts: dict[str, dict] = {}
    acc_path = data / "accounts.csv"
    if acc_path.exists():
        reader = csv.DictReader(io.StringIO(read_csv_text(acc_path), newline=""))
        if "auth_id" not in (reader.fieldnames or []):
            raise DataError("accounts.csv: missing auth_id")
        for row in reader:
            auth = check_id(row["auth_id"], "auth_id")
            cur = row.get("currency") or ""
            if cur == "":
                cur = "USD"
            elif not CURRENCY_RE.match(cur):
                raise DataError(f"accounts.csv: currency {cur!r}")
            tz_name = row.get("timezone") or ""
            if tz_name:
                try:
                    zone(tz_name)  # must exist
                except BadRequest:
                    raise DataError(f"accounts.csv: unknown time zone {tz_name!r}") from None
            account = {"currency": cur, "timezone": tz_name or None}
            if accounts.get(auth, account) != account:
                # spec silent; the engine refuses conflicting rows too
                raise DataError(f"accounts.csv: conflicting rows for {auth!r}")
            accounts[auth] = account
    # corrections.md: every version and void of a record, by (kind,
    # record_id) then revision: (content, place, record or None for a void).
    slots: dict[str, dict[str, dict[int, tuple]]] = {kind: {} for kind in KINDS}

    def add(kind: str, record_id: str, revision: int, content: tuple, place: str, rec) -> None:
        versions = slots[kind].setdefault(record_id, {})
        prev = versions.get(revision)
        if prev is None:
            versions[revision] = (content, place, rec)
        elif prev[0] != content:
            raise DataError(f"conflict: record_id {record_id!r} at {prev[1]} and {place}")

    for kind in KINDS + ("voids",):
        for path, line, row in rows_of(data, kind):
            if kind == "voids":
                try:
                    record_id = check_id(row["record_id"], "record_id")
                    target = row["kind"]
                    if target not in KINDS:
                        raise DataError(f"kind: {target!r}")
                    revision = parse_count(row["revision"], "revision", 1)
                    reason = check_text(row.get("reason") or "", "reason")
                except DataError as e:
                    raise DataError(f"{path}:{line}: {e}") from None
                add(target, record_id, revision, ("void", reason), f"{path}:{line}", None)
                continue
            try:
                rec = parse_row(kind, row)
                text = row.get("revision") or ""
                revision = parse_count(text, "revision") if text != "" else 0
            except DataError as e:
                raise DataError(f"{path}:{line}: {e}") from None
            add(kind, rec["record_id"], revision, ("record",) + tuple(sorted(rec.items())), f"{path}:{line}", rec)
    records: dict[str, list[dict]] = {}
    for kind in KINDS:
        # only the current version counts: the highest revision, unless a void
        records[kind] = [
            versions[max(versions)][2]
            for versions in slots[kind].values()
            if versions[max(versions)][2] is not None
        ]
    return accounts, records


def rows_of(data: Path, kind: str):
    """(path, line, row) of every CSV row of a folder, files in name order."""
    folder = data / kind
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    for path in files:
        if not (path.name.endswith(".csv") or path.name.endswith(".csv.gz")):
            continue  # .parquet, .csv.zst: not handled by the reference
        reader = csv.DictReader(io.StringIO(read_csv_text(path), newline=""))
        names = reader.fieldnames or []
        if len(set(names)) != len(names):
            raise DataError(f"{path}: a column appears twice in the header")  # spec silent; ambiguous
        missing = [c for c in COLUMNS[kind] if c not in names]
        if missing:
            raise DataError(f"{path}: missing column(s) {missing}")
        for line, row in enumerate(reader, start=2):
            if None in row or any(v is None for v in row.values()):
                raise DataError(f"{path}:{line}: wrong number of fields")
            yield path, line, row


def load_labels() -> tuple[dict[str, str], dict[str, str]]:
    def table(name: str) -> dict[str, str]:
        with open(LABELS / name, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        return {r[0]: r[1] for r in rows[1:] if len(r) >= 2}
    return table("message_error_codes.csv"), table("hangup_causes.csv")


# ---------------------------------------------------------------- time

def zone(name: str) -> ZoneInfo:
    if not name or name.startswith("/") or ".." in name or name != name.strip():
        raise BadRequest("timezone", "timezone", name)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise BadRequest("timezone", "timezone", name) from None


def local_midnight(d: dt.date, tz) -> int:
    """Epoch seconds of local 00:00 of date d in tz."""
    local = dt.datetime(d.year, d.month, d.day, tzinfo=tz)
    return int((local.astimezone(UTC) - EPOCH).total_seconds())


def add_months(d: dt.date, n: int) -> dt.date:
    m = d.month - 1 + n
    y, m = d.year + m // 12, m % 12 + 1
    return dt.date(y, m, min(d.day, calendar.monthrange(y, m)[1]))


def offset_at(secs: int, tz) -> dt.timedelta:
    return (EPOCH + dt.timedelta(seconds=secs)).astimezone(tz).utcoffset()


def first_offset_second(low: int, high: int, tz, wanted) -> int:
    """The first second in (low, high] whose offset is wanted (high's is)."""
    while high - low > 1:
        middle = (low + high) // 2
        if wanted(offset_at(middle, tz)):
            high = middle
        else:
            low = middle
    return high


def bucket(secs: int, gran: str, tz) -> tuple[int, int]:
    """[start, end) epoch seconds of the local calendar bucket containing secs."""
    utc = EPOCH + dt.timedelta(seconds=secs)
    local = utc.astimezone(tz)
    if gran == "hour":
        # The local hour under the current offset, cut where the offset
        # changes within it (Lord Howe's half-hour and Chatham's 02:45
        # changes): a bucket is the instants of one local hour.
        start = secs - (local.minute * 60 + local.second)
        end = start + 3600
        offset = local.utcoffset()
        if offset_at(start, tz) != offset:
            start = first_offset_second(start, secs, tz, lambda o: o == offset)
        if offset_at(end - 1, tz) != offset:
            end = first_offset_second(secs, end - 1, tz, lambda o: o != offset)
        return start, end
    d = local.date()
    if gran == "day":
        a, b = d, d + dt.timedelta(days=1)
    elif gran == "month":
        a = d.replace(day=1)
        b = add_months(a, 1)
    else:
        a = dt.date(d.year, 1, 1)
        b = dt.date(d.year + 1, 1, 1)
    return local_midnight(a, tz), local_midnight(b, tz)


def fmt_instant(secs: int, tz, utc_style: bool) -> str:
    utc = EPOCH + dt.timedelta(seconds=secs)
    local = utc.astimezone(tz)
    off = local.utcoffset()
    total = int(off.total_seconds())
    if utc_style or total % 60:  # an offset with seconds has no RFC 3339 form
        return utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    sign = "+" if total >= 0 else "-"
    total = abs(total)
    return local.strftime("%Y-%m-%dT%H:%M:%S") + f"{sign}{total // 3600:02d}:{total % 3600 // 60:02d}"


# ---------------------------------------------------------------- request

HONORED = ("subaccount_auth", "granularity", "from_date", "to_date", "product", "error_code", "hangup_cause",
           "direction", "country", "page_size", "page_token", "timezone")


def parse_query(query: str) -> dict:
    """Query string -> parameters (unknown keys dropped; last value wins for single keys)."""
    q = query[1:] if query.startswith("?") else query
    params: dict = {"product": []}
    for key, value in urllib.parse.parse_qsl(q, keep_blank_values=True):
        if key not in HONORED:
            continue
        if key == "product":
            params["product"].append(value)
        else:
            params[key] = value
    return params


def parse_date(value: str, param: str) -> dt.date:
    if not DATE_RE.match(value):
        raise BadRequest("date", param, value)
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise BadRequest("date", param, value) from None


def resolve(auth_id: str, query: str, now: dt.datetime, accounts: dict) -> dict:
    p = parse_query(query)
    req: dict = {"auth_id": auth_id}
    sub = p.get("subaccount_auth")
    if sub is not None and sub == "":
        raise BadRequest("subaccount_auth", "subaccount_auth", "")
    req["subaccount_auth"] = sub
    gran = p.get("granularity", "day")
    if gran not in GRANULARITIES:
        raise BadRequest("granularity", "granularity", gran)
    req["granularity"] = gran
    products: set[str] = set()
    for item in p["product"] or ["all"]:
        for name in item.split(","):
            if name == "all":
                products.update(PRODUCTS)
            elif name in PRODUCTS:
                products.add(name)
            else:
                raise BadRequest("product", "product", name)
    req["products"] = products
    for key in ("error_code", "hangup_cause"):
        req[key] = p.get(key)
    direction = p.get("direction")
    if direction is not None and direction not in ("inbound", "outbound"):
        raise BadRequest("direction", "direction", direction)
    req["direction"] = direction
    country = p.get("country")
    if country is not None and not COUNTRY_RE.match(country):
        raise BadRequest("country", "country", country)
    req["country"] = country
    size = p.get("page_size", "100")
    if not re.match(r"^[0-9]{1,6}$", size) or not 1 <= int(size) <= 1000:
        raise BadRequest("page_size", "page_size", size)
    req["page_size"] = int(size)
    tz_name = p.get("timezone")
    if tz_name is not None:
        tz = zone(tz_name)
    else:
        tz_name = (accounts.get(auth_id) or {}).get("timezone")
        tz = zone(tz_name) if tz_name else UTC
    req["timezone"] = tz_name
    req["tz"] = tz
    req["utc_style"] = tz_name is None or tz_name == "UTC"
    today = now.astimezone(tz).date()
    from_date = parse_date(p["from_date"], "from_date") if "from_date" in p else today - dt.timedelta(days=7)
    to_date = parse_date(p["to_date"], "to_date") if "to_date" in p else today
    if from_date >= to_date:
        raise BadRequest("order", "from_date", None)
    days = (to_date - from_date).days
    if gran == "hour" and days > 7:
        raise BadRequest("window_cap", "granularity", None, "granularity 'day'")
    if gran == "day" and days > 92:
        raise BadRequest("window_cap", "granularity", None, "granularity 'month'")
    if gran == "month" and to_date > add_months(from_date, 24):
        raise BadRequest("window_cap", "granularity", None, "granularity 'year'")
    req["from"], req["to"] = from_date, to_date
    req["start"], req["end"] = local_midnight(from_date, tz), local_midnight(to_date, tz)
    return req


# ---------------------------------------------------------------- summary

def summarize(accounts: dict, records: dict, labels, req: dict) -> dict:
    err_labels, hangup_labels = labels
    auth, tz, gran = req["auth_id"], req["tz"], req["granularity"]
    start, end = req["start"], req["end"]
    fmt = lambda s: fmt_instant(s, tz, req["utc_style"])  # noqa: E731

    def clipped(secs: int) -> tuple[int, int]:
        a, b = bucket(secs, gran, tz)
        return max(a, start), min(b, end)

    groups: dict[tuple, dict] = {}
    for kind in ("calls", "messages", "transcriptions"):
        for r in records[kind]:
            if r["auth_id"] != auth or not start <= r["ts"][0] < end:
                continue
            product = r["product"]
            if product not in req["products"]:
                continue
            if req["subaccount_auth"] is not None and r["subaccount_auth"] != req["subaccount_auth"]:
                continue
            has_geo = product != "transcription"
            if has_geo:
                if req["country"] is not None and r["country"] != req["country"]:
                    continue
                if req["direction"] is not None and r["direction"] != req["direction"]:
                    continue
            if product == "message" and req["error_code"] is not None and r["error_code"] != req["error_code"]:
                continue
            if product in ("voice", "zentrunk") and req["hangup_cause"] is not None \
                    and r["hangup_cause"] != req["hangup_cause"]:
                continue
            b = clipped(r["ts"][0])
            key = (b, product, r["type"], r["subaccount_auth"] or None,
                   (r["country"] or None) if has_geo else None,
                   r["direction"] if has_geo else None,
                   r["error_code"] if product == "message" else None,
                   r["hangup_cause"] if product in ("voice", "zentrunk") else None)
            g = groups.setdefault(key, {"units": 0, "duration": Decimal(0), "amount": Decimal(0),
                                        "surcharge": Decimal(0)})
            g["amount"] += r["amount"]
            if product == "message":
                g["units"] += r["segments"]
                g["surcharge"] += r["surcharge"]
            else:
                g["units"] += 1
                if product == "transcription":
                    g["duration"] += r["duration_seconds"]
                else:
                    g["duration"] += r["billed_seconds"]
                    g["surcharge"] += r["surcharge"]

    def sort_key(key):
        # absent sorts first; strings byte-wise; from_date by instant (see notes)
        (a, _b), *dims = key
        return (a,) + tuple((0, b"") if v is None else (1, v.encode()) for v in dims)

    usage = []
    total_usage = Decimal(0)
    per_sub: dict[str, Decimal] = {}
    for key in sorted(groups, key=sort_key):
        (a, b), product, typ, sub, country, direction, error_code, hangup = key
        g = groups[key]
        row = [("from_date", fmt(a)), ("to_date", fmt(b)), ("product", product), ("type", typ)]
        if sub is not None:
            row.append(("subaccount_auth", sub))
        if country is not None:
            row.append(("country", country))
        if direction is not None:
            row.append(("direction", direction))
        row.append(("total_units", Num(str(g["units"]))))
        if product != "message":
            row.append(("duration_seconds", fmt_decimal(g["duration"])))
        row.append(("total_amount", fmt_decimal(g["amount"])))
        if product != "transcription":
            row.append(("surcharge", fmt_decimal(g["surcharge"])))
        if error_code is not None:
            row.append(("error_code", error_code))
        if hangup is not None:
            row.append(("hangup_cause", hangup))
        if error_code:
            row.append(("error_reason", err_labels.get(error_code, "Unknown")))
        elif hangup:
            row.append(("error_reason", hangup_labels.get(hangup, "Unknown")))
        usage.append(row)
        total_usage += g["amount"]
        if sub is not None:
            per_sub[sub] = per_sub.get(sub, Decimal(0)) + g["amount"]

    other = None
    total = total_usage
    if req["subaccount_auth"] is None and "other" in req["products"]:
        charges: dict[tuple, list] = {}
        for r in records["charges"]:
            if r["auth_id"] != auth or not start <= r["ts"][0] < end:
                continue
            c = charges.setdefault((clipped(r["ts"][0]), r["description"]), [0, Decimal(0)])
            c[0] += r["units"]
            c[1] += r["amount"]
        other = []
        for (b, desc) in sorted(charges, key=lambda k: (k[0][0], k[1].encode())):
            units, amount = charges[(b, desc)]
            other.append([("from_date", fmt(b[0])), ("to_date", fmt(b[1])), ("description", desc),
                          ("total_units", Num(str(units))), ("total_amount", fmt_decimal(amount))])
            total += amount

    account = accounts.get(auth) or {}
    meta = [("auth_id", auth)]
    if req["subaccount_auth"] is not None:
        meta.append(("subaccount_auth", req["subaccount_auth"]))
    meta += [("granularity", gran), ("from_date", fmt(start)), ("to_date", fmt(end)),
             ("currency", account.get("currency", "USD")), ("page_size", Num(str(req["page_size"]))),
             ("total_spend", fmt_decimal(total))]
    if req["subaccount_auth"] is not None:
        meta.append(("total_subaccount_spend", fmt_decimal(total_usage)))
    else:
        meta.append(("subaccount_spend", Obj(sorted((k, fmt_decimal(v)) for k, v in per_sub.items()))))
    result = {"status": 200, "meta": meta, "timezone": req["timezone"], "usage": usage}
    if other is not None:
        result["other_charges"] = other
    return result


def expected(data_state, auth_id: str, query: str, now_text: str) -> dict:
    accounts, records, labels = data_state
    now = dt.datetime.fromisoformat(now_text.replace("Z", "+00:00"))
    try:
        req = resolve(auth_id, query, now, accounts)
    except BadRequest as bad:
        return {"status": 400, "class": bad.klass, "param": bad.param, "value": bad.value, "hint": bad.hint}
    return summarize(accounts, records, labels, req)


# ---------------------------------------------------------------- JSON with exact numbers

def render(v, indent: int = 0) -> str:
    """Pretty JSON of pairs-lists (objects), lists and Num, one value per line."""
    pad = "  " * indent
    if isinstance(v, Num):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Obj):
        if not v:
            return "{}"
        inner = ",\n".join(f"{pad}  {json.dumps(k, ensure_ascii=False)}: {render(x, indent + 1)}" for k, x in v)
        return "{\n" + inner + "\n" + pad + "}"
    if isinstance(v, list):
        if not v:
            return "[]"
        inner = ",\n".join(f"{pad}  {render(x, indent + 1)}" for x in v)
        return "[\n" + inner + "\n" + pad + "]"
    raise TypeError(type(v))


class Obj(list):
    """A JSON object as an ordered list of (key, value) pairs."""


def parse_exact(text: str):
    return json.loads(text, object_pairs_hook=Obj, parse_float=Num, parse_int=Num)


def get(obj: Obj, key: str, default=None):
    for k, v in obj:
        if k == key:
            return v
    return default


def expected_view(exp: dict) -> dict:
    """The comparable parts of the reference result."""
    meta = Obj(exp["meta"])
    view = {"meta": meta, "timezone": exp["timezone"], "usage": [Obj(r) for r in exp["usage"]]}
    view["other_charges"] = [Obj(r) for r in exp["other_charges"]] if "other_charges" in exp else None
    return view


def actual_view(stdout: str, page_size: int | None, problems: list[str]) -> dict:
    """The same parts of `summary --all-pages` output, plus structural checks into problems."""
    pages = [parse_exact(line) for line in stdout.splitlines() if line.strip()]
    if not pages:
        problems.append("no output")
        return {}
    usage: list = []
    for i, page in enumerate(pages):
        keys = [k for k, _ in page]
        want = ["api_id", "meta", "usage"] + (["other_charges"] if i == 0 and "other_charges" in keys else [])
        if keys != want:
            problems.append(f"page {i + 1}: top-level keys {keys}, expected {want}")
        meta = get(page, "meta") or Obj()
        rows = get(page, "usage") or []
        usage.extend(rows)
        last = i == len(pages) - 1
        has_token = get(meta, "next_page_token") is not None
        if has_token == last:
            problems.append(f"page {i + 1} of {len(pages)}: next_page_token present={has_token}")
        if page_size is not None and (len(rows) > page_size or (not last and len(rows) != page_size)):
            problems.append(f"page {i + 1}: {len(rows)} rows with page_size {page_size}")
        if i > 0:
            for k in ("total_spend", "total_subaccount_spend", "subaccount_spend"):
                if get(meta, k) is not None:
                    problems.append(f"page {i + 1}: meta.{k} present (page 1 only)")
    if len(pages) > 1 and not get(pages[-1], "usage"):
        problems.append("last page is empty although earlier pages exist")
    meta1 = get(pages[0], "meta") or Obj()
    tz = get(meta1, "timezone")
    meta = Obj((k, Obj(sorted(v)) if k == "subaccount_spend" else v) for k, v in meta1
               if k not in ("next_page_token", "timezone"))
    other = get(pages[0], "other_charges")
    return {"meta": meta, "timezone": tz, "usage": usage, "other_charges": other}


def compare_case(exp: dict, act: dict) -> tuple[bool, str]:
    """(ok, report) for one case."""
    code, stdout, stderr = act["exit"], act["stdout"], act["stderr"]
    if exp["status"] == 400:
        if code != 2:
            return False, f"expected 400 ({exp['class']}: {exp['param']}={exp['value']!r}); " \
                          f"binary exit {code}\nstdout: {stdout[:2000]}\nstderr: {stderr[:2000]}"
        try:
            body = parse_exact(stdout)
            msg = get(body, "error")
            keys = [k for k, _ in body]
        except ValueError:
            return False, f"400 body is not JSON: {stdout!r}"
        notes = []
        if keys != ["api_id", "error"]:
            notes.append(f"error body keys {keys}")
        if not isinstance(msg, str):
            notes.append("no error message")
        else:
            if exp["param"] not in msg:
                notes.append(f"message does not name the parameter {exp['param']!r}")
            if exp["value"] and exp["value"] not in msg:
                notes.append(f"message does not quote the value {exp['value']!r}")
            if exp["hint"] and exp["hint"] not in msg:
                notes.append(f"message does not contain {exp['hint']!r}")
        if notes:
            return False, f"400 ({exp['class']}) message problems: {notes}; message: {msg!r}"
        return True, ""
    if code != 0:
        return False, f"expected 200; binary exit {code}\nstderr: {stderr[:3000]}"
    problems: list[str] = []
    page_size = int(get(Obj(exp["meta"]), "page_size"))
    try:
        a = actual_view(stdout, page_size, problems)
    except ValueError as e:
        return False, f"output is not JSON lines: {e}"
    e = expected_view(exp)
    out = []
    if problems:
        out.append("structure: " + "; ".join(problems))
    for part in ("meta", "timezone", "usage", "other_charges"):
        want, got = render(e[part]) if e[part] is not None else "(absent)", \
            render(a.get(part)) if a.get(part) is not None else "(absent)"
        if want != got:
            diff = difflib.unified_diff(want.splitlines(), got.splitlines(), f"reference {part}",
                                        f"telemeter {part}", lineterm="", n=4)
            lines = list(diff)
            if len(lines) > 200:
                lines = lines[:200] + [f"... ({len(lines) - 200} more diff lines)"]
            out.append("\n".join(lines))
    return not out, "\n".join(out)


# ---------------------------------------------------------------- main

def load_state(data: Path):
    accounts, records = load(data)
    return accounts, records, load_labels()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary")
    s.add_argument("--data", required=True, type=Path)
    s.add_argument("--auth-id", required=True)
    s.add_argument("--query", default="")
    s.add_argument("--now", default=dt.datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    c = sub.add_parser("compare")
    c.add_argument("--data", required=True, type=Path)
    c.add_argument("--cases", required=True, type=Path)
    c.add_argument("--actual", required=True, type=Path)
    c.add_argument("--label", default="")
    args = ap.parse_args(argv)
    try:
        state = load_state(args.data)
    except DataError as e:
        print(f"reference: bad data: {e}", file=sys.stderr)
        return 1
    if args.cmd == "summary":
        exp = expected(state, args.auth_id, args.query, args.now)
        if exp["status"] == 400:
            print(json.dumps(exp))
            return 2
        meta = Obj(exp["meta"]) + ([("timezone", exp["timezone"])] if exp["timezone"] is not None else [])
        out = Obj([("meta", Obj(meta)),
                   ("usage", [Obj(r) for r in exp["usage"]])])
        if "other_charges" in exp:
            out.append(("other_charges", [Obj(r) for r in exp["other_charges"]]))
        print(render(out))
        return 0
    cases = [json.loads(line) for line in args.cases.read_text().splitlines() if line.strip()]
    actual = [json.loads(line) for line in args.actual.read_text().splitlines() if line.strip()]
    if len(cases) != len(actual):
        print(f"{len(cases)} cases but {len(actual)} actual results", file=sys.stderr)
        return 1
    failures = 0
    stats = {"ok_200": 0, "ok_400": 0, "rows": 0, "charges": 0}
    for i, (case, act) in enumerate(zip(cases, actual)):
        exp = expected(state, case["auth_id"], case["query"], case["now"])
        if exp["status"] == 200:
            stats["ok_200"] += 1
            stats["rows"] += len(exp["usage"])
            stats["charges"] += len(exp.get("other_charges") or [])
        else:
            stats["ok_400"] += 1
        ok, report = compare_case(exp, act)
        if not ok:
            failures += 1
            print(f"=== MISMATCH {args.label} case {i}: --auth-id {case['auth_id']} "
                  f"--query '{case['query']}' --now {case['now']}")
            print(report)
    print(f"{args.label}: {len(cases) - failures}/{len(cases)} cases agree "
          f"({stats['ok_200']} expected 200 with {stats['rows']} usage rows and {stats['charges']} "
          f"other_charges items, {stats['ok_400']} expected 400)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
