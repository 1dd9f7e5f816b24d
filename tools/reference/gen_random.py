#!/usr/bin/env python3
"""Random small data sets (records.md) and Usage Summary requests, for the
differential test (tests/it/differential.rs).

  gen_random.py --seed N --out DATA_DIR [--queries FILE] [--count K]

Everything is derived from the seed, so a failing seed reproduces exactly.
The data is valid by construction (the test is about the summary, not about
rejecting bad rows) but exercises the awkward parts of the contract: accounts
with and without currency / time zone, subaccounts whose ids sort in
interesting byte orders, every product, empty countries, known and unknown
error codes and hangup causes, identical re-deliveries in other files and in
other textual forms (`0.5` vs `0.50`, `Z` vs `+00:00` vs `+05:30`), CSV
quoting, shuffled and extra columns, gzip, nested folders, timestamps
clustered on DST transitions, local midnights and month ends, and amounts
with up to 9 fractional digits.

Standard library only.
"""

from __future__ import annotations

import argparse
import calendar
import csv
import datetime as dt
import gzip
import io
import json
import random
import urllib.parse
from decimal import ROUND_DOWN, Decimal
from pathlib import Path

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)

ZONES = ["UTC", "America/New_York", "Europe/London", "Asia/Kolkata", "Asia/Kathmandu", "Australia/Lord_Howe",
         "Pacific/Chatham"]
CURRENCIES = ["USD", "EUR", "INR", "GBP", ""]
COUNTRIES = ["", "US", "GB", "IN", "NP", "DE"]
HANGUP = ["", "4000", "3010", "0", "5020", "9999", "NORMAL_CLEARING", "40"]
ERRORS = ["", "30", "1000", "450", "31", "X1"]
DESCRIPTIONS = ["Number Charges", "CNAM Lookup", "Other Charges", 'Porting, "express"', "Zz último cargo", "Number charges",
                'Two-part, "quoted" charge']
OFFSETS = ["Z", "+00:00", "", "+05:30", "-08:00", "+05:45", "-05:00", "+01:00", "-03:30"]


def ts(text: str) -> int:
    return int((dt.datetime.fromisoformat(text) - EPOCH).total_seconds())


# Instants the buckets of the zones turn on (UTC): DST changes, local
# midnights around month ends, year ends.
ANCHORS = [ts(t) for t in [
    "2026-03-08T07:00:00+00:00",  # New York spring forward (02:00 EST)
    "2026-03-29T01:00:00+00:00",  # London spring forward
    "2026-11-01T06:00:00+00:00",  # New York fall back (02:00 EDT)
    "2026-10-25T01:00:00+00:00",  # London fall back
    "2026-10-03T15:30:00+00:00",  # Lord Howe forward half an hour (02:00 -> 02:30)
    "2026-04-04T15:00:00+00:00",  # Lord Howe back half an hour (02:00 -> 01:30)
    "2026-04-04T14:00:00+00:00",  # Chatham back (03:45 -> 02:45)
    "2026-09-26T14:00:00+00:00",  # Chatham forward (02:45 -> 03:45)
    "2026-03-01T00:00:00+00:00", "2026-03-01T05:00:00+00:00", "2026-02-28T18:30:00+00:00",
    "2026-03-31T18:15:00+00:00", "2026-04-01T00:00:00+00:00", "2026-11-01T04:00:00+00:00",
    "2026-10-31T23:00:00+00:00", "2026-12-01T05:00:00+00:00", "2026-12-31T18:30:00+00:00",
    "2027-01-01T00:00:00+00:00", "2026-01-01T05:00:00+00:00", "2026-06-30T23:00:00+00:00",
]]


def rand_instant(r: random.Random) -> tuple[int, int]:
    base = r.choice(ANCHORS)
    mode = r.random()
    if mode < 0.15:
        delta = r.choice([0, -1, 1, 3600, -3600, 1800, -900, 2700])
    elif mode < 0.6:
        delta = r.randint(-3 * 3600, 3 * 3600)
    elif mode < 0.9:
        delta = r.randint(-3 * 86400, 3 * 86400)
    else:
        delta = r.randint(-40 * 86400, 40 * 86400)
    nanos = 0 if r.random() < 0.7 else r.choice([r.randint(0, 999) * 1_000_000, r.randint(0, 999_999_999)])
    return base + delta, nanos


def render_instant(r: random.Random, secs: int, nanos: int) -> str:
    off = r.choice(OFFSETS)
    if off in ("Z", "+00:00", ""):
        minutes = 0
    else:
        minutes = (int(off[1:3]) * 60 + int(off[4:6])) * (1 if off[0] == "+" else -1)
    local = EPOCH + dt.timedelta(seconds=secs + minutes * 60)
    text = local.strftime("%Y-%m-%d") + r.choice("TT ") + local.strftime("%H:%M:%S")
    if nanos or r.random() < 0.1:
        frac = f"{nanos:09d}"
        keep = max(len(frac.rstrip("0")), r.choice([1, 3, 6, 9]))
        text += "." + frac[:keep]
    return text + off


def rand_decimal(r: random.Random, whole: int = 20) -> Decimal:
    digits = r.choice([0, 1, 2, 4, 6, 9, 9])
    if r.random() < 0.15:
        return Decimal(r.choice([0, 1, 2])) + Decimal(r.choice(["0", "0.5", "0.25"]))
    return Decimal(r.randint(0, whole * 10 ** digits)) / Decimal(10 ** digits)


def part(amount: Decimal, factor) -> Decimal:
    """amount * factor, cut to 9 fractional digits (so never above amount)."""
    return (amount * Decimal(factor)).quantize(Decimal("0.000000001"), rounding=ROUND_DOWN)


def render_decimal(r: random.Random, d: Decimal) -> str:
    text = format(d.normalize(), "f") if d != 0 else "0"
    if "." in text:
        frac_len = len(text.split(".")[1])
    else:
        frac_len = 0
    pad = r.randint(0, 9 - frac_len) if r.random() < 0.4 else 0
    if pad:
        text += ("." if frac_len == 0 else "") + "0" * pad
    return text


def add_months(d: dt.date, n: int) -> dt.date:
    m = d.month - 1 + n
    y, m = d.year + m // 12, m % 12 + 1
    return dt.date(y, m, min(d.day, calendar.monthrange(y, m)[1]))


class Gen:
    def __init__(self, seed: int, scale: int = 1):
        self.scale = scale
        self.r = random.Random(seed)
        self.seed = seed
        self.n = 0
        self.shared: dict[str, int] = {}

    def rid(self, prefix: str) -> str:
        self.n += 1
        r = self.r
        if r.random() < 0.05:
            # the same record_id in another kind is no duplicate
            self.shared[prefix] = self.shared.get(prefix, 0) + 1
            return f"shared-{self.seed}-{self.shared[prefix]}"
        tail = r.choice(["", "", "", ",x", '"q"', "-é", " sp"])
        return f"{prefix}{self.seed}-{self.n:05d}{tail}"

    def accounts(self):
        r = self.r
        accs = []
        for i in range(r.randint(2, 4)):
            auth = f"MA{self.seed % 1000:03d}{chr(65 + i)}{r.choice(['', 'x', 'Z9'])}"
            subs = r.sample(["SAb", "SA_B", "SAa", "SAé", "SA0", "SAZZ", "SA x", "SA+y"], r.randint(0, 3))
            accs.append({"auth_id": auth, "currency": r.choice(CURRENCIES), "timezone": r.choice([""] + ZONES),
                         "subs": subs, "row": True})
        accs.append({"auth_id": f"MA{self.seed % 1000:03d}N", "currency": "", "timezone": "",
                     "subs": ["SAn"], "row": False})
        return accs

    def records(self, accs):
        r = self.r
        out = {"calls": [], "messages": [], "transcriptions": [], "charges": []}
        for a in accs:
            for _ in range(r.randint(10, 70) * self.scale):
                secs, nanos = rand_instant(r)
                sub = r.choice([""] + a["subs"]) if a["subs"] and r.random() < 0.6 else ""
                amount = rand_decimal(r)
                product = r.choice(["voice", "voice", "zentrunk"])
                out["calls"].append({
                    "record_id": self.rid("c"), "auth_id": a["auth_id"], "subaccount_auth": sub,
                    "ts": (secs, nanos), "product": product,
                    "type": r.choice(["pstn", "app", "PSTN"] if product == "voice" else ["sip", "pstn"]),
                    "direction": r.choice(["inbound", "outbound"]), "country": r.choice(COUNTRIES),
                    "billed_seconds": rand_decimal(r, 600), "amount": amount,
                    "surcharge": part(amount, r.choice([0, 0, 1, "0.5", "0.125"])),
                    "hangup_cause": r.choice(HANGUP)})
            for _ in range(r.randint(10, 70) * self.scale):
                secs, nanos = rand_instant(r)
                sub = r.choice([""] + a["subs"]) if a["subs"] and r.random() < 0.6 else ""
                amount = rand_decimal(r, 2)
                out["messages"].append({
                    "record_id": self.rid("m"), "auth_id": a["auth_id"], "subaccount_auth": sub,
                    "ts": (secs, nanos), "type": r.choice(["sms", "sms", "mms"]),
                    "direction": r.choice(["inbound", "outbound"]), "country": r.choice(COUNTRIES),
                    "segments": r.randint(1, 5), "amount": amount,
                    "surcharge": part(amount, r.choice([0, 0, 1, "0.5", "0.25"])),
                    "error_code": r.choice(ERRORS)})
            for _ in range(r.randint(0, 25)):
                secs, nanos = rand_instant(r)
                sub = r.choice([""] + a["subs"]) if a["subs"] and r.random() < 0.6 else ""
                out["transcriptions"].append({
                    "record_id": self.rid("t"), "auth_id": a["auth_id"], "subaccount_auth": sub,
                    "ts": (secs, nanos), "type": r.choice(["standard", "enhanced"]),
                    "duration_seconds": rand_decimal(r, 900), "amount": rand_decimal(r, 5)})
            for _ in range(r.randint(0, 20)):
                secs, nanos = rand_instant(r)
                amount = rand_decimal(r, 30)
                if amount == 0:
                    amount = Decimal("0.000000001")
                out["charges"].append({
                    "record_id": self.rid("x"), "auth_id": a["auth_id"], "ts": (secs, nanos),
                    "description": r.choice(DESCRIPTIONS), "units": r.randint(0, 9), "amount": amount})
        return out

    def render_row(self, kind: str, rec: dict) -> dict[str, str]:
        r = self.r
        row = {}
        for k, v in rec.items():
            if k == "ts":
                row["timestamp"] = render_instant(r, *v)
            elif isinstance(v, Decimal):
                row[k] = render_decimal(r, v)
            else:
                row[k] = str(v)
        return row

    def write(self, out: Path, accs, recs):
        r = self.r
        out.mkdir(parents=True, exist_ok=True)
        if r.random() < 0.08:
            accs[:] = [dict(a, row=False, currency="", timezone="") for a in accs]  # no accounts.csv at all
        if any(a["row"] for a in accs):
            self.write_accounts(out, accs)
        voids = self.corrections(recs)
        if voids:
            folder = out / "voids"
            folder.mkdir(exist_ok=True)
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(["reason", "revision", "kind", "record_id"])
            w.writerows(voids)
            (folder / "voids.csv").write_bytes(buf.getvalue().encode())
        for kind, rows in recs.items():
            if not rows and r.random() < 0.5:
                continue
            folder = out / kind
            folder.mkdir(exist_ok=True)
            r.shuffle(rows)
            nfiles = 1 if self.scale > 1 else r.randint(1, 3)  # large files: split in chunks by the engine
            chunks = [rows[i::nfiles] for i in range(nfiles)]
            # re-deliveries: some rows again in another file, in other textual forms
            dups = [x for x in rows if r.random() < 0.12]
            if dups:
                chunks.append(dups)
            for i, chunk in enumerate(chunks):
                name = [f"part{i}", f"2026/{i:02d}/day", f"x/y/part{i}"][r.randint(0, 2)]
                gz = r.random() < 0.35 and (self.scale == 1 or i > 0)  # large files: the first chunk plain
                path = folder / (name + (".csv.gz" if gz else ".csv"))
                path.parent.mkdir(parents=True, exist_ok=True)
                text = self.csv_text(kind, chunk)
                if gz:
                    with gzip.open(path, "wb") as f:
                        f.write(text.encode())
                else:
                    path.write_bytes(text.encode())
                if r.random() < 0.1:  # the same file delivered twice
                    (path.parent / ("again-" + path.name)).write_bytes(path.read_bytes())

    def corrections(self, recs) -> list[list[str]]:
        """corrections.md, in half of the data sets: some records re-sent with
        higher revisions (another amount, some on another day), some
        withdrawn by a void of a revision above their highest, some voids
        superseded by a later version. Adds the versions to `recs` (every
        row of a kind then has a `revision`, empty or 0 for the first) and
        returns the void rows (reason, revision, kind, record_id)."""
        r = self.r
        if r.random() < 0.5:
            return []
        voids = []
        for kind, rows in recs.items():
            revised = []
            for rec in rows:
                rec["revision"] = r.choice(["", "0"])
                roll = r.random()
                if roll < 0.1:
                    revision = r.randint(1, 3)
                    amount = rand_decimal(r, 20) or Decimal("0.000000001")
                    newer = dict(rec, revision=str(revision), amount=amount)
                    if "surcharge" in newer:
                        newer["surcharge"] = Decimal(0)
                    if r.random() < 0.3:
                        newer["ts"] = rand_instant(r)
                    revised.append(newer)
                    if revision > 1 and r.random() < 0.3:  # a void the new version supersedes
                        voids.append(["re-rated", str(revision - 1), kind, rec["record_id"]])
                elif roll < 0.15:
                    voids.append([r.choice(["", "not billable"]), str(r.randint(1, 2)), kind, rec["record_id"]])
            rows.extend(revised)
        return voids

    def write_accounts(self, out: Path, accs):
        r = self.r
        with open(out / "accounts.csv", "w", newline="", encoding="utf-8") as f:
            cols = ["auth_id", "currency", "timezone"]
            if r.random() < 0.5:
                cols = ["timezone", "auth_id", "currency", "allowed_ips"]
            w = csv.writer(f, lineterminator=r.choice(["\n", "\r\n"]))
            w.writerow(cols)
            for a in accs:
                if a["row"]:
                    w.writerow([a.get(c, "") for c in cols])

    def extra_value(self) -> str:
        """A value for an ignored extra column; sometimes quoted (no field holds a line break)."""
        r = self.r
        return str(r.randint(0, 99)) if r.random() < 0.7 else f'batch {r.randint(0, 99)}, "re-sent"'

    def csv_text(self, kind: str, chunk) -> str:
        r = self.r
        rows = [self.render_row(kind, rec) for rec in chunk]
        cols = list(rows[0].keys()) if rows else ["record_id", "auth_id", "timestamp"]
        if not rows:
            from usage_summary import COLUMNS  # noqa: PLC0415
            cols = list(COLUMNS[kind])
        r.shuffle(cols)
        extra = r.random() < 0.3 or self.scale > 1
        if extra:
            cols.insert(r.randint(0, len(cols)), "export_batch")
        buf = io.StringIO()
        w = csv.writer(buf, quoting=r.choice([csv.QUOTE_MINIMAL, csv.QUOTE_MINIMAL, csv.QUOTE_ALL]),
                       lineterminator=r.choice(["\n", "\r\n"]))
        w.writerow(cols)
        for row in rows:
            w.writerow([row.get(c, self.extra_value()) for c in cols])
        return buf.getvalue()

    def edge_window(self, account, pairs, gran: str):
        """Dates (and a time zone in pairs) for a window on a DST change, a
        local month end or a window cap; "defaults" for a dateless request."""
        r = self.r
        kind = r.choice(["dst", "dst", "offset", "cap", "defaults"])
        if kind == "dst":
            zone, day = r.choice([("America/New_York", dt.date(2026, 3, 8)), ("America/New_York", dt.date(2026, 11, 1)),
                                  ("Europe/London", dt.date(2026, 3, 29)), ("Europe/London", dt.date(2026, 10, 25)),
                                  ("Australia/Lord_Howe", dt.date(2026, 10, 4)),
                                  ("Australia/Lord_Howe", dt.date(2026, 4, 5)),
                                  ("Pacific/Chatham", dt.date(2026, 4, 5)), ("Pacific/Chatham", dt.date(2026, 9, 27))])
        elif kind == "offset":
            zone, day = r.choice(["Asia/Kolkata", "Asia/Kathmandu"]), r.choice([
                dt.date(2026, 3, 1), dt.date(2026, 4, 1), dt.date(2027, 1, 1), dt.date(2026, 11, 1)])
        else:
            zone, day = r.choice(ZONES), None
        if zone != account.get("timezone") or r.random() < 0.5:
            pairs.append(("timezone", zone))
        if kind == "defaults":
            return "defaults"
        if day is not None:
            if gran == "hour":
                return day - dt.timedelta(days=r.randint(0, 1)), day + dt.timedelta(days=r.randint(1, 2))
            if gran == "day":
                return day - dt.timedelta(days=r.randint(0, 3)), day + dt.timedelta(days=r.randint(1, 3))
            if gran == "month":
                return day - dt.timedelta(days=r.randint(0, 20)), day + dt.timedelta(days=r.randint(1, 40))
            return day - dt.timedelta(days=r.randint(0, 400)), day + dt.timedelta(days=r.randint(1, 400))
        # window caps: the exact cap and one day more, across DST changes and short months
        frm = r.choice([dt.date(2026, 3, 5), dt.date(2026, 10, 28), dt.date(2026, 1, 31), dt.date(2024, 2, 29),
                        dt.date(2025, 12, 31), dt.date(2026, 3, 30), dt.date(2026, 8, 31)])
        extra = dt.timedelta(days=r.choice([0, 0, 1, -1]))
        if gran == "hour":
            return frm, frm + dt.timedelta(days=7) + extra
        if gran == "day":
            return frm, frm + dt.timedelta(days=92) + extra
        if gran == "month":
            return frm, add_months(frm, 24) + extra
        return frm, add_months(frm, r.choice([24, 36, 120])) + extra

    def queries(self, accs, count: int):
        r = self.r
        out = []
        for _ in range(count):
            a = r.choice(accs + [{"auth_id": "MAnobody", "subs": [], "timezone": ""}])
            pairs: list[tuple[str, str]] = []
            gran = r.choice(["hour", "day", "day", "month", "year", None])
            if gran:
                pairs.append(("granularity", gran))
            g = gran or "day"
            anchor = EPOCH + dt.timedelta(seconds=r.choice(ANCHORS) + r.randint(-40 * 3600, 40 * 3600))
            now = anchor + dt.timedelta(days=r.randint(0, 6), seconds=r.randint(0, 86399))
            edge_dates = self.edge_window(a, pairs, g) if r.random() < 0.3 else None
            if edge_dates == "defaults":
                # no dates: the defaults, with "now" close to a UTC or local midnight
                now = EPOCH + dt.timedelta(seconds=r.choice(ANCHORS) + r.choice([-1, 0, 1, 3600, -3600, 7200]))
            elif edge_dates:
                frm, to = edge_dates
                pairs.append(("from_date", frm.isoformat()))
                pairs.append(("to_date", to.isoformat()))
            elif r.random() < 0.85:
                day = anchor.date() - dt.timedelta(days=r.randint(0, 2))
                edge = r.random()
                if g == "hour":
                    n = 8 if edge < 0.05 else 7 if edge < 0.15 else r.randint(1, 4)
                    frm, to = day, day + dt.timedelta(days=n)
                elif g == "day":
                    n = 93 if edge < 0.05 else 92 if edge < 0.15 else r.randint(1, 45)
                    frm = day - dt.timedelta(days=r.randint(0, n // 2 + 1))
                    to = frm + dt.timedelta(days=n)
                elif g == "month":
                    frm = day - dt.timedelta(days=r.randint(0, 70))
                    if edge < 0.05:
                        to = add_months(frm, 24) + dt.timedelta(days=1)
                    elif edge < 0.15:
                        to = add_months(frm, 24)
                    else:
                        to = add_months(frm, r.randint(0, 4)) + dt.timedelta(days=r.randint(1, 20))
                else:
                    frm = day - dt.timedelta(days=r.randint(0, 500))
                    to = day + dt.timedelta(days=r.randint(1, 500))
                if edge > 0.97:
                    frm, to = to, frm  # from after to: 400
                one_sided = r.random()
                if one_sided > 0.05:  # else: to_date only, from_date defaults to today - 7 days
                    pairs.append(("from_date", frm.isoformat()))
                if one_sided < 0.95 or one_sided > 0.97:  # else: from_date only, to_date defaults to today
                    pairs.append(("to_date", to.isoformat()))
            p = r.random()
            if edge_dates:
                pass  # edge queries keep their products and time zone simple
            elif p < 0.2:
                pairs.append(("product", "all"))
            elif p < 0.6:
                names = r.sample(["message", "voice", "zentrunk", "transcription", "other"], r.randint(1, 4))
                if r.random() < 0.5:
                    pairs.append(("product", ",".join(names)))
                else:
                    pairs += [("product", n) for n in names]
            if r.random() < 0.15:
                pairs.append(("country", r.choice(["US", "GB", "IN", "FR"])))
            if r.random() < 0.15:
                pairs.append(("direction", r.choice(["inbound", "outbound"])))
            if r.random() < 0.12:
                pairs.append(("error_code", r.choice(ERRORS)))  # "" = delivered only
            if r.random() < 0.12:
                pairs.append(("hangup_cause", r.choice(HANGUP)))
            if r.random() < 0.2 and a["subs"]:
                pairs.append(("subaccount_auth", r.choice(a["subs"] + ["SAnone"])))
            if not edge_dates and r.random() < 0.4:
                pairs.append(("timezone", r.choice(ZONES)))
            ps = r.random()
            if ps < 0.5:
                pairs.append(("page_size", str(r.randint(1, 7))))
            elif ps < 0.6:
                pairs.append(("page_size", "1000"))
            if r.random() < 0.1:
                pairs.append(("auth_id", "MAother"))
            if r.random() < 0.1:
                pairs.append(("unknown_key", "whatever"))
            if r.random() < 0.06:  # one malformed parameter
                pairs.append(r.choice([("granularity", "week"), ("direction", "up"), ("country", "usa"),
                                       ("country", "us"), ("page_size", "0"), ("page_size", "1001"),
                                       ("from_date", "2026-13-01"), ("to_date", "2026-02-30"), ("from_date", "2026-3-01"), ("product", "fax"),
                                       ("timezone", "Mars/Olympus"), ("subaccount_auth", "")]))
                # the malformed pair must be the only value of its key
                key = pairs[-1][0]
                pairs = [x for x in pairs[:-1] if x[0] != key] + [pairs[-1]]
            r.shuffle(pairs)
            if r.random() < 0.5:
                query = urllib.parse.urlencode(pairs)
            else:
                query = "&".join(f"{k}={urllib.parse.quote(v, safe='/,')}" for k, v in pairs)
            if r.random() < 0.05:
                query = "?" + query
            if r.random() < 0.05:
                query = query.replace("product=", "pro%64uct=")
            out.append({"auth_id": a["auth_id"], "query": query, "now": now.strftime("%Y-%m-%dT%H:%M:%SZ")})
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--queries", type=Path)
    ap.add_argument("--count", type=int, default=25)
    ap.add_argument("--scale", type=int, default=1, help="multiply the number of calls and messages")
    args = ap.parse_args()
    g = Gen(args.seed, args.scale)
    accs = g.accounts()
    recs = g.records(accs)
    g.write(args.out, accs, recs)
    if args.queries:
        with open(args.queries, "w", encoding="utf-8") as f:
            for q in g.queries(accs, args.count):
                f.write(json.dumps(q) + "\n")


if __name__ == "__main__":
    main()
