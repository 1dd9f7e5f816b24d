"""Two deliveries for the corrections benchmark (bench/corrections.sh),
made from a generated data folder (bench/run.sh's, plain CSV):

  OUT/fix/    1 % of every kind's records at revision 1 (every 100th
              row, spread over all accounts and months), amount raised by
              a digit, and 0.1 % of them withdrawn (voids/, every 1000th
              row from the 50th);
  OUT/new/    as many new records (the same rows as fix/ and the voided
              ones, with new record ids): an ordinary delivery of the
              same size.

Usage: python3 bench/corrections.py DATA OUT
"""

import csv
import os
import sys

KINDS = ["calls", "messages", "transcriptions", "charges"]


def main():
    data, out = sys.argv[1], sys.argv[2]
    for sub in ["fix", "new"]:
        for kind in KINDS + ["voids"]:
            os.makedirs(os.path.join(out, sub, kind), exist_ok=True)
    seen = set()
    voids = open(os.path.join(out, "fix", "voids", "voids.csv"), "w", newline="")
    void_rows = csv.writer(voids, lineterminator="\n")
    void_rows.writerow(["record_id", "kind", "revision", "reason"])
    for kind in KINDS:
        folder = os.path.join(data, kind)
        names = sorted(n for n in os.listdir(folder) if n.endswith(".csv"))
        fix = open(os.path.join(out, "fix", kind, "fix.csv"), "w", newline="")
        new = open(os.path.join(out, "new", kind, "new.csv"), "w", newline="")
        fixes, news = csv.writer(fix, lineterminator="\n"), csv.writer(new, lineterminator="\n")
        n = 0
        for name in names:
            with open(os.path.join(folder, name), newline="") as f:
                rows = csv.reader(f)
                header = next(rows)
                if n == 0:
                    fixes.writerow(header + ["revision"])
                    news.writerow(header)
                amount = header.index("amount")
                for row in rows:
                    n += 1
                    every100, every1000 = n % 100 == 0, n % 1000 == 50
                    if not (every100 or every1000) or row[0] in seen:
                        continue
                    seen.add(row[0])
                    news.writerow(["n-" + row[0]] + row[1:])
                    if every100:
                        row[amount] += "1" if "." in row[amount] else ".1"
                        fixes.writerow(row + ["1"])
                    else:
                        void_rows.writerow([row[0], kind, "1", "benchmark"])
        fix.close()
        new.close()
    voids.close()


if __name__ == "__main__":
    main()
