//! [`Cause`]: why something failed, kept as the error itself (with its own causes) rather
//! than flattened to a text, and cheap to clone so it can travel in actor replies.
//!
//! The HTTP layer never shows a cause to a client (a 500 or a 503 says only that it
//! happened); it logs the whole chain, from the outermost error to the root
//! ([`Chain`]).

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// An error kept with its chain of sources.
#[derive(Clone)]
pub struct Cause(Arc<dyn Error + Send + Sync>);

/// A cause that is only a sentence: the place that found the failure explains it.
#[derive(Debug)]
struct Message(String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Message {}

impl Cause {
    pub fn new(e: impl Error + Send + Sync + 'static) -> Cause {
        Cause(Arc::new(e))
    }

    pub fn msg(text: impl Into<String>) -> Cause {
        Cause(Arc::new(Message(text.into())))
    }

    /// This cause with `context` said in front of it (the cause stays its source).
    pub fn context(self, context: impl Into<String>) -> Cause {
        Cause::new(Context { text: context.into(), source: self })
    }
}

#[derive(Debug)]
struct Context {
    text: String,
    source: Cause,
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Error for Context {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.source)
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Chain(self))
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl Error for Cause {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

/// Displays an error and each of its sources, outermost first: `a: b: c`.
pub struct Chain<'a>(pub &'a (dyn Error + 'a));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        while let Some(e) = next {
            write!(f, ": {e}")?;
            next = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Cause);

    #[test]
    fn the_chain_shows_every_source_outermost_first() {
        let root = Cause::new(std::io::Error::other("disk on fire")).context("flushing the journal");
        let e = Outer(root.clone());
        assert_eq!(Chain(&e).to_string(), "outer: flushing the journal: disk on fire");
        assert_eq!(root.to_string(), "flushing the journal");
        assert_eq!(format!("{root:?}"), "flushing the journal: disk on fire");
        assert_eq!(Cause::msg("plain").to_string(), "plain");
    }
}
