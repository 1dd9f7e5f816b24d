//! The current-version rule of `corrections.md` on random deliveries:
//! random charges with revisions and voids, re-delivered, split into
//! files in a random order and read with 1 or 3 threads, against a
//! reference implementation of the contract written here.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{aggregate, AggregateOptions, Bucketing, Selector};
use crate::error::Error;
use crate::records::Kind;
use crate::time::Buckets;

/// What one (record id, revision) holds: a version or a void.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Slot {
    Version { account: u8, units: u8, cents: u16 },
    Void { reason: u8 },
}

/// One delivered row.
#[derive(Clone, Debug)]
struct Row {
    id: u8,
    revision: u8,
    slot: Slot,
}

impl Row {
    fn csv(&self) -> String {
        match &self.slot {
            Slot::Version { account, units, cents } => format!(
                "r{},A{account},2026-11-20T10:00:00Z,CNAM,{units},{}.{:02},{}\n",
                self.id,
                cents / 100 + 1,
                cents % 100,
                if self.revision == 0 { String::new() } else { self.revision.to_string() }
            ),
            Slot::Void { reason } => format!("r{},charges,{},why {reason}\n", self.id, self.revision),
        }
    }
}

/// The reference: per account, (records, units, amount in cents); the
/// counts (used, duplicates, superseded, voids); or a conflict.
type Expected = Option<(BTreeMap<String, (u64, u128, i128)>, [u64; 4])>;

fn reference(rows: &[Row]) -> Expected {
    let mut slots: BTreeMap<(u8, u8), (Slot, u64)> = BTreeMap::new();
    for row in rows {
        match slots.get_mut(&(row.id, row.revision)) {
            Some((slot, n)) if *slot == row.slot => *n += 1,
            Some(_) => return None,
            None => {
                slots.insert((row.id, row.revision), (row.slot.clone(), 1));
            }
        }
    }
    let mut highest: BTreeMap<u8, u8> = BTreeMap::new();
    for &(id, revision) in slots.keys() {
        let entry = highest.entry(id).or_insert(revision);
        *entry = (*entry).max(revision);
    }
    let (mut totals, mut counts) = (BTreeMap::new(), [0u64; 4]);
    for ((id, revision), (slot, n)) in &slots {
        counts[1] += n - 1;
        if *revision < highest[id] {
            counts[2] += 1;
            continue;
        }
        match slot {
            Slot::Void { .. } => counts[3] += 1,
            Slot::Version { account, units, cents } => {
                counts[0] += 1;
                let t: &mut (u64, u128, i128) = totals.entry(format!("A{account}")).or_default();
                *t = (t.0 + 1, t.1 + u128::from(*units), t.2 + i128::from(*cents) + 100);
            }
        }
    }
    Some((totals, counts))
}

fn slot() -> impl Strategy<Value = Slot> {
    prop_oneof![
        4 => (0u8..2, 0u8..5, 0u16..500).prop_map(|(account, units, cents)| Slot::Version { account, units, cents }),
        1 => (0u8..2).prop_map(|reason| Slot::Void { reason }),
    ]
}

/// Distinct (id, revision) slots, each delivered 1 to 3 times, and now and
/// then a row that conflicts with one.
fn deliveries() -> impl Strategy<Value = Vec<Row>> {
    (
        proptest::collection::btree_map((0u8..6, 0u8..4), slot(), 0..14),
        proptest::collection::vec(1usize..4, 14),
        any::<bool>(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(slots, times, conflict, pick)| {
            let mut rows = Vec::new();
            for (((id, revision), slot), n) in slots.into_iter().zip(times) {
                // A void's revision is at least 1.
                let revision = if matches!(slot, Slot::Void { .. }) { revision.max(1) } else { revision };
                for _ in 0..n {
                    rows.push(Row { id, revision, slot: slot.clone() });
                }
            }
            if conflict && !rows.is_empty() {
                let mut other = rows[pick.index(rows.len())].clone();
                other.slot = match other.slot {
                    Slot::Version { account, units, cents } => Slot::Version { account, units: units + 1, cents },
                    Slot::Void { reason } if other.revision % 2 == 0 => Slot::Void { reason: reason + 1 },
                    Slot::Void { .. } => Slot::Version { account: 0, units: 1, cents: 1 },
                };
                rows.push(other);
            }
            rows
        })
}

/// Writes `rows` into a data folder: each row into one of `files` files of
/// its folder (by `split`), named so that their order is `order`'s.
fn write(dir: &std::path::Path, rows: &[Row], split: &[u8], names: &[u8]) {
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        let file = split[i % split.len()] % 3;
        let (folder, header) = match row.slot {
            Slot::Version { .. } => ("charges", "record_id,auth_id,timestamp,description,units,amount,revision\n"),
            Slot::Void { .. } => ("voids", "record_id,kind,revision,reason\n"),
        };
        let name = format!("{folder}/f{}.csv", names[file as usize % names.len()]);
        texts.entry(name).or_insert_with(|| header.to_owned()).push_str(&row.csv());
    }
    for (name, text) in texts {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn only_current_versions_count_whatever_the_files_and_threads(
        rows in deliveries(),
        split in proptest::collection::vec(any::<u8>(), 1..8),
        names in Just(vec![0u8, 1, 2]).prop_shuffle(),
        threads in 1usize..4,
        shuffle in any::<u64>(),
    ) {
        // The rows in a random order (a seeded rotation and reversal).
        let mut rows = rows;
        if !rows.is_empty() {
            let k = (shuffle as usize) % rows.len();
            rows.rotate_left(k);
            if shuffle & 1 << 40 != 0 {
                rows.reverse();
            }
        }
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &rows, &split, &names);
        let day = 86_400;
        let start = 1_795_132_800 - 10 * day; // 2026-11-10
        let buckets = Buckets::from_bounds(vec![start, start + 30 * day], chrono_tz::Tz::UTC);
        let selector = Selector::everything(Bucketing::shared(buckets));
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let result = pool.install(|| aggregate(dir.path(), &selector, AggregateOptions::default()));
        match (reference(&rows), result) {
            (None, Err(Error::Conflict { .. })) => {}
            (None, other) => prop_assert!(false, "expected a conflict: {other:?}"),
            (Some(_), Err(e)) => prop_assert!(false, "unexpected error: {e}"),
            (Some((totals, counts)), Ok(found)) => {
                let mut got: BTreeMap<String, (u64, u128, i128)> = BTreeMap::new();
                for (key, t) in found.groups.iter() {
                    let e = got.entry(key.account.clone()).or_default();
                    *e = (e.0 + t.records, e.1 + t.units, e.2 + t.amount / 10_000_000);
                }
                prop_assert_eq!(got, totals);
                let charges = found.tallies.get(&Kind::Charges).copied().unwrap_or_default();
                let voids = found.tallies.get(&Kind::Voids).copied().unwrap_or_default();
                let sum = |f: fn(&super::Tally) -> u64| f(&charges) + f(&voids);
                prop_assert_eq!([sum(|t| t.used), sum(|t| t.duplicates), sum(|t| t.superseded), sum(|t| t.voids)], counts);
                prop_assert_eq!(sum(|t| t.read), rows.len() as u64);
                prop_assert!(charges.adds_up() && voids.adds_up());
                prop_assert_eq!(voids.used, 0);
                prop_assert_eq!(charges.voids, 0);
            }
        }
    }
}
