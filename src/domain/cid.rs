//! The DICT's content identifiers and sync verifiers (API 2.12.1, "Reconciliação"): what
//! lets a participant and the DICT find out, per key type, whether they hold the same keys,
//! and which differ.
//!
//! - A key's CID is the lower-case hex of HMAC-SHA256 keyed with the 16 bytes of the
//!   `RequestId` that created its entry (a registration's, or a claim completion's), over the
//!   entry's essential attributes joined by `&`: key type, key, owner's tax id, owner's name,
//!   owner's trade name, participant, branch, account number, account type (an absent one is
//!   the empty string).
//! - A participant's VSync for a key type is the XOR of the CIDs of its keys of that type (64
//!   zeros for none). Equal VSyncs mean equal sets, with overwhelming probability; different
//!   ones mean the sets differ.
//! - The difference of two sets of CIDs says what to repair: CIDs only the DICT has (keys
//!   this gateway lost track of) and CIDs only this gateway has (keys the DICT no longer
//!   holds for it). The DICT wins: the first are taken in, the second dropped.
//!
//! The API's own examples are the tests' vectors.

use std::collections::BTreeSet;

use super::webhooks::hmac_sha256;

/// Hex characters of a CID and of a VSync.
pub const CID_HEX_LEN: usize = 64;
/// The VSync of no keys.
pub const EMPTY_VSYNC: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The attributes of an entry that its CID covers, in the order the API joins them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CidAttributes<'a> {
    pub key_type: &'a str,
    pub key: &'a str,
    pub tax_id: &'a str,
    pub name: &'a str,
    pub trade_name: &'a str,
    pub participant: &'a str,
    pub branch: &'a str,
    pub account_number: &'a str,
    pub account_type: &'a str,
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    if text.len() != CID_HEX_LEN {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in text.as_bytes().chunks_exact(2).enumerate() {
        let digit = |c: u8| char::from(c).to_digit(16);
        out[i] = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
    }
    Some(out)
}

/// Whether `text` is a CID (64 hex characters).
pub fn is_cid(text: &str) -> bool {
    unhex(text).is_some()
}

/// The CID of an entry created under `request_id` (its 16 bytes, in the UUID's order).
pub fn cid(attributes: &CidAttributes<'_>, request_id: &[u8; 16]) -> String {
    let a = attributes;
    let joined = [
        a.key_type,
        a.key,
        a.tax_id,
        a.name,
        a.trade_name,
        a.participant,
        a.branch,
        a.account_number,
        a.account_type,
    ]
    .join("&");
    hex(&hmac_sha256(request_id, joined.as_bytes()))
}

/// The VSync of a set of CIDs; `None` when one is not a CID.
pub fn vsync<'a>(cids: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut acc = [0u8; 32];
    for c in cids {
        for (a, b) in acc.iter_mut().zip(unhex(&c.to_ascii_lowercase())?) {
            *a ^= b;
        }
    }
    Some(hex(&acc))
}

/// What differs between this gateway's CIDs of a key type and the DICT's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Difference {
    /// CIDs only the DICT has: entries to take in.
    pub only_at_dict: Vec<String>,
    /// CIDs only this gateway has: keys to drop.
    pub only_here: Vec<String>,
}

impl Difference {
    pub fn is_empty(&self) -> bool {
        self.only_at_dict.is_empty() && self.only_here.is_empty()
    }
}

/// The difference of the two sets (each CID compared in lower case), in CID order.
pub fn difference<'a>(
    here: impl IntoIterator<Item = &'a str>,
    dict: impl IntoIterator<Item = &'a str>,
) -> Difference {
    let here: BTreeSet<String> = here.into_iter().map(str::to_ascii_lowercase).collect();
    let dict: BTreeSet<String> = dict.into_iter().map(str::to_ascii_lowercase).collect();
    Difference {
        only_at_dict: dict.difference(&here).cloned().collect(),
        only_here: here.difference(&dict).cloned().collect(),
    }
}

/// The CIDs of a CID set file: one a line, `\n` ending each; blank lines skipped. `None`
/// when a line is not a CID.
pub fn read_cid_file(text: &str) -> Option<Vec<String>> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| is_cid(l).then(|| l.to_ascii_lowercase()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The API's example: entry attributes, the request id 1..16, and the CID it gives.
    #[test]
    fn the_apis_cid_example_gives_its_cid() {
        let a = CidAttributes {
            key_type: "PHONE",
            key: "+5511987654321",
            tax_id: "11122233300",
            name: "João Silva",
            trade_name: "",
            participant: "12345678",
            branch: "00001",
            account_number: "0007654321",
            account_type: "CACC",
        };
        let rid: [u8; 16] = core::array::from_fn(|i| u8::try_from(i + 1).unwrap());
        assert_eq!(cid(&a, &rid), "28c06eb41c4dc9c3ae114831efcac7446c8747777fca8b145ecd31ff8480ae88");
        // Any attribute changed is another CID.
        assert_ne!(cid(&CidAttributes { name: "Joao Silva", ..a }, &rid), cid(&a, &rid));
    }

    /// The API's example: three CIDs and their VSync; none is 64 zeros; the XOR undoes itself.
    #[test]
    fn the_apis_vsync_example_gives_its_vsync_and_a_cid_taken_out_undoes_itself() {
        let cids = [
            "28c06eb41c4dc9c3ae114831efcac7446c8747777fca8b145ecd31ff8480ae88",
            "4d4abb9168114e349672b934d16ed201a919cb49e28b7f66a240e62c92ee007f",
            "fce514f84f37934bc8aa0f861e4f7392273d71b9d18e8209d21e4192a7842058",
        ];
        assert_eq!(vsync(cids).unwrap(), "996fc1dd3b6b14bcf0c9fe8320eb66d7e2a3fd874ccf767b2e939641b1ea8eaf");
        assert_eq!(vsync([]).unwrap(), EMPTY_VSYNC);
        assert_eq!(vsync([cids[0], cids[0]]).unwrap(), EMPTY_VSYNC);
        assert_eq!(vsync([cids[2], &cids[0].to_ascii_uppercase(), cids[1]]).unwrap(), vsync(cids).unwrap());
        assert_eq!(vsync(["not a cid"]), None);
    }

    #[test]
    fn the_difference_says_what_only_each_side_holds_and_a_file_reads_one_cid_a_line() {
        let (a, b, c) = ("a".repeat(64), "b".repeat(64), "c".repeat(64));
        let d = difference([a.as_str(), b.as_str()], [b.as_str(), c.as_str()]);
        assert_eq!(d, Difference { only_at_dict: vec![c.clone()], only_here: vec![a.clone()] });
        assert!(difference([a.as_str()], [a.to_ascii_uppercase().as_str()]).is_empty());
        assert_eq!(
            read_cid_file(&format!("{a}\n{}\n\n", b.to_ascii_uppercase())),
            Some(vec![a.clone(), b.clone()])
        );
        assert_eq!(read_cid_file(&format!("{a}\nxyz\n")), None);
        assert_eq!(read_cid_file(""), Some(vec![]));
    }
}
