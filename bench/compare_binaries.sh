#!/bin/bash
# Two telemeter binaries (say, release builds of two commits), the same bytes?
# summary (raw and --store), report, and the records, index and rollup files of ingest, on
# sample_data and two generated sets (CSV, Parquet). Prints each difference.
set -u
OLD=${1:?usage: bench/compare_binaries.sh OLD_BINARY NEW_BINARY} NEW=${2:?usage: bench/compare_binaries.sh OLD_BINARY NEW_BINARY}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d); rm -rf $W; mkdir -p $W
export TELEMETER_TOKEN_KEY=0000000000000000000000000000000000000000000000000000000000000001
$NEW generate --out $W/gen --calls 60000 --messages 30000 --transcriptions 5000 --charges 800 --accounts 8 --days 60 --start 2026-08-05 --seed 7 >/dev/null
$NEW generate --out $W/genpq --calls 20000 --messages 8000 --transcriptions 2000 --charges 300 --accounts 5 --days 30 --start 2026-09-01 --seed 3 --format parquet >/dev/null
fail=0; n=0
for data in $ROOT/sample_data $W/gen $W/genpq; do
  accts=$(tail -n +2 $data/accounts.csv | cut -d, -f1 | head -4)
  for a in $accts; do
    for q in "--from-date 2026-08-25 --to-date 2026-11-21" "--granularity hour --from-date 2026-08-10 --to-date 2026-08-12" "--granularity hour --from-date 2026-09-10 --to-date 2026-09-12 --subaccount-auth x" "--granularity hour --from-date 2026-11-19 --to-date 2026-11-21 --timezone Asia/Kolkata" "--granularity month --timezone Asia/Kathmandu --from-date 2026-01-01 --to-date 2026-11-21" "--granularity day --timezone America/New_York --product calls --from-date 2026-08-25 --to-date 2026-11-21" "--granularity year --from-date 2025-01-01 --to-date 2026-11-21" ; do
      $OLD summary --data $data --auth-id $a --now 2026-11-22T00:00:00Z $q --all-pages > $W/o.json 2>$W/o.err; oc=$?
      $NEW summary --data $data --auth-id $a --now 2026-11-22T00:00:00Z $q --all-pages > $W/n.json 2>$W/n.err; nc=$?
      if [ $oc != $nc ] || ! cmp -s $W/o.json $W/n.json || ! cmp -s $W/o.err $W/n.err; then echo "DIFF summary $data $a $q ($oc/$nc)"; fail=1; fi
      n=$((n + $(grep -o '"product"' $W/n.json | wc -l)))
    done
  done
  $OLD report --data $data --out $W/ro --now 2026-11-22T00:00:00Z --query "Granularity=day&from_date=2026-08-25&to_date=2026-11-21" >/dev/null 2>$W/ro.err; oc=$?
  $NEW report --data $data --out $W/rn --now 2026-11-22T00:00:00Z --query "Granularity=day&from_date=2026-08-25&to_date=2026-11-21" >/dev/null 2>$W/rn.err; nc=$?
  if [ $oc != $nc ] || ! diff -r $W/ro $W/rn >/dev/null; then echo "DIFF report $data ($oc/$nc)"; diff -r $W/ro $W/rn | head -5; fail=1; fi
  r=$(find $W/rn -name "usage.csv" | xargs cat | wc -l); echo "report $data: $r usage.csv lines identical"
  rm -rf $W/ro $W/rn $W/so $W/sn
  $OLD ingest --data $data --store $W/so >/dev/null 2>&1; $NEW ingest --data $data --store $W/sn >/dev/null 2>&1
  # Every file a generation publishes but the manifest (which names the
  # ingest): file names carry the ingest id, so the content hashes are
  # compared in name order, folder by folder.
  for part in records index rollups; do
    (cd $W/so && find $part -type f | sort | xargs -r sha256sum) > $W/so.sum
    (cd $W/sn && find $part -type f | sort | xargs -r sha256sum) > $W/sn.sum
    if ! diff <(cut -d' ' -f1 $W/so.sum) <(cut -d' ' -f1 $W/sn.sum) >/dev/null; then echo "DIFF $part $data"; fail=1; fi
    echo "ingest $data: $(wc -l < $W/sn.sum) $part files identical"
  done
  for a in $accts; do
    $OLD summary --store $W/so --auth-id $a --now 2026-11-22T00:00:00Z --granularity day --all-pages --from-date 2026-08-25 --to-date 2026-11-21 --timezone Asia/Kolkata > $W/o.json 2>/dev/null
    $NEW summary --store $W/sn --auth-id $a --now 2026-11-22T00:00:00Z --granularity day --all-pages --from-date 2026-08-25 --to-date 2026-11-21 --timezone Asia/Kolkata > $W/n.json 2>/dev/null
    # api_id and tokens are bound to the store's snapshot: identical data gives identical bytes
    cmp -s $W/o.json $W/n.json || { echo "DIFF store summary $data $a"; fail=1; }
  done
done
echo "compare done: fail=$fail, usage rows compared=$n"
rm -rf "$W"
exit $fail
