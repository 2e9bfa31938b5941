//! The key layout of the whole database: every key is built and parsed here, so the
//! layout below is the only description of it and no other module spells a key.
//!
//! # Key layout (one sled tree; integers big-endian, ids zero-padded so keys sort)
//! ```text
//! meta/jwt_key              32 random bytes: the HS256 key that signs access tokens
//! meta/jwt_key_previous     the key before the last rotation (its tokens still verify)
//! meta/location_key         32 random bytes: the MAC key of payload locations' tokens
//! meta/admin_token_hash     hex SHA-256 of the generated admin token
//! meta/secrets_sealed_with  the id of the key every stored secret is sealed under (text)
//! meta/clock_offset_ms      i64: the test clock's offset from the system clock
//! meta/demo_account         u64: the id of the Demo account made on first start
//! meta/tlist_built, meta/rkey_built, meta/pixin_built  present once a backfill of that
//!                           index has run
//! meta/applied_seq          u64: the last journal record the snapshot holds (commit.rs)
//! meta/id_floor             u64: local ids below it were handed out (commit.rs)
//! meta/record_format        u8: the binary record format the data is in (migrate.rs)
//! meta/rail_held           text: why the SPI rail of this store is held (a restore or a
//!                           migration made it: another node may still read its streams);
//!                           deleted by `pixgw rail release` or POST /admin/rail/release
//! meta/spi_kept_since       i64 ms: since when every SPI payout's message is kept before it
//!                           leaves (the first start of a release that keeps them)
//! seq/account               u64: the last account id handed out
//! acct/{id:020}             AccountRecord (JSON)
//! client/{clientId}         ClientRecord (JSON): the account and the secret's salted hash
//! cert/{fingerprint}        CertificateRecord (JSON)
//! acct_cert/{id:020}/{fp}   empty: the index of an account's certificates
//! ledger/{id:020}           LedgerState (codec.rs): balance, limit counters, totals
//! tx/{local:020}            Transaction (codec.rs), by its numeric local id
//! txid/{uuid}               u64: local id by transactionId, only for a transactionId that
//!                           does not carry its local id (those made before 2026-11-23)
//! e2e/{endToEndId}          u64: local id by end-to-end id, only for an id that does not
//!                           carry its local id (received PIX: the payer's bank made it)
//! tlist/{id:020}/{created_ms:013}/{local:020}  2 bytes (status, operation): the list index,
//!                           also every transaction of the account, oldest first (releases
//!                           before the journal also wrote `atx/{id}/{local}`, now unused)
//! pixin/{id:020}/{received_ms:013}/{local:020}  empty: the PIX the account received, by
//!                           when the money arrived (a paid charge's payment, not its
//!                           creation): `GET /pix` selects and orders by it
//! tcnt/{id:020}/{yyyymmdd}/{status}{operation}  i64: list entries per Sao Paulo day, kept
//!                           by the committer (CountedIndex), so totals need no scan
//! ext/{id:020}/{externalId} u64: the externalId index (interface.md "Idempotency")
//! idem/{id:020}/{key}       JSON [local id, request hash]: `/dict/pix` idempotency keys
//! pend/{id:020}/{local:020} Money (codec.rs): the hold of a pending debit
//! copen/{id:020}/{local:020} empty: an open charge (PENDING, not yet paid or expired)
//! ctxid/{id:020}/{txid}     u64: a charge by the txid of its BR Code
//! outbox/{seq:020}          OutboxEvent (codec.rs): an event whose delivery has not ended
//! whst/{seq:020}            DeliveryState (JSON): attempts made on it, when the next is due
//! whlog/{id:020}/{log:020}  DeliveryLog (JSON): one attempt (or resend) of a webhook
//! whcfg/{id:020}/{type}     WebhookConfig (JSON): one endpoint per account and event type
//! med/{id:020}/{med:020}    Med (JSON): the account's MED cases; a MED's id is also the id
//!                           of its hold in the ledger
//! rkey/{receivingKey}       u64: the account whose receiving key this is (on-us payments),
//!                           and every key registered for an account in the directory
//! akey/{id:020}/{key}       KeyRecord (JSON): a key registered for the account (its type,
//!                           when), listed by account
//! dictupd/{id:020}/{key}    UTF-8 text: the holder's name the DICT's entry of the key must
//!                           take (a rename, written with it); deleted once the DICT has it
//!                           (the key updates poller sends them)
//! reqkey/{id:020}/{sha256}  RequestRecord (JSON): a request made with an Idempotency-Key
//!                           (the SHA-256 of the key), started or with its response
//! onus/{endToEndId}         OnUsCredit (JSON): a credit owed to an account of this gateway,
//!                           written with the payer's settlement, deleted with the credit
//! spiin/{id}                Incoming (JSON): a payment or return in from the SPI that its
//!                           account accepted (by end-to-end or return id), deleted when the
//!                           SPI settles or rejects it
//! unmatched/{sha256}        Unmatched (JSON): a message the rail read and could not apply,
//!                           with its text, until an operator resolves it; keyed by the
//!                           SHA-256 of the message, so a message read again is one item
//! credprop/{id:020}/{ref}  CreditProposal (JSON): an operator credit above the
//!                           single-operator bound, proposed, waiting for a second operator
//! railres/{id}              Resolution (JSON): an operator's proposal to close an unmatched
//!                           rail item or an aged payout, and its approval by another
//! spisent/{id}              SentMessage (JSON): a payout's SPI message (by end-to-end or
//!                           return id) as built, signed and first stored, with how many
//!                           times it was posted; every resend posts these bytes
//! spires/{resourceId}       JSON [id, attempt]: the payout a `PI-ResourceId` that ICOM
//!                           answered belongs to, and which posting of its message got it
//! spitaken/{id}             JSON number: the posting of payout id's message that ICOM
//!                           took (201), written with its resource ids; a start does not
//!                           post such a message again
//! spistream/{n:020}         text: the `PI-Pull-Next` of reader n's ICOM stream, written once
//!                           everything read before it is on disk (so closing the stream there
//!                           confirms nothing unrecorded); a start closes what is left
//! rec/{id:020}/{local:020}  Recurrence (JSON): a Pix Automático recurrence with its
//!                           solicitations; its idRec carries the local id
//! solrec/{id:020}/{local:020}  u64: the recurrence a solicitation (by its own local id,
//!                           which its idSolicRec carries) belongs to
//! recopen/{id:020}/{local:020}  empty: a recurrence whose solicitation awaits an answer,
//!                           or whose next charge the gateway sends by itself (its actor
//!                           keeps a timer for either; resumed at start)
//! locrec/{id:020}/{local:020}  LocRec (JSON): a recurrence's location (journey 2); its id
//!                           is the local id
//! cobr/{id:020}/{local:020} Cobr (JSON): a recurring charge with its attempts
//! cobrtx/{id:020}/{txid}    u64: a recurring charge by its txid
//! cobropen/{id:020}/{local:020}  empty: a recurring charge still ATIVA (its actor keeps a
//!                           timer for its next attempt or the end of its retry window)
//! claim/{id:020}/{local:020}  Claim (JSON): the account's copy of a DICT key claim
//!                           (domain::claim), as claimer or donor
//! claimid/{claimId}/{role}  JSON [account, local]: a claim by the DICT's id and this
//!                           gateway's side (both, when a key moves between two accounts)
//! claimopen/{id:020}/{local:020}  empty: a claim not yet CANCELLED or COMPLETED, whose
//!                           steps the gateway may owe (the claims poller reads them)
//! meta/dict_claims_after    text (RFC 3339): the DICT's claims changed before it are all
//!                           recorded; the next list asks from there
//! medlive/{reportId}        JSON [account, med]: a MED 2.0 case still live (open, or
//!                           approved and awaiting its return), by its infraction report
//!                           (the recovery poller looks for those the DICT cancelled)
//! frec/{id:020}/{local:020} Recovery (JSON): a MED 2.0 contest of a Pix the account sent,
//!                           and the DICT's funds recovery of it (domain::recovery)
//! frece2e/{endToEndId}      JSON [account, local]: the contest of a payment (one each)
//! frecdict/{recoveryId}     JSON [account, local]: a contest by the DICT's recovery id
//! frecopen/{id:020}/{local:020}  empty: a contest not yet COMPLETED or CANCELLED (the
//!                           recovery poller follows them)
//! meta/dict_events_cursor   text: where the DICT's next list of event notifications starts
//! meta/dict_cid_events/{keyType}  text (RFC 3339): the DICT's CID events of the key type
//!                           before it are reflected in our keys; a difference reads from it
//! payrec/{payer:020}/{local:020}  u64: the receiver's account of a recurrence (by its local
//!                           id) offered to an account of this gateway as its payer (on
//!                           us); written by the receiver's actor, read by the payer's routes
//! ```
//!
//! A key is built by a function named after its family; a family scanned by prefix also
//! has a `_prefix` function. Parsers answer `None` for a key that is not of their family.

use chrono::{DateTime, Datelike, NaiveDate, Utc};
use uuid::Uuid;

use super::{CountedIndex, Paging};
use crate::domain::certificate::Fingerprint;
use crate::domain::ids::{AccountId, ClientId};
use crate::domain::listing::local_day;

/// The keys kept in pages (see `paged.rs`): written in key order on the payment path, so a
/// checkpoint writes a page for many of them. Each shape keeps a page under about 7 KiB at
/// the rates one node reaches, so no sled node of 17 of them goes to a blob file (`paged.rs`).
pub const PAGES: &[Paging] = &[
    // tx/{local:020}: 50 local ids a page (a cash-out takes two, its transaction and its
    // event, so about 25 transactions of about 200 bytes: 5 KiB).
    Paging { prefix: b"tx/", page_len: 21, halves: true },
    // tlist/{id:020}/{created_ms:013}/{local:020}: an account's entries of 10 ms (30 bytes
    // each in the page, so 4 KiB at 14,000 cash-outs/s).
    Paging { prefix: b"tlist/", page_len: 39, halves: false },
    // whlog/{id:020}/{log:020}: 100 log ids a page.
    Paging { prefix: b"whlog/", page_len: 45, halves: false },
];

pub const JWT_KEY: &[u8] = b"meta/jwt_key";
/// The token-signing key before the last rotation: its tokens verify until they expire.
pub const JWT_KEY_PREVIOUS: &[u8] = b"meta/jwt_key_previous";
/// The key of the payload locations' MACs (`domain::location`): kept apart from the
/// token-signing key so that rotating one never moves the other.
pub const LOCATION_KEY: &[u8] = b"meta/location_key";
pub const ADMIN_TOKEN_HASH: &[u8] = b"meta/admin_token_hash";
/// The id of the key that sealed every secret of the store (`auth::sealing`), present once
/// a start with a key file sealed them all.
pub const SECRETS_SEALED_WITH: &[u8] = b"meta/secrets_sealed_with";
pub const CLOCK_OFFSET: &[u8] = b"meta/clock_offset_ms";
pub const DEMO_ACCOUNT: &[u8] = b"meta/demo_account";
/// Present once the list index covers every transaction (see `backfill_transaction_index`).
pub const TLIST_BUILT: &[u8] = b"meta/tlist_built";
/// Present once every account's receiving key is indexed (see `backfill_receiving_keys`).
pub const RKEY_BUILT: &[u8] = b"meta/rkey_built";
/// Present once every received PIX is in the `pixin/` index (see `backfill_received_index`).
pub const PIXIN_BUILT: &[u8] = b"meta/pixin_built";
pub const SEQ_ACCOUNT: &[u8] = b"seq/account";
/// The storage engine's own: see `commit.rs` and `migrate.rs`.
pub const APPLIED_SEQ: &[u8] = b"meta/applied_seq";
pub const ID_FLOOR: &[u8] = b"meta/id_floor";
pub const RECORD_FORMAT: &[u8] = b"meta/record_format";
/// The newest data version of a release that has served from this store (big-endian u32).
pub const DATA_VERSION: &[u8] = b"meta/data_version";
/// Present while the SPI rail of this store is held (see `rail::spi::rail::Hold`).
pub const RAIL_HELD: &[u8] = b"meta/rail_held";
/// Since when the SPI rail keeps every payout's message before it leaves (`rail::spi::sent`).
pub const SPI_KEPT_SINCE: &[u8] = b"meta/spi_kept_since";

pub const ACCOUNTS: &[u8] = b"acct/";
pub const TRANSACTIONS: &[u8] = b"tx/";
pub const LEDGERS: &[u8] = b"ledger/";
pub const TRANSACTION_LIST: &[u8] = b"tlist/";
pub const PENDING: &[u8] = b"pend/";
pub const OPEN_CHARGES: &[u8] = b"copen/";
pub const OPEN_RECS: &[u8] = b"recopen/";
pub const OPEN_COBRS: &[u8] = b"cobropen/";
pub const OUTBOX: &[u8] = b"outbox/";
pub const ON_US: &[u8] = b"onus/";
pub const INCOMING: &[u8] = b"spiin/";
pub const UNMATCHED: &[u8] = b"unmatched/";
pub const SPI_SENT: &[u8] = b"spisent/";
pub const SPI_STREAMS: &[u8] = b"spistream/";
pub const RAIL_RESOLUTIONS: &[u8] = b"railres/";

/// A key of the layout: texts as they are, numbers zero-padded to a fixed width so keys
/// sort by them. (Built by hand: these are made several times per payment, and `format!`
/// showed in the profile.)
pub(super) struct Key(Vec<u8>);

impl Key {
    fn new(prefix: &str) -> Key {
        let mut v = Vec::with_capacity(64);
        v.extend_from_slice(prefix.as_bytes());
        Key(v)
    }

    fn text(mut self, s: &str) -> Key {
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    /// `n` in decimal, zero-padded to `width` digits (wider if it needs more).
    fn num(mut self, mut n: u64, width: usize) -> Key {
        let mut digits = [b'0'; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let start = at.min(digits.len() - width.min(digits.len()));
        self.0.extend_from_slice(&digits[start..]);
        self
    }

    fn id(self, id: AccountId) -> Key {
        self.num(id.get(), 20)
    }

    fn done(self) -> Vec<u8> {
        self.0
    }
}

pub fn account(id: AccountId) -> Vec<u8> {
    Key::new("acct/").id(id).done()
}

/// `acctreq/{requestId}` -> u64 account id: the account an operator's `requestId` made, so
/// the same request again answers that account instead of making another.
pub fn account_request(request_id: &str) -> Vec<u8> {
    format!("acctreq/{request_id}").into_bytes()
}

pub fn client(id: &ClientId) -> Vec<u8> {
    Key::new("client/").text(&id.to_string()).done()
}

pub fn certificate(fp: &Fingerprint) -> Vec<u8> {
    Key::new("cert/").text(fp.as_str()).done()
}

pub fn account_certificates_prefix(id: AccountId) -> Vec<u8> {
    Key::new("acct_cert/").id(id).text("/").done()
}

pub fn account_certificate(id: AccountId, fp: &Fingerprint) -> Vec<u8> {
    Key::new("acct_cert/").id(id).text("/").text(fp.as_str()).done()
}

/// The fingerprint at the end of an `acct_cert/` key.
pub fn fingerprint_of(key: &[u8]) -> Option<Fingerprint> {
    let text = std::str::from_utf8(key).ok()?.strip_prefix("acct_cert/")?;
    Fingerprint::parse(text.get(21..)?)
}

pub fn receiving_key(key: &str) -> Vec<u8> {
    Key::new("rkey/").text(key).done()
}

pub fn account_key(id: AccountId, key: &str) -> Vec<u8> {
    Key::new("akey/").id(id).text("/").text(key).done()
}

pub fn key_update(id: AccountId, key: &str) -> Vec<u8> {
    Key::new("dictupd/").id(id).text("/").text(key).done()
}

/// The prefix of every pending update of a DICT entry ([`key_update`]).
pub const KEY_UPDATES: &[u8] = b"dictupd/";

pub fn account_keys_prefix(id: AccountId) -> Vec<u8> {
    Key::new("akey/").id(id).text("/").done()
}

pub fn ledger(id: AccountId) -> Vec<u8> {
    Key::new("ledger/").id(id).done()
}

pub fn transaction(local: u64) -> Vec<u8> {
    Key::new("tx/").num(local, 20).done()
}

pub fn transaction_id(id: &Uuid) -> Vec<u8> {
    Key::new("txid/").text(&id.to_string()).done()
}

pub fn end_to_end(e2e: &str) -> Vec<u8> {
    Key::new("e2e/").text(e2e).done()
}

pub fn list_entry(id: AccountId, created: DateTime<Utc>, local: u64) -> Vec<u8> {
    let millis = u64::try_from(created.timestamp_millis()).unwrap_or(0);
    Key::new("tlist/").id(id).text("/").num(millis, 13).text("/").num(local, 20).done()
}

pub fn list_prefix(id: AccountId) -> Vec<u8> {
    Key::new("tlist/").id(id).text("/").done()
}

/// The first list key of `id` created at `millis` or later.
pub fn list_from(id: AccountId, millis: u64) -> Vec<u8> {
    Key::new("tlist/").id(id).text("/").num(millis, 13).text("/").done()
}

/// A PIX `id` received, at the instant its money arrived.
pub fn received_entry(id: AccountId, at: DateTime<Utc>, local: u64) -> Vec<u8> {
    let millis = u64::try_from(at.timestamp_millis()).unwrap_or(0);
    Key::new("pixin/").id(id).text("/").num(millis, 13).text("/").num(local, 20).done()
}

/// The first `pixin/` key of `id` received at `millis` or later.
pub fn received_from(id: AccountId, millis: u64) -> Vec<u8> {
    Key::new("pixin/").id(id).text("/").num(millis, 13).text("/").done()
}

/// The counters of `id`'s list entries on the Sao Paulo day `day`.
pub fn list_counters_prefix(id: AccountId, day: NaiveDate) -> Vec<u8> {
    Key::new("tcnt/").id(id).text("/").num(date_number(day), 8).text("/").done()
}

fn date_number(day: NaiveDate) -> u64 {
    u64::try_from(day.year()).unwrap_or(0) * 10_000 + u64::from(day.month()) * 100 + u64::from(day.day())
}

/// The list index's counter of an entry: its account, Sao Paulo day, status and operation.
pub fn list_counter(key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(key).ok()?.strip_prefix("tlist/")?;
    let account = text.get(..20)?;
    let millis = text.get(21..34)?.parse::<i64>().ok()?;
    let day = local_day(DateTime::from_timestamp_millis(millis)?);
    let summary = std::str::from_utf8(value).ok()?;
    Some(Key::new("tcnt/").text(account).text("/").num(date_number(day), 8).text("/").text(summary).done())
}

/// The index of the transactions list, for the committer to count.
pub fn list_index() -> CountedIndex {
    CountedIndex { prefix: TRANSACTION_LIST, counter: list_counter }
}

pub fn external_id(id: AccountId, external_id: &str) -> Vec<u8> {
    Key::new("ext/").id(id).text("/").text(external_id).done()
}

pub fn dict_idempotency(id: AccountId, key: &str) -> Vec<u8> {
    Key::new("idem/").id(id).text("/").text(key).done()
}

pub fn pending(id: AccountId, local: u64) -> Vec<u8> {
    Key::new("pend/").id(id).text("/").num(local, 20).done()
}

pub fn pending_prefix(id: AccountId) -> Vec<u8> {
    Key::new("pend/").id(id).text("/").done()
}

pub fn open_charge(id: AccountId, local: u64) -> Vec<u8> {
    Key::new("copen/").id(id).text("/").num(local, 20).done()
}

pub fn open_charges_prefix(id: AccountId) -> Vec<u8> {
    Key::new("copen/").id(id).text("/").done()
}

/// The account of a `pend/`, `copen/`, `recopen/` or `cobropen/` key.
/// The local id a `pend/` key holds.
pub fn local_of_pending(key: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(key).ok()?.strip_prefix("pend/")?;
    text.rsplit_once('/')?.1.parse().ok()
}

pub fn account_of_hold(key: &[u8]) -> Option<AccountId> {
    let text = std::str::from_utf8(key).ok()?;
    let rest = text
        .strip_prefix("pend/")
        .or_else(|| text.strip_prefix("copen/"))
        .or_else(|| text.strip_prefix("recopen/"))
        .or_else(|| text.strip_prefix("cobropen/"))?;
    rest.split('/').next()?.parse().ok().and_then(AccountId::new)
}

/// The local id at the end of a key that ends with one (`pend/{id}/{local}`,
/// `copen/{id}/{local}`, `tlist/{id}/{ms}/{local}`).
pub fn local_at_end(key: &[u8]) -> Option<u64> {
    std::str::from_utf8(key).ok()?.rsplit('/').next()?.parse().ok()
}

pub fn charge_txid(id: AccountId, txid: &str) -> Vec<u8> {
    Key::new("ctxid/").id(id).text("/").text(txid).done()
}

pub fn outbox(seq: u64) -> Vec<u8> {
    Key::new("outbox/").num(seq, 20).done()
}

/// The sequence number of an `outbox/` key.
pub fn outbox_seq(key: &[u8]) -> Option<u64> {
    std::str::from_utf8(key.strip_prefix(OUTBOX)?).ok()?.parse().ok()
}

pub fn delivery_state(seq: u64) -> Vec<u8> {
    Key::new("whst/").num(seq, 20).done()
}

/// `account` is an account id as the delivery log records it.
pub fn delivery_log(account: u64, log: u64) -> Vec<u8> {
    Key::new("whlog/").num(account, 20).text("/").num(log, 20).done()
}

/// The range of `id`'s delivery logs: `[from, to)`.
pub fn delivery_logs_range(id: AccountId) -> (Vec<u8>, Vec<u8>) {
    // '0' sorts right after '/'.
    (Key::new("whlog/").id(id).text("/").done(), Key::new("whlog/").id(id).text("0").done())
}

/// `account` is an account id as the webhook configuration records it.
pub fn webhook_config(account: u64, event_type: &str) -> Vec<u8> {
    Key::new("whcfg/").num(account, 20).text("/").text(event_type).done()
}

pub fn webhook_configs_prefix(id: AccountId) -> Vec<u8> {
    Key::new("whcfg/").id(id).text("/").done()
}

/// `account` is an account id as the MED case records it.
pub fn med(account: u64, med: u64) -> Vec<u8> {
    Key::new("med/").num(account, 20).text("/").num(med, 20).done()
}

/// The range of `id`'s MED cases: `[from, to)`.
pub fn meds_range(id: AccountId) -> (Vec<u8>, Vec<u8>) {
    (Key::new("med/").id(id).text("/").done(), Key::new("med/").id(id).text("0").done())
}

pub fn claim(account: u64, local: u64) -> Vec<u8> {
    Key::new("claim/").num(account, 20).text("/").num(local, 20).done()
}

/// The range of `id`'s claims: `[from, to)`.
pub fn claims_range(id: AccountId) -> (Vec<u8>, Vec<u8>) {
    (Key::new("claim/").id(id).text("/").done(), Key::new("claim/").id(id).text("0").done())
}

pub fn claim_id(id: &str, role: &str) -> Vec<u8> {
    Key::new("claimid/").text(id).text("/").text(role).done()
}

pub fn open_claim(account: u64, local: u64) -> Vec<u8> {
    Key::new("claimopen/").num(account, 20).text("/").num(local, 20).done()
}

pub const OPEN_CLAIMS: &[u8] = b"claimopen/";
/// See the key layout.
pub const DICT_CLAIMS_AFTER: &[u8] = b"meta/dict_claims_after";

pub fn live_case(report_id: &str) -> Vec<u8> {
    Key::new("medlive/").text(report_id).done()
}

pub const LIVE_CASES: &[u8] = b"medlive/";

pub fn recovery(account: u64, local: u64) -> Vec<u8> {
    Key::new("frec/").num(account, 20).text("/").num(local, 20).done()
}

/// The range of `id`'s contests: `[from, to)`.
pub fn recoveries_range(id: AccountId) -> (Vec<u8>, Vec<u8>) {
    (Key::new("frec/").id(id).text("/").done(), Key::new("frec/").id(id).text("0").done())
}

pub fn recovery_e2e(end_to_end_id: &str) -> Vec<u8> {
    Key::new("frece2e/").text(end_to_end_id).done()
}

pub fn recovery_dict(id: &str) -> Vec<u8> {
    Key::new("frecdict/").text(id).done()
}

pub fn open_recovery(account: u64, local: u64) -> Vec<u8> {
    Key::new("frecopen/").num(account, 20).text("/").num(local, 20).done()
}

pub const OPEN_RECOVERIES: &[u8] = b"frecopen/";
/// See the key layout.
pub const DICT_EVENTS_CURSOR: &[u8] = b"meta/dict_events_cursor";

pub fn cid_events_after(key_type: &str) -> Vec<u8> {
    Key::new("meta/dict_cid_events/").text(key_type).done()
}

pub fn rec(account: u64, local: u64) -> Vec<u8> {
    Key::new("rec/").num(account, 20).text("/").num(local, 20).done()
}

pub fn recs_prefix(id: AccountId) -> Vec<u8> {
    Key::new("rec/").id(id).text("/").done()
}

pub fn solicitation(account: u64, local: u64) -> Vec<u8> {
    Key::new("solrec/").num(account, 20).text("/").num(local, 20).done()
}

pub fn open_rec(account: u64, local: u64) -> Vec<u8> {
    Key::new("recopen/").num(account, 20).text("/").num(local, 20).done()
}

pub fn open_recs_prefix(id: AccountId) -> Vec<u8> {
    Key::new("recopen/").id(id).text("/").done()
}

pub fn locrec(account: u64, local: u64) -> Vec<u8> {
    Key::new("locrec/").num(account, 20).text("/").num(local, 20).done()
}

pub fn locrecs_prefix(id: AccountId) -> Vec<u8> {
    Key::new("locrec/").id(id).text("/").done()
}

pub fn cobr(account: u64, local: u64) -> Vec<u8> {
    Key::new("cobr/").num(account, 20).text("/").num(local, 20).done()
}

pub fn cobrs_prefix(id: AccountId) -> Vec<u8> {
    Key::new("cobr/").id(id).text("/").done()
}

pub fn cobr_txid(account: u64, txid: &str) -> Vec<u8> {
    Key::new("cobrtx/").num(account, 20).text("/").text(txid).done()
}

pub fn open_cobr(account: u64, local: u64) -> Vec<u8> {
    Key::new("cobropen/").num(account, 20).text("/").num(local, 20).done()
}

pub fn open_cobrs_prefix(id: AccountId) -> Vec<u8> {
    Key::new("cobropen/").id(id).text("/").done()
}

/// A request made with an `Idempotency-Key`: by the SHA-256 of the key, so a key of any
/// length makes a key of one length.
pub fn payer_rec(payer: u64, local: u64) -> Vec<u8> {
    Key::new("payrec/").num(payer, 20).text("/").num(local, 20).done()
}

pub fn payer_recs_prefix(payer: AccountId) -> Vec<u8> {
    Key::new("payrec/").id(payer).text("/").done()
}

pub fn request(id: AccountId, key: &str) -> Vec<u8> {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Key::new("reqkey/").id(id).text("/").text(&hex).done()
}

pub fn on_us(end_to_end_id: &str) -> Vec<u8> {
    Key::new("onus/").text(end_to_end_id).done()
}

pub fn incoming(id: &str) -> Vec<u8> {
    Key::new("spiin/").text(id).done()
}

/// An unmatched rail item, by the SHA-256 (hex) of the message it keeps.
pub fn unmatched(digest: &str) -> Vec<u8> {
    Key::new("unmatched/").text(digest).done()
}

/// A credit proposal of account `id` under the operator's `reference`.
pub fn credit_proposal(id: AccountId, reference: &str) -> Vec<u8> {
    Key::new("credprop/").id(id).text("/").text(reference).done()
}

/// An operator's resolution of a rail item, by its id.
pub fn rail_resolution(id: &str) -> Vec<u8> {
    Key::new("railres/").text(id).done()
}

/// A payout's SPI message, by its end-to-end or return id.
pub fn spi_sent(id: &str) -> Vec<u8> {
    Key::new("spisent/").text(id).done()
}

/// The payout a resource id of ICOM names.
pub fn spi_resource(resource_id: &str) -> Vec<u8> {
    Key::new("spires/").text(resource_id).done()
}

pub fn spi_taken(id: &str) -> Vec<u8> {
    Key::new("spitaken/").text(id).done()
}

pub fn spi_stream(reader: u64) -> Vec<u8> {
    Key::new("spistream/").num(reader, 20).done()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_built_with_their_numbers_zero_padded_as_the_layout_says() {
        let id = AccountId::new(42).unwrap();
        // 2025-11-23 02:00:00.123 UTC, still the 22nd in Sao Paulo.
        let at = DateTime::from_timestamp_millis(1_763_863_200_123).unwrap();
        let text = |k: Vec<u8>| String::from_utf8(k).unwrap();
        assert_eq!(transaction(7), b"tx/00000000000000000007");
        assert_eq!(transaction(u64::MAX), b"tx/18446744073709551615");
        assert_eq!(
            text(list_entry(id, at, 9)),
            format!("tlist/{:020}/{:013}/{:020}", 42, 1_763_863_200_123u64, 9)
        );
        assert_eq!(text(pending(id, 5)), format!("pend/{:020}/{:020}", 42, 5));
        assert_eq!(text(open_charge(id, 5)), format!("copen/{:020}/{:020}", 42, 5));
        assert_eq!(text(charge_txid(id, "abc")), format!("ctxid/{:020}/abc", 42));
        assert_eq!(text(med(42, 3)), format!("med/{:020}/{:020}", 42, 3));
        assert_eq!(text(webhook_config(42, "PIX_IN")), format!("whcfg/{:020}/PIX_IN", 42));
        assert_eq!(text(delivery_log(42, 8)), format!("whlog/{:020}/{:020}", 42, 8));
        assert_eq!(text(delivery_state(8)), format!("whst/{:020}", 8));
        assert_eq!(text(outbox(8)), format!("outbox/{:020}", 8));
        assert_eq!(text(list_from(id, 5)), format!("tlist/{:020}/{:013}/", 42, 5));
        assert_eq!(
            text(list_counters_prefix(id, NaiveDate::from_ymd_opt(2025, 11, 22).unwrap())),
            format!("tcnt/{:020}/20251122/", 42)
        );
        assert_eq!(text(request(id, "k")).len(), "reqkey/".len() + 20 + 1 + 64);
        // The counter of an entry: its Sao Paulo day.
        assert_eq!(
            list_counter(&list_entry(id, at, 9), b"PW").map(String::from_utf8),
            Some(Ok(format!("tcnt/{:020}/20251122/PW", 42)))
        );
    }

    #[test]
    fn parsers_read_back_what_builders_wrote_and_refuse_other_families() {
        let id = AccountId::new(42).unwrap();
        assert_eq!(outbox_seq(&outbox(17)), Some(17));
        assert_eq!(outbox_seq(&delivery_state(17)), None);
        assert_eq!(account_of_hold(&pending(id, 3)), Some(id));
        assert_eq!(account_of_hold(&open_charge(id, 3)), Some(id));
        assert_eq!(account_of_hold(&ledger(id)), None);
        assert_eq!(local_at_end(&open_charge(id, 3)), Some(3));
        assert_eq!(local_at_end(&list_entry(id, DateTime::UNIX_EPOCH, 4)), Some(4));
        let fp = Fingerprint::parse(&"ab".repeat(32)).unwrap();
        assert_eq!(fingerprint_of(&account_certificate(id, &fp)), Some(fp));
        assert_eq!(fingerprint_of(&certificate(&Fingerprint::parse(&"ab".repeat(32)).unwrap())), None);
    }
}
