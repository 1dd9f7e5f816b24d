//! `allowed_ips` of accounts.csv: space-separated IPs or CIDR blocks, IPv4
//! and IPv6; empty allows any address.

use std::net::IpAddr;

/// A parsed `allowed_ips` cell, with its text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowlist {
    blocks: Vec<Block>,
    text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    V4 { net: u32, prefix: u32 },
    V6 { net: u128, prefix: u32 },
}

impl Allowlist {
    /// Parses a cell; the error names the entry at fault.
    pub fn parse(text: &str) -> Result<Allowlist, String> {
        let mut blocks = Vec::new();
        for entry in text.split_whitespace() {
            let (address, prefix) = match entry.split_once('/') {
                Some((address, prefix)) => (address, Some(prefix)),
                None => (entry, None),
            };
            let bad = |why: &str| format!("'{entry}' is not an IP address or CIDR block: {why}");
            let ip: IpAddr = address.parse().map_err(|_| bad("unreadable address"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let prefix = match prefix {
                None => max,
                Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                    p.parse::<u32>().ok().filter(|p| *p <= max).ok_or_else(|| bad("prefix too long"))?
                }
                Some(_) => return Err(bad("unreadable prefix length")),
            };
            // An IPv4-mapped block (`::ffff:10.0.0.0/104`) is the IPv4 block
            // it maps: callers are matched as IPv4 ([`Allowlist::allows`]).
            blocks.push(match ip {
                IpAddr::V4(v4) => Block::V4 { net: u32::from(v4) & mask32(prefix), prefix },
                IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                    Some(v4) if prefix >= 96 => {
                        Block::V4 { net: u32::from(v4) & mask32(prefix - 96), prefix: prefix - 96 }
                    }
                    _ => Block::V6 { net: u128::from(v6) & mask128(prefix), prefix },
                },
            });
        }
        Ok(Allowlist { blocks, text: text.to_owned() })
    }

    /// The cell as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the list allows any address.
    pub fn is_open(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Whether `ip` may call. An IPv4-mapped IPv6 address is read as IPv4.
    pub fn allows(&self, ip: IpAddr) -> bool {
        if self.blocks.is_empty() {
            return true;
        }
        let ip = ip.to_canonical();
        self.blocks.iter().any(|block| match (block, ip) {
            (Block::V4 { net, prefix }, IpAddr::V4(v4)) => u32::from(v4) & mask32(*prefix) == *net,
            (Block::V6 { net, prefix }, IpAddr::V6(v6)) => u128::from(v6) & mask128(*prefix) == *net,
            _ => false,
        })
    }
}

fn mask32(prefix: u32) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    }
}

fn mask128(prefix: u32) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn matches_addresses_and_blocks_of_both_families() {
        let list = Allowlist::parse(" 10.1.0.0/16  192.0.2.7 2001:db8::/32 ::1 ").unwrap();
        assert!(list.allows(ip("10.1.255.3")));
        assert!(!list.allows(ip("10.2.0.1")));
        assert!(list.allows(ip("192.0.2.7")));
        assert!(!list.allows(ip("192.0.2.8")));
        assert!(list.allows(ip("2001:db8:ffff::1")));
        assert!(!list.allows(ip("2001:db9::1")));
        assert!(list.allows(ip("::1")));
        assert!(!list.allows(ip("127.0.0.1")));
        assert!(list.allows(ip("::ffff:10.1.2.3")));
        // Written as IPv4-mapped IPv6, an entry allows its IPv4 callers.
        let mapped = Allowlist::parse("::ffff:10.0.0.0/104 ::ffff:192.0.2.7").unwrap();
        assert!(mapped.allows(ip("10.9.8.7")) && mapped.allows(ip("::ffff:10.9.8.7")));
        assert!(mapped.allows(ip("192.0.2.7")) && !mapped.allows(ip("192.0.2.8")));
        assert!(!mapped.allows(ip("11.0.0.1")));
        assert!(Allowlist::parse("").unwrap().allows(ip("203.0.113.9")));
        assert!(Allowlist::parse("0.0.0.0/0").unwrap().allows(ip("203.0.113.9")));
        assert!(!Allowlist::parse("0.0.0.0/0").unwrap().allows(ip("::2")));
    }

    #[test]
    fn refuses_malformed_entries() {
        assert!(Allowlist::parse("10.0.0.0/33").unwrap_err().contains("'10.0.0.0/33'"));
        assert!(Allowlist::parse("10.0.0/8").is_err());
        assert!(Allowlist::parse("::1/").is_err());
        assert!(Allowlist::parse("10.0.0.1,10.0.0.2").is_err());
    }
}
