//! A small XML tree for the messages of the SPI and the DICT: parsed from bytes with
//! quick-xml's tokenizer, with every name's namespace resolved, kept faithful enough to be
//! canonicalised ([`super::c14n`]) and so to verify a signature over what the sender wrote.
//!
//! What it refuses, because no message of the rails carries it and each is a way to attack
//! a parser: a document type declaration (entity expansion), an entity other than the five
//! predefined ones and character references, more than [`XML_DEPTH_MAX`] levels, more than
//! [`XML_NODES_MAX`] nodes, and a document over [`XML_BYTES_MAX`] bytes. Text keeps its
//! whitespace: canonical XML digests it.
//!
//! Writing goes the other way and needs no tree: [`escape_text`] and [`escape_attr`] make
//! values safe to put between tags the message builders write themselves, so the bytes
//! signed are the bytes sent.

use std::sync::Arc;

use quick_xml::events::attributes::Attribute;
use quick_xml::events::{BytesRef, BytesStart, Event};
use quick_xml::Reader;

/// The largest document read (the ICOM manual's message is far smaller; a DICT answer too).
pub const XML_BYTES_MAX: usize = 1024 * 1024;
/// The deepest nesting read (an SPI message is about 10 levels deep).
pub const XML_DEPTH_MAX: usize = 64;
/// The most nodes (elements, texts, comments) one document may hold.
pub const XML_NODES_MAX: usize = 100_000;

/// The namespace of the `xml:` prefix, bound by definition.
const XML_NS: &str = "http://www.w3.org/XML/1998/namespace";

/// Why a document was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XmlError {
    #[error("the document is over {XML_BYTES_MAX} bytes")]
    TooLarge,
    #[error("the document nests deeper than {XML_DEPTH_MAX} levels")]
    TooDeep,
    #[error("the document has more than {XML_NODES_MAX} nodes")]
    TooManyNodes,
    #[error("a document type declaration is not accepted")]
    DocType,
    #[error("the entity &{0}; is not defined")]
    UnknownEntity(String),
    #[error("the prefix {0} is not bound to a namespace")]
    UnboundPrefix(String),
    #[error("the document has no root element")]
    NoRoot,
    #[error("the document is not well-formed: {0}")]
    Malformed(String),
}

/// A node of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Element(Element),
    /// Character data, with references resolved and line ends normalised.
    Text(String),
    Comment(String),
    /// A processing instruction: its target and data.
    Pi(String, String),
}

/// An attribute other than a namespace declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub prefix: Option<Box<str>>,
    pub local: Box<str>,
    /// The namespace of a prefixed attribute (an unprefixed one has none).
    pub ns: Option<Arc<str>>,
    pub value: String,
}

/// A namespace declaration: the prefix (`None` for the default) and the namespace (empty
/// for an undeclared default).
pub type NsDecl = (Option<Box<str>>, Arc<str>);

/// An element, with the namespace declarations written on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    pub prefix: Option<Box<str>>,
    pub local: Box<str>,
    /// The namespace its name is in, if any.
    pub ns: Option<Arc<str>>,
    /// Declarations on this element.
    pub ns_decls: Vec<NsDecl>,
    pub attrs: Vec<Attr>,
    pub children: Vec<Node>,
}

impl Element {
    /// The qualified name as written.
    pub fn qname(&self) -> String {
        match &self.prefix {
            Some(p) => format!("{p}:{}", self.local),
            None => self.local.to_string(),
        }
    }

    /// The child elements, in order.
    pub fn elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|n| match n {
            Node::Element(e) => Some(e),
            _ => None,
        })
    }

    /// The first child element with this local name.
    pub fn child(&self, local: &str) -> Option<&Element> {
        self.elements().find(|e| &*e.local == local)
    }

    /// The element at the end of a path of local names below this one.
    pub fn path(&self, path: &[&str]) -> Option<&Element> {
        path.iter().try_fold(self, |e, name| e.child(name))
    }

    /// The text of the element at `path` (its character data, joined), if there is one.
    pub fn text_at(&self, path: &[&str]) -> Option<String> {
        self.path(path).map(Element::text)
    }

    /// The element's own character data, joined.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for n in &self.children {
            if let Node::Text(t) = n {
                out.push_str(t);
            }
        }
        out
    }

    /// The value of an unprefixed attribute.
    pub fn attr(&self, local: &str) -> Option<&str> {
        self.attrs.iter().find(|a| a.prefix.is_none() && &*a.local == local).map(|a| a.value.as_str())
    }

    /// The first element of this subtree (this one included) that satisfies `f`, depth
    /// first.
    pub fn find(&self, f: &dyn Fn(&Element) -> bool) -> Option<&Element> {
        if f(self) {
            return Some(self);
        }
        self.elements().find_map(|c| c.find(f))
    }

    /// Whether `self` is this exact element (the same node, not an equal one).
    pub fn is(&self, other: &Element) -> bool {
        std::ptr::eq(self, other)
    }
}

/// A parsed document: its root element, and the namespaces in scope where the root starts
/// (none: a document's root sees only `xml:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub root: Element,
}

impl Document {
    /// Reads a document: UTF-8, no DTD, within the limits above.
    pub fn parse(bytes: &[u8]) -> Result<Document, XmlError> {
        if bytes.len() > XML_BYTES_MAX {
            return Err(XmlError::TooLarge);
        }
        let text = std::str::from_utf8(bytes).map_err(|_| XmlError::Malformed("not UTF-8".into()))?;
        let mut reader = Reader::from_str(text);
        let config = reader.config_mut();
        config.check_end_names = true;
        config.expand_empty_elements = false;
        config.trim_text(false);
        let mut p = Parser { stack: Vec::new(), scopes: Vec::new(), root: None, nodes: 0 };
        loop {
            let event = reader.read_event().map_err(|e| XmlError::Malformed(e.to_string()))?;
            match event {
                Event::Eof => break,
                Event::Decl(_) => {}
                Event::DocType(_) => return Err(XmlError::DocType),
                Event::Start(s) => p.open(&s)?,
                Event::Empty(s) => {
                    p.open(&s)?;
                    p.close()?;
                }
                Event::End(_) => p.close()?,
                Event::Text(t) => p.text(&t.xml10_content())?,
                Event::CData(c) => p.text(&c.xml10_content())?,
                Event::GeneralRef(r) => {
                    let c = resolve_reference(&r)?;
                    p.text(c.encode_utf8(&mut [0u8; 4]))?;
                }
                Event::Comment(c) => p.push(Node::Comment(c.xml10_content().into_owned()))?,
                Event::PI(pi) => {
                    let target = pi.target().to_owned();
                    let content = pi.content().trim_start().to_owned();
                    p.push(Node::Pi(target, content))?;
                }
            }
        }
        if !p.stack.is_empty() {
            return Err(XmlError::Malformed("an element is not closed".into()));
        }
        p.root.map(|root| Document { root }).ok_or(XmlError::NoRoot)
    }
}

struct Parser {
    /// Elements open now, outermost first.
    stack: Vec<Element>,
    /// The bindings each open element declared: (prefix, namespace).
    scopes: Vec<Vec<NsDecl>>,
    root: Option<Element>,
    nodes: usize,
}

impl Parser {
    fn count(&mut self) -> Result<(), XmlError> {
        self.nodes += 1;
        if self.nodes > XML_NODES_MAX {
            return Err(XmlError::TooManyNodes);
        }
        Ok(())
    }

    fn lookup(&self, prefix: Option<&str>) -> Option<Arc<str>> {
        if prefix == Some("xml") {
            return Some(Arc::from(XML_NS));
        }
        for scope in self.scopes.iter().rev() {
            if let Some((_, ns)) = scope.iter().find(|(p, _)| p.as_deref() == prefix) {
                return (!ns.is_empty()).then(|| Arc::clone(ns));
            }
        }
        None
    }

    fn open(&mut self, start: &BytesStart) -> Result<(), XmlError> {
        self.count()?;
        if self.stack.len() >= XML_DEPTH_MAX {
            return Err(XmlError::TooDeep);
        }
        if self.root.is_some() && self.stack.is_empty() {
            return Err(XmlError::Malformed("content after the root element".into()));
        }
        let (prefix, local) = split_name(start.name().as_ref())?;
        let mut decls = Vec::new();
        let mut raw_attrs = Vec::new();
        for a in start.attributes().with_checks(true) {
            let a = a.map_err(|e| XmlError::Malformed(e.to_string()))?;
            let value = attr_value(&a)?;
            let (ap, al) = split_name(a.key.as_ref())?;
            match (ap.as_deref(), &*al) {
                (None, "xmlns") => decls.push((None, Arc::from(value.as_str()))),
                (Some("xmlns"), _) => {
                    if value.is_empty() {
                        return Err(XmlError::Malformed(format!("xmlns:{al} is empty")));
                    }
                    decls.push((Some(al), Arc::from(value.as_str())))
                }
                _ => raw_attrs.push((ap, al, value)),
            }
        }
        self.scopes.push(decls.clone());
        let ns = match prefix.as_deref() {
            Some(p) => Some(self.lookup(Some(p)).ok_or_else(|| XmlError::UnboundPrefix(p.into()))?),
            None => self.lookup(None),
        };
        let mut attrs = Vec::with_capacity(raw_attrs.len());
        for (ap, al, value) in raw_attrs {
            let ans = match ap.as_deref() {
                Some(p) => Some(self.lookup(Some(p)).ok_or_else(|| XmlError::UnboundPrefix(p.into()))?),
                None => None,
            };
            if attrs.iter().any(|b: &Attr| b.local == al && b.ns == ans) {
                return Err(XmlError::Malformed(format!("attribute {al} appears twice")));
            }
            attrs.push(Attr { prefix: ap, local: al, ns: ans, value });
        }
        self.stack.push(Element { prefix, local, ns, ns_decls: decls, attrs, children: Vec::new() });
        Ok(())
    }

    fn close(&mut self) -> Result<(), XmlError> {
        let done = self.stack.pop().ok_or_else(|| XmlError::Malformed("an end tag closes nothing".into()))?;
        self.scopes.pop();
        match self.stack.last_mut() {
            Some(parent) => parent.children.push(Node::Element(done)),
            None => self.root = Some(done),
        }
        Ok(())
    }

    fn text(&mut self, t: &str) -> Result<(), XmlError> {
        if t.is_empty() {
            return Ok(());
        }
        let Some(parent) = self.stack.last_mut() else {
            // Only whitespace may stand outside the root.
            if t.chars().all(|c| matches!(c, ' ' | '\t' | '\n' | '\r')) {
                return Ok(());
            }
            return Err(XmlError::Malformed("text outside the root element".into()));
        };
        // References split text into several events: they join into one node.
        if let Some(Node::Text(last)) = parent.children.last_mut() {
            last.push_str(t);
            return Ok(());
        }
        parent.children.push(Node::Text(t.to_owned()));
        self.count()
    }

    fn push(&mut self, node: Node) -> Result<(), XmlError> {
        self.count()?;
        // Comments and instructions outside the root are not part of what is signed.
        if let Some(parent) = self.stack.last_mut() {
            parent.children.push(node);
        }
        Ok(())
    }
}

fn split_name(name: &str) -> Result<(Option<Box<str>>, Box<str>), XmlError> {
    match name.split_once(':') {
        Some((p, l)) if !p.is_empty() && !l.is_empty() && !l.contains(':') => Ok((Some(p.into()), l.into())),
        None if !name.is_empty() => Ok((None, name.into())),
        _ => Err(XmlError::Malformed(format!("{name} is not a valid name"))),
    }
}

/// An attribute's value as the XML data model has it: references resolved, white space
/// normalised (no DTD declares a type, so every attribute is CDATA).
fn attr_value(a: &Attribute) -> Result<String, XmlError> {
    a.normalized_value(quick_xml::XmlVersion::Implicit1_0).map(|v| v.into_owned()).map_err(|e| match e {
        quick_xml::Error::Escape(quick_xml::escape::EscapeError::UnrecognizedEntity(_, name)) => {
            XmlError::UnknownEntity(name)
        }
        other => XmlError::Malformed(other.to_string()),
    })
}

fn resolve_reference(r: &BytesRef) -> Result<char, XmlError> {
    if r.is_char_ref() {
        return match r.resolve_char_ref() {
            Ok(Some(c)) => Ok(c),
            _ => Err(XmlError::Malformed("a character reference is not valid".into())),
        };
    }
    let name = r.to_string();
    match name.as_str() {
        "amp" => Ok('&'),
        "lt" => Ok('<'),
        "gt" => Ok('>'),
        "quot" => Ok('"'),
        "apos" => Ok('\''),
        _ => Err(XmlError::UnknownEntity(name)),
    }
}

/// Text made safe to write between tags.
pub fn escape_text(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains(['&', '<', '>', '\r']) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A value made safe to write inside double quotes.
pub fn escape_attr(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains(['&', '<', '"', '\t', '\n', '\r']) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '"' => out.push_str("&quot;"),
            '\t' => out.push_str("&#x9;"),
            '\n' => out.push_str("&#xA;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Document, XmlError> {
        Document::parse(s.as_bytes())
    }

    #[test]
    fn names_are_resolved_to_their_namespaces() {
        let d = parse(r#"<a xmlns="urn:a" xmlns:p="urn:p"><p:b p:x="1" y="2"><c/></p:b><d xmlns=""/></a>"#)
            .unwrap();
        assert_eq!(d.root.ns.as_deref(), Some("urn:a"));
        let b = d.root.child("b").unwrap();
        assert_eq!(b.ns.as_deref(), Some("urn:p"));
        assert_eq!(b.attrs[0].ns.as_deref(), Some("urn:p"));
        assert_eq!(b.attrs[1].ns, None, "an unprefixed attribute is in no namespace");
        assert_eq!(b.child("c").unwrap().ns.as_deref(), Some("urn:a"), "the default is inherited");
        assert_eq!(d.root.child("d").unwrap().ns, None, "xmlns=\"\" undeclares the default");
    }

    #[test]
    fn references_are_resolved_and_text_joins_around_them() {
        let d = parse("<a>x &amp; y &#13;&#x41;<![CDATA[<z>]]></a>").unwrap();
        assert_eq!(d.root.children.len(), 1);
        assert_eq!(d.root.text(), "x & y \rA<z>");
        let d = parse("<a b=\"1&#9;2\n3\"/>").unwrap();
        assert_eq!(d.root.attr("b"), Some("1\t2 3"), "a tab written as a reference survives normalisation");
    }

    #[test]
    fn line_ends_are_normalised_in_text_but_not_in_references() {
        let d = parse("<a>1\r\n2\r3&#13;</a>").unwrap();
        assert_eq!(d.root.text(), "1\n2\n3\r");
    }

    #[test]
    fn dangerous_or_broken_documents_are_refused() {
        assert_eq!(parse("<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>"), Err(XmlError::DocType));
        assert_eq!(parse("<a>&x;</a>"), Err(XmlError::UnknownEntity("x".into())));
        assert_eq!(parse("<p:a/>"), Err(XmlError::UnboundPrefix("p".into())));
        assert!(matches!(parse("<a><b></a>"), Err(XmlError::Malformed(_))));
        assert!(matches!(parse("<a/><b/>"), Err(XmlError::Malformed(_))));
        assert!(matches!(parse("<a x='1' x='2'/>"), Err(XmlError::Malformed(_))));
        assert!(matches!(parse("<a>"), Err(XmlError::Malformed(_))));
        assert_eq!(parse(""), Err(XmlError::NoRoot));
        assert!(matches!(Document::parse(&[0xff, 0xfe]), Err(XmlError::Malformed(_))));
    }

    #[test]
    fn the_limits_hold_at_their_boundaries() {
        let nest = |n: usize| "<a>".repeat(n) + &"</a>".repeat(n);
        assert!(parse(&nest(XML_DEPTH_MAX)).is_ok());
        assert_eq!(parse(&nest(XML_DEPTH_MAX + 1)), Err(XmlError::TooDeep));
        let many = |n: usize| format!("<r>{}</r>", "<b/>".repeat(n - 1));
        assert!(parse(&many(XML_NODES_MAX)).is_ok());
        assert_eq!(parse(&many(XML_NODES_MAX + 1)), Err(XmlError::TooManyNodes));
        let big = format!("<a>{}</a>", "x".repeat(XML_BYTES_MAX - 7));
        assert_eq!(big.len(), XML_BYTES_MAX);
        assert!(parse(&big).is_ok());
        assert_eq!(parse(&format!("{big} ")), Err(XmlError::TooLarge));
    }

    #[test]
    fn escaped_values_read_back_as_written() {
        let value = "a&b<c>d\"e\tf\ng\rh";
        let doc = format!("<a v=\"{}\">{}</a>", escape_attr(value), escape_text(value));
        let d = parse(&doc).unwrap();
        assert_eq!(d.root.attr("v"), Some(value));
        assert_eq!(d.root.text(), value);
        assert!(matches!(escape_text("plain"), std::borrow::Cow::Borrowed(_)));
    }
}
