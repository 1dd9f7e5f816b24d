//! The RLE / bit-packed hybrid encoding of a Parquet dictionary column's
//! keys, giving the bytes polars' encoder gives
//! (`polars_parquet::parquet::encoding::hybrid_rle::encode`, the oracle of
//! this module's property tests), from a slice instead of an iterator.
//!
//! polars' encoder buffers each value, then decides; here the same
//! decisions are taken on positions in the slice. Values before the next
//! run of nine or more equal values can only be literal: that run is found
//! by a scan of 64 neighbour pairs at a time, and the values before it are
//! taken at once (keys of mostly distinct values: a decimal dictionary's).
//! A run long enough to be written as a run is stepped through as polars
//! would until its length is all that counts, then passed over (keys of
//! few values: accounts, products). The store's key pages are a visible
//! share of an ingest's CPU time, and deciding on positions costs less
//! than buffering each value (measure with `bench/ingest-ab.sh`).

/// At most this many values in one bit-packed run (polars'
/// `MAX_VALUES_PER_LITERAL_RUN`).
const MAX_LITERAL: usize = 8192;

/// Appends `values` (each below `2^bits`) in the RLE / bit-packed hybrid,
/// exactly as polars' encoder does: a run of more than eight equal values
/// is written as a run, after the literal values before it have been
/// padded to a multiple of eight with its first values; every other value
/// goes to bit-packed runs of at most [`MAX_LITERAL`] values.
pub(super) fn encode(out: &mut Vec<u8>, values: &[u32], bits: u32) {
    let mut encoder = Encoder { out, values, bits, previous: 0, repeats: 0, start: 0, buffered: 0, literal: 0 };
    let n = values.len();
    let mut i = 0;
    // `i` is always where a run begins.
    while i < n {
        let long = next_long_run(values, i);
        if long > i {
            // Runs of at most eight values: all of them literal.
            encoder.step(i);
            encoder.take_literal(i + 1, long);
            i = long;
        } else {
            i = encoder.take_run(i);
        }
    }
    encoder.finish();
}

/// Where the first run of at least nine equal values at or after `from`
/// begins (`from` being where a run begins), or `values.len()`: found 64
/// pairs of neighbours at a time, as a mask.
fn next_long_run(values: &[u32], from: usize) -> usize {
    let n = values.len();
    let mut base = from;
    while base + 64 < n {
        let (left, right) = (&values[base..base + 64], &values[base + 1..base + 65]);
        let mut pairs = [0u8; 64];
        for k in 0..64 {
            pairs[k] = u8::from(left[k] == right[k]);
        }
        // Eight 0-or-1 bytes to eight bits: the multiply gathers byte i's
        // bit into bit 56 + i.
        let mut equal = 0u64;
        for (i, eight) in pairs.chunks_exact(8).enumerate() {
            let eight =
                u64::from_le_bytes([eight[0], eight[1], eight[2], eight[3], eight[4], eight[5], eight[6], eight[7]]);
            equal |= (eight.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * i);
        }
        // Bit k: values k to k + 8 of the window are equal (eight equal
        // pairs from pair k; none past the window's last pair).
        let mut nine = equal & (equal >> 1);
        nine &= nine >> 2;
        nine &= nine >> 4;
        if nine != 0 {
            return base + nine.trailing_zeros() as usize;
        }
        base += 57;
    }
    let mut same = 0;
    for k in base + 1..n {
        if values[k] == values[k - 1] {
            same += 1;
            if same == 8 {
                return k - 8;
            }
        } else {
            same = 0;
        }
    }
    n
}

/// polars' encoder's state, over positions of the slice: the value before,
/// how many times it came in a row, and the values taken but not yet
/// written (`buffered` of them from `start`, the first `literal` of them
/// certainly literal).
struct Encoder<'a> {
    out: &'a mut Vec<u8>,
    values: &'a [u32],
    bits: u32,
    previous: u32,
    repeats: usize,
    start: usize,
    buffered: usize,
    literal: usize,
}

impl Encoder<'_> {
    /// Takes the value at `i` as polars' encoder takes its next value
    /// (unless it is a repeat past the eighth: see [`Encoder::take_run`]).
    fn step(&mut self, i: usize) {
        let value = self.values[i];
        if value == self.previous {
            self.repeats += 1;
            if self.repeats == 8 {
                let padding = (8 - self.literal % 8) % 8;
                self.repeats -= padding;
                self.literal += padding;
            }
        } else if self.repeats > 8 {
            if self.literal > 0 {
                bit_pack(self.out, &self.values[self.start..self.start + self.literal], self.bits);
                self.literal = 0;
            }
            run(self.out, self.repeats, self.previous, self.bits);
            self.repeats = 1;
            self.buffered = 0;
        } else {
            self.literal = self.buffered;
            self.repeats = 1;
        }
        if self.buffered == MAX_LITERAL {
            bit_pack(self.out, &self.values[self.start..self.start + MAX_LITERAL], self.bits);
            self.repeats = 1;
            self.buffered = 0;
            self.literal = 0;
        }
        if self.buffered == 0 {
            self.start = i;
        }
        self.buffered += 1;
        self.previous = value;
    }

    /// Takes the values from `from` to `to`, runs of at most eight values
    /// that the value at `from - 1` began and the value at `to` does not
    /// continue: each is taken, none is ever written as a run, and a full
    /// buffer is written as one bit-packed run.
    fn take_literal(&mut self, from: usize, to: usize) {
        let mut i = from;
        while i < to {
            if self.buffered == MAX_LITERAL {
                bit_pack(self.out, &self.values[self.start..self.start + MAX_LITERAL], self.bits);
                self.buffered = 0;
                self.start = i;
            }
            let taken = (MAX_LITERAL - self.buffered).min(to - i);
            self.buffered += taken;
            i += taken;
        }
        // The last run is at most eight long, and what follows is another
        // value: it is literal whatever these say.
        self.previous = self.values[to - 1];
        self.repeats = 1;
        self.literal = self.buffered;
    }

    /// Takes the run that begins at `from`; returns where it ends. Past
    /// its eighth repeat a run is only counted.
    fn take_run(&mut self, from: usize) -> usize {
        let value = self.values[from];
        let end = self.values[from..].iter().position(|&v| v != value).map_or(self.values.len(), |k| from + k);
        let mut i = from;
        while i < end {
            if value == self.previous && self.repeats >= 8 {
                self.repeats += end - i;
                return end;
            }
            self.step(i);
            i += 1;
        }
        end
    }

    /// Writes what is left: the literal values, then the run in progress
    /// if it is long enough to be a run.
    fn finish(mut self) {
        if self.repeats <= 8 {
            self.literal = self.buffered;
        }
        if self.literal > 0 {
            bit_pack(self.out, &self.values[self.start..self.start + self.literal], self.bits);
        }
        if self.repeats > 8 {
            run(self.out, self.repeats, self.previous, self.bits);
        }
    }
}

/// A run: its length (shifted, low bit clear) then the value in
/// `ceil(bits / 8)` little-endian bytes.
fn run(out: &mut Vec<u8>, length: usize, value: u32, bits: u32) {
    uleb128(out, (length as u64) << 1);
    out.extend_from_slice(&value.to_le_bytes()[..bits.div_ceil(8) as usize]);
}

/// A bit-packed run: its number of groups of eight (shifted, low bit set),
/// then the values packed 32 at a time. A last block of fewer than 32
/// takes the bytes of its groups of eight, packed over the block before it
/// as polars packs them (the values past the end are ignored by readers,
/// but they are bytes of the file).
fn bit_pack(out: &mut Vec<u8>, values: &[u32], bits: u32) {
    uleb128(out, ((values.len().div_ceil(8) as u64) << 1) | 1);
    macro_rules! widths {
        ($($width:literal)*) => {
            match bits {
                $($width => pack::<$width>(out, values),)*
                _ => pack::<32>(out, values),
            }
        };
    }
    widths!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
}

/// [`bit_pack`]'s values at `BITS` bits each (a constant, so that each
/// block's shifts are too).
fn pack<const BITS: usize>(out: &mut Vec<u8>, values: &[u32]) {
    let blocks = values.len() / 32;
    let rest = values.len() % 32;
    let at = out.len();
    out.resize(at + blocks * 4 * BITS + rest.div_ceil(8) * BITS, 0);
    let mut bytes = out[at..].chunks_exact_mut(4 * BITS.max(1));
    for (block, bytes) in values.chunks_exact(32).zip(bytes.by_ref()) {
        pack_block::<BITS>(block, bytes);
    }
    if rest > 0 {
        // Over the block before (or zeros), as polars packs it.
        let mut last = [0u32; 32];
        if blocks > 0 {
            last.copy_from_slice(&values[(blocks - 1) * 32..blocks * 32]);
        }
        last[..rest].copy_from_slice(&values[blocks * 32..]);
        let mut packed = [0u8; 128];
        pack_block::<BITS>(&last, &mut packed[..4 * BITS]);
        let tail = out.len() - rest.div_ceil(8) * BITS;
        out[tail..].copy_from_slice(&packed[..rest.div_ceil(8) * BITS]);
    }
}

/// 32 values of `BITS` bits, least significant bit first, into the
/// `4 * BITS` bytes of `bytes`.
#[inline(always)]
fn pack_block<const BITS: usize>(block: &[u32], bytes: &mut [u8]) {
    if BITS == 0 {
        return;
    }
    let (mut buffer, mut filled, mut word) = (0u64, 0usize, 0usize);
    for &value in &block[..32] {
        buffer |= u64::from(value) << filled;
        filled += BITS;
        if filled >= 32 {
            bytes[4 * word..4 * word + 4].copy_from_slice(&(buffer as u32).to_le_bytes());
            word += 1;
            buffer >>= 32;
            filled -= 32;
        }
    }
}

/// `value` in unsigned LEB128.
fn uleb128(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn polars(values: &[u32], bits: u32) -> Vec<u8> {
        let mut out = Vec::new();
        polars_parquet::parquet::encoding::hybrid_rle::encode::<u32, _, _>(&mut out, values.iter().copied(), bits)
            .expect("to a vector");
        out
    }

    fn ours(values: &[u32], bits: u32) -> Vec<u8> {
        let mut out = Vec::new();
        encode(&mut out, values, bits);
        out
    }

    /// Keys made of runs: `(value, length)` pairs, values below `2^bits`.
    fn runs(max_bits: u32, max_runs: usize, max_length: usize) -> impl Strategy<Value = (Vec<u32>, u32)> {
        (0..=max_bits).prop_flat_map(move |bits| {
            let top = if bits == 0 { 0 } else { (1u64 << bits) - 1 } as u32;
            let value = prop_oneof![Just(0u32), Just(top), 0..=top];
            proptest::collection::vec((value, 1..=max_length), 0..max_runs).prop_map(move |runs| {
                let values = runs.into_iter().flat_map(|(v, n)| std::iter::repeat_n(v, n)).collect();
                (values, bits)
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Short and long runs of few or many values, at every bit width:
        /// the bytes polars writes.
        #[test]
        fn the_bytes_polars_writes((values, bits) in runs(32, 60, 20)) {
            prop_assert_eq!(ours(&values, bits), polars(&values, bits));
        }

        /// Long inputs cross the 8,192-value limit of a bit-packed run,
        /// in and out of runs.
        #[test]
        fn the_bytes_polars_writes_past_a_literal_run((values, bits) in runs(20, 3000, 12)) {
            prop_assert_eq!(ours(&values, bits), polars(&values, bits));
        }
    }

    /// The edges spelled out: nothing, one value, a run of exactly eight,
    /// a run straddling a full literal buffer, a key of every width.
    #[test]
    fn edges() {
        let mut cases: Vec<(Vec<u32>, u32)> =
            vec![(vec![], 0), (vec![0], 0), (vec![5], 3), (vec![1; 8], 1), (vec![1; 9], 1)];
        for offset in [8180usize, 8185, 8187, 8190, 8191, 8192, 8193] {
            let mut values: Vec<u32> = (0..offset as u32).map(|i| i % 7).collect();
            values.extend(std::iter::repeat_n(3, 30));
            values.extend((0..100).map(|i| i % 5));
            cases.push((values, 3));
        }
        for bits in 0..=32u32 {
            let top = if bits == 0 { 0 } else { ((1u64 << bits) - 1) as u32 };
            cases.push(((0..77).map(|i| if i % 3 == 0 { top } else { i & top }).collect(), bits));
        }
        for (values, bits) in cases {
            assert_eq!(ours(&values, bits), polars(&values, bits), "{} values of {bits} bits", values.len());
        }
    }
}
