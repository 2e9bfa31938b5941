//! XML signatures as the Pix security manual profiles them: exclusive canonicalisation,
//! RSA-SHA256, SHA-256 digests, and a `KeyInfo` that names the certificate by issuer and
//! decimal serial (never the certificate itself).
//!
//! Two profiles:
//! - **SPI** (ISO 20022 messages): the signature sits in `Envelope/AppHdr/Sgntr` and has
//!   three references, in this order: `#key-info-id` (the `KeyInfo`), `""` (the `AppHdr`,
//!   with the enveloped-signature transform) and one with no URI (the `Document`).
//! - **DICT** (its XML bodies): the signature is the root's first child and has two
//!   references: `#key-info-id` and `""` (the whole root, enveloped).
//!
//! Verification is strict on purpose. It accepts only these algorithms and these
//! references, each pointing at the one element it must (so a signature cannot be moved
//! onto other content), and it checks the certificate the `KeyInfo` names against the
//! certificates configured for that sender. A message that fails any of it credits nothing.

use base64::Engine;
use sha2::{Digest, Sha256};

use super::c14n::canonicalize;
use super::pki::{Certificate, Signer};
use super::xml::{escape_text, Document, Element, XmlError};

pub const DS_NS: &str = "http://www.w3.org/2000/09/xmldsig#";
const EXC_C14N: &str = "http://www.w3.org/2001/10/xml-exc-c14n#";
const RSA_SHA256: &str = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256";
const SHA256: &str = "http://www.w3.org/2001/04/xmlenc#sha256";
const ENVELOPED: &str = "http://www.w3.org/2000/09/xmldsig#enveloped-signature";
/// The `Id` of the `KeyInfo`, as the central bank writes it.
pub const KEY_INFO_ID: &str = "key-info-id";

/// Which profile a signature follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Spi,
    Dict,
}

/// Why a signature was not made or not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the document is not XML: {0}")]
    Xml(#[from] XmlError),
    #[error("the message has no {0}")]
    Missing(&'static str),
    #[error("the signature is not of the Pix profile: {0}")]
    Profile(String),
    #[error("the digest of {0} does not match")]
    Digest(&'static str),
    #[error("no configured certificate is {0}")]
    UnknownCertificate(String),
    #[error("the signature value does not verify")]
    Value,
}

/// Signs an SPI message written with an empty `<Sgntr></Sgntr>` in its `AppHdr`: answers
/// the same text with the signature inside it.
pub fn sign_spi(unsigned: &str, signer: &Signer) -> Result<String, SignatureError> {
    const EMPTY: &str = "<Sgntr></Sgntr>";
    let at = unsigned.find(EMPTY).ok_or(SignatureError::Missing("empty Sgntr to sign into"))?;
    let doc = Document::parse(unsigned.as_bytes())?;
    let app_hdr = doc.root.child("AppHdr").ok_or(SignatureError::Missing("AppHdr"))?;
    let document = doc.root.child("Document").ok_or(SignatureError::Missing("Document"))?;
    let refs = [
        (Some(format!("#{KEY_INFO_ID}")), false, digest(&key_info_c14n(signer))),
        (Some(String::new()), true, digest(&canonicalize(app_hdr, None))),
        (None, false, digest(&canonicalize(document, None))),
    ];
    let signature = signature_xml(&refs, signer);
    let mut out = String::with_capacity(unsigned.len() + signature.len());
    out.push_str(&unsigned[..at]);
    out.push_str("<Sgntr>");
    out.push_str(&signature);
    out.push_str(&unsigned[at + "<Sgntr>".len()..]);
    Ok(out)
}

/// Signs a DICT request body: `unsigned` is the body with no signature; the signature goes
/// in as the root's first child.
pub fn sign_dict(unsigned: &str, signer: &Signer) -> Result<String, SignatureError> {
    let doc = Document::parse(unsigned.as_bytes())?;
    let refs = [
        (Some(format!("#{KEY_INFO_ID}")), false, digest(&key_info_c14n(signer))),
        (Some(String::new()), true, digest(&canonicalize(&doc.root, None))),
    ];
    let signature = signature_xml(&refs, signer);
    let open = format!("<{}", doc.root.qname());
    let start = unsigned.find(&open).ok_or(SignatureError::Missing("root element"))?;
    let end =
        unsigned[start..].find('>').map(|i| start + i).ok_or(SignatureError::Missing("root element"))?;
    if unsigned.as_bytes()[end - 1] == b'/' {
        return Err(SignatureError::Missing("content in the root element"));
    }
    let mut out = String::with_capacity(unsigned.len() + signature.len());
    out.push_str(&unsigned[..=end]);
    out.push_str(&signature);
    out.push_str(&unsigned[end + 1..]);
    Ok(out)
}

fn digest(c14n: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(c14n.as_bytes()))
}

fn key_info_xml(signer: &Signer) -> String {
    format!(
        "<ds:KeyInfo Id=\"{KEY_INFO_ID}\"><ds:X509Data><ds:X509IssuerSerial><ds:X509IssuerName>{}</ds:X509IssuerName><ds:X509SerialNumber>{}</ds:X509SerialNumber></ds:X509IssuerSerial></ds:X509Data></ds:KeyInfo>",
        escape_text(&signer.cert.issuer),
        escape_text(&signer.cert.serial)
    )
}

/// The canonical form of a `ds:` fragment written by this module, as it is once inside the
/// signature (where `ds` is declared on `ds:Signature`).
fn fragment_c14n(fragment: &str) -> String {
    let wrapped = format!("<ds:Signature xmlns:ds=\"{DS_NS}\">{fragment}</ds:Signature>");
    match Document::parse(wrapped.as_bytes()) {
        Ok(d) => d.root.elements().next().map(|e| canonicalize(e, None)).unwrap_or_default(),
        // Only this module's own text reaches here, escaped: it always parses.
        Err(_) => String::new(),
    }
}

fn key_info_c14n(signer: &Signer) -> String {
    fragment_c14n(&key_info_xml(signer))
}

/// The whole `ds:Signature`: references (URI, enveloped?, digest) signed with `signer`.
fn signature_xml(refs: &[(Option<String>, bool, String)], signer: &Signer) -> String {
    let mut signed_info = String::with_capacity(1500);
    signed_info.push_str("<ds:SignedInfo>");
    signed_info.push_str(&format!(
        "<ds:CanonicalizationMethod Algorithm=\"{EXC_C14N}\"></ds:CanonicalizationMethod><ds:SignatureMethod Algorithm=\"{RSA_SHA256}\"></ds:SignatureMethod>"
    ));
    for (uri, enveloped, value) in refs {
        match uri {
            Some(u) => signed_info.push_str(&format!("<ds:Reference URI=\"{u}\">")),
            None => signed_info.push_str("<ds:Reference>"),
        }
        signed_info.push_str("<ds:Transforms>");
        if *enveloped {
            signed_info.push_str(&format!("<ds:Transform Algorithm=\"{ENVELOPED}\"></ds:Transform>"));
        }
        signed_info.push_str(&format!(
            "<ds:Transform Algorithm=\"{EXC_C14N}\"></ds:Transform></ds:Transforms><ds:DigestMethod Algorithm=\"{SHA256}\"></ds:DigestMethod><ds:DigestValue>{value}</ds:DigestValue></ds:Reference>"
        ));
    }
    signed_info.push_str("</ds:SignedInfo>");
    let value =
        base64::engine::general_purpose::STANDARD.encode(signer.sign(fragment_c14n(&signed_info).as_bytes()));
    format!(
        "<ds:Signature xmlns:ds=\"{DS_NS}\">{signed_info}<ds:SignatureValue>{value}</ds:SignatureValue>{}</ds:Signature>",
        key_info_xml(signer)
    )
}

/// What a verified signature tells: the certificate that signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub issuer: String,
    pub serial: String,
}

/// Where the signature of a document of `profile` sits.
pub fn signature_of(doc: &Document, profile: Profile) -> Option<&Element> {
    let is_sig = |e: &&Element| &*e.local == "Signature" && e.ns.as_deref() == Some(DS_NS);
    match profile {
        Profile::Spi => doc.root.path(&["AppHdr", "Sgntr"])?.elements().find(is_sig),
        Profile::Dict => doc.root.elements().find(is_sig),
    }
}

/// Checks the signature of `doc` by `profile`: every digest, and the value against the
/// certificate among `trusted` that its `KeyInfo` names.
pub fn verify(doc: &Document, profile: Profile, trusted: &[Certificate]) -> Result<Verified, SignatureError> {
    let sig = signature_of(doc, profile).ok_or(SignatureError::Missing("signature"))?;
    let signed_info = ds_child(sig, "SignedInfo")?;
    if algorithm(signed_info, "CanonicalizationMethod")? != EXC_C14N {
        return Err(SignatureError::Profile("SignedInfo is not canonicalised exclusively".into()));
    }
    if algorithm(signed_info, "SignatureMethod")? != RSA_SHA256 {
        return Err(SignatureError::Profile("the signature method is not rsa-sha256".into()));
    }
    let key_info = ds_child(sig, "KeyInfo")?;
    if key_info.attr("Id") != Some(KEY_INFO_ID) {
        return Err(SignatureError::Profile(format!("KeyInfo's Id is not {KEY_INFO_ID}")));
    }
    // The targets this profile signs, in order: (URI, enveloped, element, name).
    let targets: Vec<(Option<String>, bool, &Element, &'static str)> = match profile {
        Profile::Spi => vec![
            (Some(format!("#{KEY_INFO_ID}")), false, key_info, "KeyInfo"),
            (
                Some(String::new()),
                true,
                doc.root.child("AppHdr").ok_or(SignatureError::Missing("AppHdr"))?,
                "AppHdr",
            ),
            (None, false, doc.root.child("Document").ok_or(SignatureError::Missing("Document"))?, "Document"),
        ],
        Profile::Dict => vec![
            (Some(format!("#{KEY_INFO_ID}")), false, key_info, "KeyInfo"),
            (Some(String::new()), true, &doc.root, "the body"),
        ],
    };
    let references: Vec<&Element> = signed_info
        .elements()
        .filter(|e| &*e.local == "Reference" && e.ns.as_deref() == Some(DS_NS))
        .collect();
    if references.len() != targets.len() {
        return Err(SignatureError::Profile(format!(
            "{} references, not {}",
            references.len(),
            targets.len()
        )));
    }
    for (reference, (uri, enveloped, target, name)) in references.into_iter().zip(targets) {
        if reference.attr("URI").map(str::to_owned) != uri {
            return Err(SignatureError::Profile(format!("the reference to {name} has another URI")));
        }
        let transforms: Vec<String> = ds_child(reference, "Transforms")?
            .elements()
            .map(|t| t.attr("Algorithm").unwrap_or_default().to_owned())
            .collect();
        let expected: Vec<&str> = if enveloped { vec![ENVELOPED, EXC_C14N] } else { vec![EXC_C14N] };
        if transforms != expected {
            return Err(SignatureError::Profile(format!("the transforms of {name} are not the profile's")));
        }
        if algorithm(reference, "DigestMethod")? != SHA256 {
            return Err(SignatureError::Profile(format!("the digest of {name} is not sha256")));
        }
        let written =
            decode_base64(&ds_child(reference, "DigestValue")?.text()).ok_or(SignatureError::Digest(name))?;
        let omit = if enveloped { Some(sig) } else { None };
        let computed = Sha256::digest(canonicalize(target, omit).as_bytes());
        if written.as_slice() != computed.as_slice() {
            return Err(SignatureError::Digest(name));
        }
    }
    let serial = key_info
        .find(&|e| &*e.local == "X509IssuerSerial")
        .ok_or(SignatureError::Missing("X509IssuerSerial"))?;
    let issuer = serial.text_at(&["X509IssuerName"]).ok_or(SignatureError::Missing("X509IssuerName"))?;
    let number = serial.text_at(&["X509SerialNumber"]).ok_or(SignatureError::Missing("X509SerialNumber"))?;
    let cert = trusted
        .iter()
        .find(|c| c.is_named(&issuer, &number))
        .ok_or_else(|| SignatureError::UnknownCertificate(format!("{issuer} serial {}", number.trim())))?;
    let value = decode_base64(&ds_child(sig, "SignatureValue")?.text()).ok_or(SignatureError::Value)?;
    // SignedInfo canonicalised where it stands: exclusively, so `ds` is declared on it.
    let signed = canonicalize(signed_info, None);
    if !cert.verifies(signed.as_bytes(), &value) {
        return Err(SignatureError::Value);
    }
    Ok(Verified { issuer: cert.issuer.clone(), serial: cert.serial.clone() })
}

/// The child of `e` in the signature namespace with this local name.
fn ds_child<'a>(e: &'a Element, name: &'static str) -> Result<&'a Element, SignatureError> {
    e.elements()
        .find(|c| &*c.local == name && c.ns.as_deref() == Some(DS_NS))
        .ok_or(SignatureError::Missing(name))
}

/// The `Algorithm` of the child of `e` with this local name.
fn algorithm<'a>(e: &'a Element, name: &'static str) -> Result<&'a str, SignatureError> {
    Ok(ds_child(e, name)?.attr("Algorithm").unwrap_or_default())
}

/// Base64 with any white space in it (writers wrap lines, some with `&#13;`).
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(compact).ok()
}

/// The digests a signature of `profile` claims, each checked against the content: for a
/// message whose certificate is not at hand (a published sample), this shows the content is
/// what was signed, though not who signed it.
pub fn check_digests(doc: &Document, profile: Profile) -> Result<usize, SignatureError> {
    match verify(doc, profile, &[]) {
        Err(SignatureError::UnknownCertificate(_)) => Ok(match profile {
            Profile::Spi => 3,
            Profile::Dict => 2,
        }),
        Err(e) => Err(e),
        Ok(_) => Err(SignatureError::Profile("verified without a certificate".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::pki::tests::test_signer;
    use super::*;

    fn sample(name: &str) -> Document {
        let path = format!("{}/tests/data/spi/{name}", env!("CARGO_MANIFEST_DIR"));
        Document::parse(&std::fs::read(path).unwrap()).unwrap()
    }

    /// A pacs.008 the central bank's SPI sent and signed (published with its signature):
    /// recomputing its three digests over our canonical forms gives the ones it signed.
    #[test]
    fn the_digests_of_a_message_the_spi_signed_are_recomputed_exactly() {
        let d = sample("real_signed_pacs.008.spi.1.13_from_00038166.xml");
        assert_eq!(check_digests(&d, Profile::Spi), Ok(3));
        for name in [
            "real_signed_pibr.002.spi.1.3_from_00038166_a.xml",
            "real_signed_pibr.002.spi.1.3_from_00038166_b.xml",
        ] {
            assert_eq!(check_digests(&sample(name), Profile::Spi), Ok(3), "{name}");
        }
        // Its certificate is not published: the value cannot be checked, and says so.
        let e = verify(&d, Profile::Spi, &[test_signer().1.cert.clone()]).unwrap_err();
        assert!(
            matches!(e, SignatureError::UnknownCertificate(ref s) if s.contains("5529224565488886204649542255")),
            "{e}"
        );
    }

    #[test]
    fn a_change_to_any_signed_part_of_the_published_message_breaks_its_digest() {
        let text = std::fs::read_to_string(format!(
            "{}/tests/data/spi/real_signed_pacs.008.spi.1.13_from_00038166.xml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        for (from, to, part) in [
            (">6.00<", ">60.00<", "Document"),
            ("<MsgDefIdr>pacs.008.spi.1.13<", "<MsgDefIdr>pacs.008.spi.1.14<", "AppHdr"),
            ("5529224565488886204649542255", "5529224565488886204649542256", "KeyInfo"),
        ] {
            let changed = text.replacen(from, to, 1);
            assert_ne!(changed, text);
            let d = Document::parse(changed.as_bytes()).unwrap();
            assert_eq!(check_digests(&d, Profile::Spi), Err(SignatureError::Digest(part)), "{part}");
        }
    }

    const UNSIGNED: &str = r#"<?xml version="1.0" encoding="UTF-8"?><Envelope xmlns="https://www.bcb.gov.br/pi/pacs.008/1.16"><AppHdr><Fr><FIId><FinInstnId><Othr><Id>99999999</Id></Othr></FinInstnId></FIId></Fr><To><FIId><FinInstnId><Othr><Id>00038166</Id></Othr></FinInstnId></FIId></To><BizMsgIdr>M99999999aaaaaaaaaaaaaaaaaaaaaaa</BizMsgIdr><MsgDefIdr>pacs.008.spi.1.16</MsgDefIdr><CreDt>2026-11-26T10:00:00.000Z</CreDt><Sgntr></Sgntr></AppHdr><Document><FIToFICstmrCdtTrf><GrpHdr><MsgId>M99999999aaaaaaaaaaaaaaaaaaaaaaa</MsgId></GrpHdr><Nm>Jo&amp;o</Nm></FIToFICstmrCdtTrf></Document></Envelope>"#;

    #[test]
    fn a_message_we_sign_verifies_with_our_certificate_and_with_no_other() {
        let (ca, signer) = test_signer();
        let signed = sign_spi(UNSIGNED, signer).unwrap();
        let d = Document::parse(signed.as_bytes()).unwrap();
        let v = verify(&d, Profile::Spi, std::slice::from_ref(&signer.cert)).unwrap();
        assert_eq!(v.serial, "4242");
        // The text outside the signature is what was written.
        let sig_start = signed.find("<ds:Signature").unwrap();
        let sig_end = signed.find("</ds:Signature>").unwrap() + "</ds:Signature>".len();
        assert_eq!(format!("{}{}", &signed[..sig_start], &signed[sig_end..]), UNSIGNED);
        // Another participant's certificate, issued by the same CA, is not the signer's.
        let other = ca.issue("other", &[], 4243, super::super::pki::Usage::Client).unwrap();
        let other = Certificate::all_from_pem(other.cert_pem.as_bytes(), "other").unwrap();
        assert!(matches!(verify(&d, Profile::Spi, &other), Err(SignatureError::UnknownCertificate(_))));
    }

    #[test]
    fn a_signed_message_changed_afterwards_or_resigned_in_another_shape_is_refused() {
        let (_, signer) = test_signer();
        let trusted = std::slice::from_ref(&signer.cert);
        let signed = sign_spi(UNSIGNED, signer).unwrap();
        let check = |text: &str| verify(&Document::parse(text.as_bytes()).unwrap(), Profile::Spi, trusted);
        assert!(check(&signed).is_ok());
        assert_eq!(check(&signed.replace("Jo&amp;o", "Joao")), Err(SignatureError::Digest("Document")));
        assert_eq!(
            check(&signed.replace("<CreDt>2026-11-26T10:00:00.000Z", "<CreDt>2026-11-26T10:00:01.000Z")),
            Err(SignatureError::Digest("AppHdr"))
        );
        // A digest made to match the new content leaves the signature value wrong.
        let tampered = signed.replace("Jo&amp;o", "Joao");
        let doc = Document::parse(tampered.as_bytes()).unwrap();
        let new_digest = digest(&canonicalize(doc.root.child("Document").unwrap(), None));
        let old_digest = digest(&canonicalize(
            Document::parse(signed.as_bytes()).unwrap().root.child("Document").unwrap(),
            None,
        ));
        assert_eq!(check(&tampered.replace(&old_digest, &new_digest)), Err(SignatureError::Value));
        // Other algorithms than the profile's are not accepted.
        let sha1 = signed.replace(SHA256, "http://www.w3.org/2000/09/xmldsig#sha1");
        assert!(matches!(check(&sha1), Err(SignatureError::Profile(_))));
        let inclusive = signed.replacen(EXC_C14N, "http://www.w3.org/TR/2001/REC-xml-c14n-20010315", 1);
        assert!(matches!(check(&inclusive), Err(SignatureError::Profile(_))));
        // An unsigned message has nothing to verify.
        assert_eq!(check(UNSIGNED), Err(SignatureError::Missing("signature")));
    }

    #[test]
    fn a_dict_body_is_signed_as_the_roots_first_child_and_verifies() {
        let (_, signer) = test_signer();
        let body = r#"<?xml version="1.0" encoding="UTF-8"?><CreateEntryRequest><Entry><Key>a@b.c</Key></Entry><RequestId>x</RequestId></CreateEntryRequest>"#;
        let signed = sign_dict(body, signer).unwrap();
        assert!(signed.contains("<CreateEntryRequest><ds:Signature"));
        let d = Document::parse(signed.as_bytes()).unwrap();
        assert!(verify(&d, Profile::Dict, std::slice::from_ref(&signer.cert)).is_ok());
        let changed = Document::parse(signed.replace("a@b.c", "x@b.c").as_bytes()).unwrap();
        assert_eq!(
            verify(&changed, Profile::Dict, std::slice::from_ref(&signer.cert)),
            Err(SignatureError::Digest("the body"))
        );
    }
}
