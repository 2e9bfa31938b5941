//! Exclusive XML canonicalisation (W3C "Exclusive XML Canonicalization Version 1.0",
//! without comments, no inclusive prefix list), the one the Pix security manual names for
//! every reference and for `SignedInfo`.
//!
//! It canonicalises one element's subtree of a [`super::xml::Document`], optionally leaving
//! out one element below it (the enveloped-signature transform). The rules, in the order the
//! recommendation gives them:
//! - an element is written as a start and an end tag, never self-closed;
//! - a namespace declaration is written on an element only where the element or one of its
//!   attributes visibly uses that prefix, and no output ancestor already wrote the same
//!   binding; the default namespace counts as the prefix "" (`xmlns=""` is written only to
//!   undo a default an output ancestor wrote);
//! - declarations come first, sorted by prefix, then attributes sorted by (namespace, local
//!   name) with unqualified ones first;
//! - text escapes `&`, `<`, `>` and carriage return; attribute values escape `&`, `<`, `"`,
//!   tab, line feed and carriage return;
//! - comments are dropped; processing instructions are kept.
//!
//! Since the apex of the subtree is treated as having no output ancestor, a prefix used
//! below is declared where it is first used, whatever the original document declared above
//! it: that is what makes a signed part portable into another envelope.

use std::fmt::Write;
use std::sync::Arc;

use super::xml::{Element, Node};

/// The canonical form of `apex`'s subtree, leaving out `omit` (an element inside it) if
/// given. `apex` must be an element of a parsed document: every name in it is resolved.
pub fn canonicalize(apex: &Element, omit: Option<&Element>) -> String {
    let mut out = String::with_capacity(1024);
    let mut rendered: Vec<(Box<str>, Arc<str>)> = Vec::new();
    element(apex, omit, &mut rendered, &mut out);
    out
}

/// `rendered`: the bindings (prefix, namespace) written by output ancestors, innermost last;
/// an element pushes what it writes and pops it when it closes.
fn element(e: &Element, omit: Option<&Element>, rendered: &mut Vec<(Box<str>, Arc<str>)>, out: &mut String) {
    let qname = e.qname();
    out.push('<');
    out.push_str(&qname);
    // The prefixes this element visibly uses: its own, and its prefixed attributes'.
    let mut used: Vec<(Box<str>, Arc<str>)> = Vec::with_capacity(1 + e.attrs.len());
    let own_prefix: Box<str> = e.prefix.clone().unwrap_or_default();
    used.push((own_prefix, e.ns.clone().unwrap_or_else(|| Arc::from(""))));
    for a in &e.attrs {
        if let (Some(p), Some(ns)) = (&a.prefix, &a.ns) {
            if &**p != "xml" && !used.iter().any(|(q, _)| q == p) {
                used.push((p.clone(), Arc::clone(ns)));
            }
        }
    }
    used.sort_by(|a, b| a.0.cmp(&b.0));
    let mark = rendered.len();
    for (prefix, ns) in used {
        let in_scope = rendered.iter().rev().find(|(p, _)| *p == prefix).map(|(_, n)| n.as_ref());
        let needed = match (prefix.is_empty(), in_scope) {
            // A default in no namespace needs writing only to undo a rendered default.
            (true, None) => !ns.is_empty(),
            (_, Some(current)) => current != &*ns,
            (false, None) => true,
        };
        if needed {
            if prefix.is_empty() {
                out.push_str(" xmlns=\"");
            } else {
                let _ = write!(out, " xmlns:{prefix}=\"");
            }
            attr_text(&ns, out);
            out.push('"');
            rendered.push((prefix, ns));
        }
    }
    let mut attrs: Vec<_> = e.attrs.iter().collect();
    attrs.sort_by(|a, b| {
        let ka = (a.ns.as_deref().unwrap_or(""), &*a.local);
        let kb = (b.ns.as_deref().unwrap_or(""), &*b.local);
        ka.cmp(&kb)
    });
    for a in attrs {
        out.push(' ');
        if let Some(p) = &a.prefix {
            out.push_str(p);
            out.push(':');
        }
        out.push_str(&a.local);
        out.push_str("=\"");
        attr_text(&a.value, out);
        out.push('"');
    }
    out.push('>');
    for child in &e.children {
        match child {
            Node::Element(c) if omit.is_some_and(|o| c.is(o)) => {}
            Node::Element(c) => element(c, omit, rendered, out),
            Node::Text(t) => text(t, out),
            Node::Comment(_) => {}
            Node::Pi(target, data) => {
                out.push_str("<?");
                out.push_str(target);
                if !data.is_empty() {
                    out.push(' ');
                    out.push_str(data);
                }
                out.push_str("?>");
            }
        }
    }
    out.push_str("</");
    out.push_str(&qname);
    out.push('>');
    rendered.truncate(mark);
}

fn text(t: &str, out: &mut String) {
    for c in t.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
}

/// An attribute value as canonical XML writes it: `&`, `<`, `"`, tab, LF and CR escaped,
/// exactly the set [`super::xml::escape_attr`] escapes for the writer.
fn attr_text(t: &str, out: &mut String) {
    out.push_str(&super::xml::escape_attr(t));
}

#[cfg(test)]
mod tests {
    use super::super::xml::Document;
    use super::*;

    fn c14n(doc: &str) -> String {
        let d = Document::parse(doc.as_bytes()).unwrap();
        canonicalize(&d.root, None)
    }

    fn c14n_of(doc: &str, path: &[&str]) -> String {
        let d = Document::parse(doc.as_bytes()).unwrap();
        canonicalize(d.root.path(path).unwrap(), None)
    }

    #[test]
    fn empty_elements_open_and_close_and_attributes_are_sorted() {
        assert_eq!(c14n(r#"<a b="2" a="1"><c/></a>"#), r#"<a a="1" b="2"><c></c></a>"#);
    }

    #[test]
    fn the_default_namespace_is_written_where_it_is_used_by_a_subtree() {
        let doc = r#"<Envelope xmlns="urn:env"><AppHdr><Fr>1</Fr></AppHdr></Envelope>"#;
        assert_eq!(c14n_of(doc, &["AppHdr"]), r#"<AppHdr xmlns="urn:env"><Fr>1</Fr></AppHdr>"#);
        assert_eq!(c14n(doc), r#"<Envelope xmlns="urn:env"><AppHdr><Fr>1</Fr></AppHdr></Envelope>"#);
    }

    #[test]
    fn unused_prefixes_are_dropped_and_used_ones_declared_where_first_used() {
        let doc = r#"<r xmlns:ds="urn:ds" xmlns:x="urn:x"><ds:S><ds:I a="1">t</ds:I></ds:S></r>"#;
        assert_eq!(c14n_of(doc, &["S"]), r#"<ds:S xmlns:ds="urn:ds"><ds:I a="1">t</ds:I></ds:S>"#);
        assert_eq!(c14n(doc), r#"<r><ds:S xmlns:ds="urn:ds"><ds:I a="1">t</ds:I></ds:S></r>"#);
    }

    #[test]
    fn a_default_undeclared_below_a_rendered_one_is_written_empty() {
        let doc = r#"<a xmlns="urn:a"><b xmlns=""><c/></b></a>"#;
        assert_eq!(c14n(doc), r#"<a xmlns="urn:a"><b xmlns=""><c></c></b></a>"#);
        // At the apex nothing was rendered, so nothing needs undoing.
        assert_eq!(c14n_of(doc, &["b"]), "<b><c></c></b>");
    }

    #[test]
    fn prefixed_attributes_declare_their_namespace_and_sort_after_unqualified_ones() {
        let doc = r#"<a xmlns:p="urn:p" xmlns:q="urn:q" p:z="1" y="2" q:b="3"/>"#;
        assert_eq!(c14n(doc), r#"<a xmlns:p="urn:p" xmlns:q="urn:q" y="2" p:z="1" q:b="3"></a>"#);
    }

    #[test]
    fn text_and_attributes_are_escaped_as_the_recommendation_says() {
        let doc = "<a v=\"&lt;&amp;&quot;&#9;&#10;&#13;>\">&lt;&amp;&gt;&#13;\"'</a>";
        assert_eq!(c14n(doc), "<a v=\"&lt;&amp;&quot;&#x9;&#xA;&#xD;>\">&lt;&amp;&gt;&#xD;\"'</a>");
    }

    #[test]
    fn comments_go_and_an_omitted_element_leaves_no_trace() {
        let doc = r#"<a><!-- c --><b>1</b><s><x/></s><c>2</c></a>"#;
        let d = Document::parse(doc.as_bytes()).unwrap();
        let s = d.root.child("s").unwrap();
        assert_eq!(canonicalize(&d.root, Some(s)), "<a><b>1</b><c>2</c></a>");
        // An equal element elsewhere is not the one omitted.
        let other = Document::parse(b"<s><x/></s>").unwrap();
        assert_eq!(canonicalize(&d.root, Some(&other.root)), "<a><b>1</b><s><x></x></s><c>2</c></a>");
    }

    #[test]
    fn the_w3c_example_of_exclusive_canonicalisation_gives_its_published_output() {
        // Section 2.2 of the recommendation: the subtree keeps only the prefix it uses.
        let doc = r#"<n0:local xmlns:n0="foo:bar" xmlns:n3="ftp://example.org"><n1:elem2 xmlns:n1="http://example.net" xml:lang="en"><n3:stuff xmlns:n3="ftp://example.org"/></n1:elem2></n0:local>"#;
        assert_eq!(
            c14n_of(doc, &["elem2"]),
            r#"<n1:elem2 xmlns:n1="http://example.net" xml:lang="en"><n3:stuff xmlns:n3="ftp://example.org"></n3:stuff></n1:elem2>"#
        );
    }
}
