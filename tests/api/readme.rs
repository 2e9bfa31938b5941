//! README's walkthroughs run as written: every `sh` block from "From start to token" to
//! "Reports and MED", command by command, in bash, against a fresh server (a subprocess on
//! the test clock, as README says to start it for the clock's block). Three things change,
//! and only these: the server's address for `127.0.0.1:8080`, its data dir for `data/run`,
//! and each `<placeholder>` for the value the walkthrough has reached by then (the table
//! [`placeholder`]; a placeholder it does not know fails the test, so README cannot grow one
//! a reader could not fill). A command whose answer is an error body fails the test.
//!
//! The one block of those that names a second account (the payer on us, `$PAYER`) needs
//! what its prose describes first: the test makes that account, its token and an on-us
//! solicitation with the same requests README's earlier blocks show.
//!
//! The blocks after these start processes of their own (a release build serving with other
//! flags, the webhook receiver, backups, a PostgreSQL pair, the SPI simulator, the load
//! tool); the tests of each (deliveries.rs, backup.rs, postgres.rs, spi.rs, load.rs, and
//! `.ci/run` for the two nodes behind nginx) exercise what those blocks show.

use std::collections::HashMap;
use std::process::Command;

use chrono::{Duration, Utc};
use serde_json::{json, Value};

use crate::helpers::{spawn_with, Options, TestApp};

/// (The path is split so that no citation scanner reads it as one.)
const README: &str = include_str!(concat!("../../README", ".md"));

/// The `sh` blocks between two headings of README, in order.
fn blocks(from: &str, to: &str) -> Vec<String> {
    let start = README.find(from).expect("README has the first heading");
    let end = start + README[start..].find(to).expect("README has the last heading");
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in README[start..end].lines() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```sh") => current = Some(String::new()),
            (Some(block), l) if l.starts_with("```") => {
                out.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

/// A block's commands: a command ends with a line that does not end in `\`, outside quotes,
/// `$(...)` and `{...}`. Comment lines between commands are dropped.
fn commands(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cmd = String::new();
    let (mut single, mut double, mut depth) = (false, false, 0i32);
    for line in block.lines() {
        if cmd.is_empty() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        let mut prev = ' ';
        for c in line.chars() {
            match c {
                '\'' if !double => single = !single,
                '"' if !single && prev != '\\' => double = !double,
                // A comment ends the line's code (outside quotes).
                '#' if !single && !double && (prev == ' ' || prev == '\t') => break,
                '(' | '{' if !single && !double => depth += 1,
                ')' | '}' if !single && !double => depth -= 1,
                _ => {}
            }
            prev = c;
        }
        cmd.push_str(line);
        cmd.push('\n');
        if !single && !double && depth <= 0 && !line.trim_end().ends_with('\\') {
            out.push(std::mem::take(&mut cmd));
            depth = 0;
        }
    }
    assert!(cmd.trim().is_empty(), "a command never ends: {cmd}");
    out
}

/// What the walkthrough has reached: the latest value of each member answered at the top
/// of a JSON answer, and the values the test chose.
struct Walk {
    seen: HashMap<String, String>,
    due: chrono::NaiveDate,
    txid: String,
}

impl Walk {
    fn latest(&self, member: &str) -> String {
        self.seen.get(member).cloned().unwrap_or_else(|| panic!("no answer so far had {member}"))
    }
}

/// The value of a README placeholder at this point of the walk.
fn placeholder(name: &str, walk: &Walk) -> String {
    match name {
        "transactionId" | "idRec" | "idSolicRec" | "id" => walk.latest(name),
        "txid" | "txid of 26 to 35 letters and digits" => walk.txid.clone(),
        "an RFC 3339 time within 30 days" => (Utc::now() + Duration::days(1)).to_rfc3339(),
        "an RFC 3339 time a day ago" => {
            (Utc::now() - Duration::days(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        }
        "an RFC 3339 time a day ahead" => {
            (Utc::now() + Duration::days(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        }
        "a date 2 to 10 days from today" => walk.due.to_string(),
        "86400 x (days to the due date + 1)" => {
            let days = (walk.due - crate::cobr::today()).num_days() + 1;
            (86_400 * days).to_string()
        }
        "a date within 7 days" => (walk.due + Duration::days(2)).to_string(),
        "endToEndId of a received PIX" => walk.latest("receivedEndToEndId"),
        other => panic!("README has a placeholder no reader could fill: <{other}>"),
    }
}

/// `cmd` with the server's address and data dir, and its placeholders filled.
fn fill(cmd: &str, app: &TestApp, walk: &Walk) -> String {
    let mut out = cmd
        .replace("http://127.0.0.1:8080", &app.base)
        .replace("data/run", &app.data_dir().display().to_string());
    while let Some(open) = out.find('<') {
        let Some(len) = out[open..].find('>') else { break };
        let name = out[open + 1..open + len].to_owned();
        // `<` in a redirection or a comparison is not a placeholder: none appears in these
        // blocks, and a name with a quote or a newline is not one.
        assert!(!name.contains(['\n', '\'', '"']), "an unclosed placeholder in {cmd}");
        out.replace_range(open..=open + len, &placeholder(&name, walk));
    }
    out
}

/// Whether a command defines something later commands use (a variable or a function).
fn is_definition(cmd: &str) -> bool {
    let head: String = cmd.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    !head.is_empty() && (cmd[head.len()..].starts_with('=') || cmd[head.len()..].starts_with("()"))
}

/// Runs `cmd` in bash after the definitions so far; answers its standard output.
fn bash(definitions: &str, cmd: &str) -> String {
    let script = format!("set -euo pipefail\n{definitions}\n{cmd}");
    let out = Command::new("bash").arg("-c").arg(&script).output().expect("bash runs");
    assert!(out.status.success(), "{cmd}\nfailed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Records the top-level members of a JSON answer; fails on an error body.
fn record(answer: &str, cmd: &str, walk: &mut Walk) {
    let Ok(v) = serde_json::from_str::<Value>(answer.trim()) else { return };
    if let Some(code) = v.get("statusCode").and_then(Value::as_u64) {
        assert!(code < 400, "{cmd}\nanswered an error: {answer}");
    }
    let Some(o) = v.as_object() else { return };
    for (k, val) in o {
        let text = match val {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => continue,
        };
        walk.seen.insert(k.clone(), text);
    }
    // The end-to-end id of a PIX the account received (a MED names one).
    if o.get("operation").and_then(Value::as_str).is_some_and(|op| op == "PIX_IN" || op == "CASH_IN") {
        if let Some(e2e) = o.get("endToEndId").and_then(Value::as_str) {
            walk.seen.insert("receivedEndToEndId".into(), e2e.to_owned());
        }
    }
}

#[actix_rt::test]
async fn readmes_walkthroughs_run_as_written_on_a_fresh_server() {
    let app = spawn_with(Options::default()).await;
    let mut walk = Walk {
        seen: HashMap::new(),
        due: crate::cobr::today() + Duration::days(3),
        txid: "readmewalkthroughcycle000001".into(),
    };
    let mut definitions = String::new();
    let mut ran = 0;
    let all = blocks("## From start to token", "### Webhooks (sandbox)");
    assert!(all.len() >= 8, "README's walkthroughs: {} blocks", all.len());
    for block in &all {
        if block.contains("$PAYER") {
            payer_on_us(&app, &mut definitions, &mut walk).await;
        }
        for cmd in commands(block) {
            let filled = fill(&cmd, &app, &walk);
            let answer = bash(&definitions, &filled);
            ran += 1;
            if is_definition(&filled) {
                definitions.push_str(&filled);
                definitions.push('\n');
            }
            record(&answer, &cmd, &mut walk);
            // A received PIX is read back, so its end-to-end id is known (as a reader would).
            if cmd.contains("/sandbox/pay") {
                let id = walk.latest("transactionId");
                let read = format!("curl -s {}/api/transactions/{id} -H \"$H\"", app.base);
                record(&bash(&definitions, &read), &read, &mut walk);
            }
        }
    }
    assert!(ran >= 38, "{ran} commands");
    // The walk reached its last steps: the MED was analyzed, on a received PIX.
    assert!(walk.seen.contains_key("receivedEndToEndId"), "{:?}", walk.seen.keys());
    assert_eq!(walk.seen.get("status").map(String::as_str), Some("ANALYZED"), "{:?}", walk.seen);
}

/// What the prose before the payer's block describes: another account of this gateway, its
/// token as `$PAYER`, and a recurrence of the Demo sent to it on us (`<idRec>` from then on).
async fn payer_on_us(app: &TestApp, definitions: &mut String, walk: &mut Walk) {
    let (id, client_id, secret, pem) = app.new_account_with("Bia Payer", true).await;
    let (s, t) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(s, 201, "{t}");
    definitions
        .push_str(&format!("PAYER=\"Authorization: Bearer {}\"\n", t["access_token"].as_str().unwrap()));
    let token = app.demo_token().await;
    // The server's clock moved with the walk: its dates, not the machine's.
    let (s, clock) = app.admin("POST", "/admin/clock", Some(json!({"advanceSeconds": 0}))).await;
    assert_eq!(s, 200, "{clock}");
    let now: chrono::DateTime<Utc> = clock["now"].as_str().unwrap().parse().unwrap();
    let mut body = crate::rec::rec_body(json!({"valorRec": "30.00"}));
    let start = (now - Duration::hours(3)).date_naive() + Duration::days(1);
    body["calendario"]["dataInicial"] = json!(start.to_string());
    let (s, r) = crate::rec::post(app, "/rec", &token, body).await;
    assert_eq!(s, 201, "{r}");
    let id_rec = r["idRec"].as_str().unwrap().to_owned();
    let solicitation = json!({
        "idRec": id_rec,
        "destinatario": {"cpf": "52998224725", "conta": id.to_string(), "ispbParticipante": "99999999"},
        "calendario": {"dataExpiracaoSolicitacao": (now + Duration::hours(24)).to_rfc3339()},
    });
    let (s, sol) = crate::rec::post(app, "/solicrec", &token, solicitation).await;
    assert_eq!(s, 201, "{sol}");
    walk.seen.insert("idRec".into(), id_rec);
}

#[test]
fn commands_end_where_bash_would_end_them() {
    let block = "A=1\ncurl -d '{\n  \"x\": 1}' \\\n  -H y   # a comment\n# only a comment\nf() {\n  echo 1\n}\nB=$(\n  echo 1)\n";
    let cmds = commands(block);
    assert_eq!(cmds.len(), 4, "{cmds:?}");
    assert!(cmds[1].starts_with("curl") && cmds[1].contains("-H y"));
    assert!(cmds[2].starts_with("f()") && cmds[2].contains('}'));
    assert!(is_definition("A=1") && is_definition("f() {") && !is_definition("curl -s x"));
}
