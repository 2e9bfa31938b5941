//! Every reference to a document resolves inside the repository: a `name.md` that the code
//! or the docs cite exists (README.md at the top, the others in `docs/`), and a section it
//! names in quotes (`decisions.md "Webhooks"`) is a heading of that document. Nothing
//! cites a numbered section or a file outside the repository.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The text files that may cite a document.
fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs" || e == "md" || e == "sh")
                || path.file_name().is_some_and(|n| n == "run")
            {
                out.push(path);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    for dir in ["src", "tests", "benches", "docs", ".ci"] {
        walk(&root().join(dir), &mut out);
    }
    out
}

/// A document's file, by the name a reference uses.
fn document(name: &str) -> PathBuf {
    match name {
        "README" | "CHANGELOG" => root().join(format!("{name}.md")),
        other => root().join("docs").join(format!("{other}.md")),
    }
}

/// A heading as a reference names it: its text without `#`s and backticks.
fn headings(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim().replace('`', ""))
        .collect()
}

/// The text with comment markers at line starts removed and lines joined, so a reference
/// broken over two comment lines reads as one.
fn flattened(text: &str) -> String {
    text.lines()
        .map(|l| l.trim_start().trim_start_matches("//!").trim_start_matches("///").trim_start_matches("//"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every `name.md` in `text`, with the quoted section names that follow it (`name.md
/// "A", "B"` or `name.md, "A"`).
fn references(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(found) = text[at..].find(".md") {
        let end = at + found;
        let start = text[..end]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .map_or(0, |i| i + 1);
        let name = &text[start..end];
        let mut i = end + 3;
        at = i;
        let is_name_end = bytes.get(i).is_none_or(|b| !b.is_ascii_alphanumeric());
        if name.is_empty() || !is_name_end {
            continue;
        }
        let mut sections = Vec::new();
        loop {
            while bytes.get(i).is_some_and(|b| *b == b' ' || *b == b',') {
                i += 1;
            }
            if bytes.get(i) != Some(&b'"') {
                break;
            }
            let Some(close) = text[i + 1..].find('"') else { break };
            sections.push(text[i + 1..i + 1 + close].replace('`', ""));
            i += close + 2;
        }
        out.push((name.to_owned(), sections));
    }
    out
}

#[test]
fn every_cited_document_and_section_exists_in_the_repository() {
    let mut documents: HashMap<String, Vec<String>> = HashMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    for path in sources() {
        // This file names what it looks for.
        if path.ends_with("tests/api/references.rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let shown = path.strip_prefix(root()).unwrap_or(&path).display().to_string();
        for bad in ["§", "../shared", "crates.md", "style.md"] {
            if text.contains(bad) {
                problems.push(format!("{shown}: cites {bad:?}, which is not in the repository"));
            }
        }
        for (name, sections) in references(&flattened(&text)) {
            let file = document(&name);
            let Some(heads) = documents.get(&name).cloned().or_else(|| {
                let heads = headings(&std::fs::read_to_string(&file).ok()?);
                documents.insert(name.clone(), heads.clone());
                Some(heads)
            }) else {
                problems.push(format!("{shown}: {name}.md does not exist ({})", file.display()));
                continue;
            };
            for section in sections {
                checked += 1;
                if !heads.contains(&section) {
                    problems.push(format!("{shown}: {name}.md has no section {section:?}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{} broken references:\n{}", problems.len(), problems.join("\n"));
    assert!(checked >= 40, "only {checked} section references found: is the scan reading the sources?");
}

#[test]
fn the_reference_reader_finds_names_and_sections() {
    let text =
        flattened("x (interface.md \"A\", \"B `c`\") and\n//! decisions.md, \"Web\n//! hooks\" and foo.mdx");
    assert_eq!(
        references(&text),
        vec![
            ("interface".to_owned(), vec!["A".to_owned(), "B c".to_owned()]),
            ("decisions".to_owned(), vec!["Web hooks".to_owned()]),
        ]
    );
    assert_eq!(headings("# T\n## `GET /x`\ntext"), vec!["T", "GET /x"]);
}

#[test]
fn the_contract_document_has_a_section_for_every_route_and_every_token_code() {
    let text = std::fs::read_to_string(document("interface")).unwrap();
    let heads = headings(&text);
    let mut registered = Vec::new();
    let _app = actix_web::App::new().configure(|cfg| registered = pixgw::http::routes(cfg));
    assert!(registered.len() >= 40, "{}", registered.len());
    let missing: Vec<String> = registered
        .iter()
        .map(|(method, path)| format!("{method} {path}"))
        .filter(|route| !heads.contains(route))
        .collect();
    assert!(missing.is_empty(), "docs/interface.md has no section for {missing:?}");
    for code in pixgw::telemetry::TOKEN_FAILURE_CODES {
        assert!(text.contains(&format!("`{code}`")), "docs/interface.md does not name {code}");
    }
}

/// Rounding is said one way everywhere: half away from zero (docs/decisions.md "Money out:
/// rules"). docs/interface.md once said half-even while the server and decisions.md did not.
#[test]
fn every_document_rounds_money_the_same_way() {
    for path in sources().into_iter().filter(|p| p.extension().is_some_and(|e| e == "md")) {
        let text = flattened(&std::fs::read_to_string(&path).unwrap()).to_lowercase();
        for other in ["half-even", "half even", "banker's rounding", "half to even"] {
            for (at, _) in text.match_indices(other) {
                // Naming the rule that was not chosen is fine; using it is not.
                let around = &text[at.saturating_sub(20)..(at + 40).min(text.len())];
                assert!(
                    around.contains("not half") || around.contains("half-even would"),
                    "{}: {around}",
                    path.display()
                );
            }
        }
    }
}

/// docs/interface.md "Money" says which routes take amounts as numbers and which as strings,
/// route by route, as the server does (the tests of each route pin the server's side). It
/// once said "family B takes strings", which `/dict/pix` and the balances never did.
#[test]
fn the_money_section_names_the_type_of_every_amount_by_route() {
    let text = std::fs::read_to_string(document("interface")).unwrap();
    let money = text.split("### Money").nth(1).unwrap().split("\n### ").next().unwrap();
    let (numbers, strings) = money.split_once("**Strings").expect("a part for the string amounts");
    for route in ["`GET /accounts/balances`", "`GET /balance`", "`POST /dict/pix`", "family A", "sandbox"] {
        assert!(numbers.contains(route), "the numbers part does not name {route}");
    }
    for route in ["`/cob`", "`/cobv`", "`/pix`", "devolução"] {
        assert!(strings.contains(route), "the strings part does not name {route}");
    }
    assert!(!money.to_lowercase().contains("family b takes"), "{money}");
}
