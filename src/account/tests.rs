//! The account actor in-process: on the memory store under a real journal (a temp dir, so
//! faults can be injected), with the test playing the bank. What these show needs no server:
//! the write path, concurrency on one account, and the failure rule.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::*;
use crate::clock::Clock;
use crate::domain::account::{AccountName, AccountProfile};
use crate::domain::document::TaxId;
use crate::domain::ids::AccountId;
use crate::domain::ledger::{Balance, Rejection};
use crate::domain::money::Money;
use crate::domain::scenario::PayoutScenario;
use crate::domain::transaction::RailOutcome;
use crate::domain::transaction::{Counterpart, TxKind, TxStatus};
use crate::rail::sim::bank::SimulatedBank;
use crate::rail::sim::directory::Directory;
use crate::rail::{Rails, Settled};
use crate::store::journal::{Journal, JournalOptions};
use crate::store::{GroupCommit, MemoryStore, Repo, Storage};

struct Fixture {
    registry: Registry,
    clock: Arc<Clock>,
    repo: Repo,
    base: Arc<MemoryStore>,
    commit: Arc<GroupCommit>,
    account: AccountId,
    _dir: tempfile::TempDir,
}

fn m(s: &str) -> Money {
    Money::parse(s).unwrap()
}

fn fixture(balance: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = Arc::new(MemoryStore::new());
    let journal = Journal::open(dir.path(), 0, JournalOptions::default()).unwrap().journal;
    let commit =
        GroupCommit::start_with(base.clone(), Some(journal), Some(Repo::transaction_index())).unwrap();
    let storage = Storage { view: commit.view(), commit: Arc::clone(&commit) };
    let repo = Repo::new(&storage);
    let clock = Arc::new(Clock::test(0));
    let directory = Arc::new(Directory::embedded().unwrap());
    let bank = SimulatedBank::new(Arc::clone(&directory), Duration::from_secs(3600)).start();
    let profile = AccountProfile {
        name: AccountName::parse("Acme").unwrap(),
        document: TaxId::parse("11222333000181").unwrap(),
        sandbox: true,
    };
    let created = crate::admin::create_account(&repo, profile, m(balance), None, clock.now()).unwrap();
    let deps = Arc::new(Deps {
        repo: repo.clone(),
        commit: Arc::clone(&commit),
        clock: Arc::clone(&clock),
        rails: Rails { sandbox: bank.clone().recipient(), live: bank.recipient() },
        directory,
        on_us: std::sync::OnceLock::new(),
        collect: std::sync::OnceLock::new(),
        rec_locations: None,
    });
    Fixture {
        registry: Registry::new(deps, 1),
        clock,
        repo,
        base,
        commit,
        account: created.record.id,
        _dir: dir,
    }
}

/// The sandbox's payer's institution approves the solicitation `sid`.
fn sandbox_approval(sid: String) -> ChangeRec {
    let answer = crate::domain::rec::Answer::Approve { maximum: None, municipality: None };
    ChangeRec {
        rec: RecRef::Solicitation(sid.clone()),
        change: crate::domain::decide::RecChange::Answer { solicitation: sid, answer },
        payer: Some(crate::domain::rec::PayerSide::Sandbox),
    }
}

/// A cash-out the simulated bank never answers (the test answers for it).
fn cash_out(ext: &str, value: &str) -> Pay {
    Pay(PayRequest {
        kind: TxKind::CashOut,
        external_id: Some(ext.into()),
        value: m(value),
        description: None,
        counterpart: Counterpart { name: "Ana".into(), ..Counterpart::default() },
        scenario: Some(PayoutScenario::Stuck),
        document_mismatch: false,
        dict: None,
        qr_txid: None,
        automatic: false,
        end_to_end_id: None,
        rail: None,
    })
}

impl Fixture {
    fn actor(&self) -> Addr<AccountActor> {
        self.registry.get(self.account).unwrap()
    }

    async fn balance(&self, addr: &Addr<AccountActor>) -> Balance {
        addr.send(GetBalance).await.unwrap().unwrap()
    }
}

#[actix_rt::test]
async fn concurrent_cash_outs_never_overspend_and_each_external_id_moves_money_once() {
    let f = fixture("10.00");
    let addr = f.actor();
    // 20 externalIds, each sent twice at once, 1.00 each, on a balance of 10.00.
    let sends = (0..40).map(|i| addr.send(cash_out(&format!("e{}", i % 20), "1.00")));
    let replies = futures::future::join_all(sends).await;
    let mut accepted = Vec::new();
    for r in replies {
        match r.unwrap() {
            Ok(out) => accepted.push(out.tx),
            Err(CommandError::Refused(Refusal::Ledger(
                Rejection::InsufficientBalance | Rejection::DuplicateExternalId { .. },
            ))) => {}
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(accepted.len(), 10);
    let mut externals: Vec<_> = accepted.iter().map(|t| t.external_id.clone()).collect();
    externals.sort();
    externals.dedup();
    assert_eq!(externals.len(), 10, "no externalId accepted twice");
    // Acknowledged means written: each is readable in storage once its reply arrived.
    for tx in &accepted {
        assert_eq!(f.repo.transaction(tx.local_id).unwrap().map(|t| t.status), Some(TxStatus::Pending));
    }
    assert_eq!(f.balance(&addr).await, Balance { available: m("0"), blocked: m("10") });

    // The bank confirms half and rejects half; a repeated answer changes nothing.
    for (i, tx) in accepted.iter().enumerate() {
        let result =
            if i % 2 == 0 { Ok(None) } else { Err(crate::domain::transaction::ErrorCode::OrderRejected) };
        let outcome = RailOutcome { result, reason: None };
        addr.do_send(Settled { local_id: tx.local_id, outcome: outcome.clone(), on_us: None });
        addr.do_send(Settled { local_id: tx.local_id, outcome, on_us: None });
    }
    assert_eq!(f.balance(&addr).await, Balance { available: m("5"), blocked: m("0") });
    // A fresh actor, loaded from storage alone, holds the same.
    let reloaded = crate::account::AccountActor::load(
        f.repo.account(f.account).unwrap().unwrap(),
        Arc::clone(f.registry.deps()),
    );
    assert_eq!(reloaded.view().unwrap().ledger.balance(), Balance { available: m("5"), blocked: m("0") });
}

#[actix_rt::test]
async fn a_full_disk_refuses_a_command_and_applies_nothing_then_writes_resume() {
    let f = fixture("10.00");
    let addr = f.actor();
    addr.send(cash_out("a", "1.00")).await.unwrap().unwrap();
    let journal = f.commit.journal().unwrap();
    journal.faults().no_room.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(!journal.try_make_room());
    let refused = addr.send(cash_out("b", "1.00")).await.unwrap();
    assert!(matches!(refused, Err(CommandError::Unavailable(_))), "{refused:?}");
    assert_eq!(f.balance(&addr).await, Balance { available: m("9"), blocked: m("1") }, "nothing applied");
    journal.faults().no_room.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(journal.try_make_room());
    // The refused externalId was never taken.
    addr.send(cash_out("b", "1.00")).await.unwrap().unwrap();
    assert_eq!(f.balance(&addr).await, Balance { available: m("8"), blocked: m("2") });
}

#[actix_rt::test]
async fn a_storage_failure_halts_the_actor_and_the_next_one_loads_every_acknowledged_write() {
    let f = fixture("10.00");
    let addr = f.actor();
    addr.send(cash_out("a", "1.00")).await.unwrap().unwrap();
    // The next command's read of its externalId's owner fails: the actor halts, and the
    // command, of which nothing was applied, answers "unavailable" (503: retry).
    f.base.set_failing(true);
    let failed = addr.send(cash_out("b", "1.00")).await.unwrap();
    assert!(matches!(failed, Err(CommandError::Unavailable(_))), "{failed:?}");
    f.base.set_failing(false);
    // Halted: it answers nothing more, then stops (its one write landed long ago).
    loop {
        match addr.send(cash_out("c", "1.00")).await {
            Ok(reply) => assert!(matches!(reply, Err(CommandError::Unavailable(_))), "{reply:?}"),
            Err(MailboxError::Closed) => break,
            Err(e) => panic!("{e}"),
        }
    }
    // The registry starts a fresh actor, which loads the acknowledged cash-out's hold.
    let fresh = f.actor();
    assert_eq!(f.balance(&fresh).await, Balance { available: m("9"), blocked: m("1") });
    fresh.send(cash_out("b", "1.00")).await.unwrap().unwrap();
    assert_eq!(f.balance(&fresh).await, Balance { available: m("8"), blocked: m("2") });
}

#[actix_rt::test]
async fn after_a_failed_sync_nothing_is_acknowledged_and_the_actor_halts() {
    let f = fixture("10.00");
    let addr = f.actor();
    addr.send(cash_out("a", "1.00")).await.unwrap().unwrap();
    f.commit.journal().unwrap().faults().fail_sync.store(true, std::sync::atomic::Ordering::SeqCst);
    let lost = addr.send(cash_out("b", "1.00")).await.unwrap();
    assert!(matches!(lost, Err(CommandError::Unavailable(_))), "{lost:?}");
    assert_eq!(f.repo.transaction_by_external_id(f.account, "b").unwrap(), None, "never readable");
    // Every later command is refused: by the halted actor, or by storage for a new one.
    match addr.send(GetBalance).await {
        Ok(reply) => assert!(reply.is_err()),
        Err(e) => assert!(matches!(e, MailboxError::Closed)),
    }
}

#[actix_rt::test]
async fn a_transfer_queued_past_its_expiration_is_ended_by_the_actors_own_timer() {
    let f = fixture("10.00");
    // Tell the test when a hold is released (the settlement's write is durable).
    let (released, holds) = std::sync::mpsc::channel();
    assert!(f.commit.observe(
        b"pend/",
        Box::new(move |ops: &[crate::store::Op]| {
            for op in ops.iter().filter(|op| op.value().is_none()) {
                let _ = released.send(op.key().to_vec());
            }
        })
    ));
    let addr = f.actor();
    let mut transfer = cash_out("", "1.00").0;
    transfer.kind = TxKind::DictPix;
    transfer.external_id = None;
    transfer.dict = Some(DictRequest {
        idempotency_key: "k".into(),
        request_hash: "h".into(),
        priority: crate::domain::transaction::Priority::Norm,
        expiration_seconds: 1,
        currency: "BRL".into(),
    });
    let out = addr.send(Pay(transfer)).await.unwrap().unwrap();
    assert_eq!(f.balance(&addr).await, Balance { available: m("9"), blocked: m("1") });
    // Nothing tells the actor that time passed: its own timer ends the transfer.
    let key = holds.recv_timeout(Duration::from_secs(30)).expect("the hold was never released");
    assert!(String::from_utf8_lossy(&key).ends_with(&format!("{:020}", out.tx.local_id)));
    assert_eq!(f.balance(&addr).await, Balance { available: m("10"), blocked: m("0") });
    let ended = f.repo.transaction(out.tx.local_id).unwrap().unwrap();
    assert_eq!(
        (ended.status, ended.error_code),
        (TxStatus::Error, Some(crate::domain::transaction::ErrorCode::Expired))
    );
}

#[actix_rt::test]
async fn the_registry_sweep_stops_an_idle_actor_and_spares_a_busy_one() {
    let f = fixture("10.00");
    let addr = f.actor();
    // Busy: a payment the bank has not answered yet keeps it alive however long it waits.
    addr.send(cash_out("a", "1.00")).await.unwrap().unwrap();
    f.clock.advance(ACCOUNT_IDLE_STOP_SECONDS + 1).unwrap();
    f.registry.sweep();
    assert_eq!(f.balance(&addr).await.blocked, m("1"), "still there");
    assert_eq!(f.registry.live_count(), 1);
    // Once it is settled and the time has passed again, the sweep stops it.
    let pending = f.repo.transaction_by_external_id(f.account, "a").unwrap().unwrap();
    addr.do_send(Settled { local_id: pending.local_id, outcome: RailOutcome::settled(None), on_us: None });
    assert_eq!(f.balance(&addr).await.blocked, m("0"));
    f.clock.advance(ACCOUNT_IDLE_STOP_SECONDS + 1).unwrap();
    f.registry.sweep();
    // The sweep's Tick is queued ahead of this message: it meets a closed mailbox.
    assert!(matches!(addr.send(GetBalance).await, Err(MailboxError::Closed)));
    assert_eq!(f.registry.live_count(), 0);
}

#[actix_rt::test]
async fn an_on_us_credit_delivered_many_times_at_once_is_carried_out_once() {
    use crate::domain::decide::{OnUsCredit, Record};
    let f = fixture("0.00");
    let credit = OnUsCredit {
        payee: f.account,
        end_to_end_id: "E99999999202611231200A0000000042".into(),
        value: m("7.50"),
        payer_name: "Bia".into(),
        payer_document: "52998224725".into(),
        reference: None,
        paid_at: None,
        returns: None,
    };
    // Written as the payer's settlement writes it.
    let owed = f.repo.plan_batch(f.account, None, &[Record::OnUsCredit(credit.clone())], &[]).unwrap();
    f.commit.commit(owed).await.unwrap();
    let addr = f.actor();
    let sends = (0..5).map(|_| addr.send(ReceiveOnUs(credit.clone())));
    for reply in futures::future::join_all(sends).await {
        reply.unwrap().unwrap();
    }
    assert_eq!(f.balance(&addr).await, Balance { available: m("7.50"), blocked: m("0") });
    assert_eq!(f.repo.on_us_credit(&credit.end_to_end_id).unwrap(), None, "deleted with the credit");
    // Delivered again later (a restart): nothing more.
    addr.send(ReceiveOnUs(credit.clone())).await.unwrap().unwrap();
    assert_eq!(f.balance(&addr).await.available, m("7.50"));
    let received = f.repo.transaction_by_e2e(f.account, &credit.end_to_end_id).unwrap().unwrap();
    assert_eq!((received.kind, received.counterpart.name.as_str()), (TxKind::PixIn, "Bia"));
}

fn charge(ext: &str, value: &str, expiration_seconds: u32) -> CreateCharge {
    CreateCharge(ChargeRequest {
        external_id: Some(ext.into()),
        txid: None,
        cob: None,
        value: m(value),
        description: "order".into(),
        payer_name: "Ana Payer".into(),
        payer_document: Some("52998224725".into()),
        expiration_seconds,
        additional_info: Default::default(),
        scenario: None,
        splits: Vec::new(),
    })
}

fn refund(original: u64, value: &str, id: &str) -> Refund {
    Refund(RefundRequest {
        original_local_id: original,
        value: m(value),
        refund_id: Some(id.into()),
        reason: None,
        natureza: crate::domain::transaction::Natureza::Original,
        family: crate::domain::transaction::Family::A,
        scenario: None,
    })
}

fn pix_in(value: &str) -> PixIn {
    PixIn { value: m(value), payer_name: "Payer".into(), payer_document: Some("52998224725".into()) }
}

fn refused<T: std::fmt::Debug>(reply: Result<T, CommandError>) -> Refusal {
    match reply {
        Err(CommandError::Refused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[actix_rt::test]
async fn a_received_pix_is_credited_and_a_refund_of_it_holds_replays_and_settles() {
    let f = fixture("0.00");
    let addr = f.actor();
    let received = addr.send(pix_in("10.00")).await.unwrap().unwrap();
    assert_eq!(received.status, TxStatus::Confirmed);
    assert_eq!(f.balance(&addr).await, Balance { available: m("10"), blocked: m("0") });

    let (first, replayed) = addr.send(refund(received.local_id, "4.00", "r1")).await.unwrap().unwrap();
    assert!(!replayed);
    assert_eq!((first.kind, first.status), (TxKind::RefundIn, TxStatus::Pending));
    assert_eq!(f.balance(&addr).await, Balance { available: m("6"), blocked: m("4") });
    // The same id and value again: the same refund, nothing moves.
    let (again, replayed) = addr.send(refund(received.local_id, "4.00", "r1")).await.unwrap().unwrap();
    assert!(replayed);
    assert_eq!(again.local_id, first.local_id);
    assert_eq!(f.balance(&addr).await, Balance { available: m("6"), blocked: m("4") });
    // More than what is left to refund.
    let over = refused(addr.send(refund(received.local_id, "6.01", "r2")).await.unwrap());
    assert_eq!(
        over,
        Refusal::Refund(crate::domain::refunds::RefundRejection::ExceedsRefundable { refundable: m("6") })
    );
    // A refund of something the account did not receive.
    let not_received = refused(addr.send(refund(first.local_id, "1.00", "r3")).await.unwrap());
    assert_eq!(not_received, Refusal::Refund(crate::domain::refunds::RefundRejection::NotReceived));

    addr.do_send(Settled { local_id: first.local_id, outcome: RailOutcome::settled(None), on_us: None });
    assert_eq!(f.balance(&addr).await, Balance { available: m("6"), blocked: m("0") });
    assert_eq!(f.repo.transaction(first.local_id).unwrap().unwrap().status, TxStatus::Confirmed);
    assert_eq!(f.repo.transaction(received.local_id).unwrap().unwrap().refunded, m("4"));
}

#[actix_rt::test]
async fn a_charge_is_paid_once_and_a_paid_charge_cannot_be_paid_or_cancelled() {
    let f = fixture("0.00");
    let addr = f.actor();
    let created = addr.send(charge("c1", "5.00", 3600)).await.unwrap().unwrap();
    assert_eq!(created.status, TxStatus::Pending);
    assert!(created.charge.is_some());
    assert_eq!(f.balance(&addr).await, Balance { available: m("0"), blocked: m("0") });
    // Its externalId is taken like a cash-out's.
    let taken = refused(addr.send(charge("c1", "1.00", 3600)).await.unwrap());
    assert!(matches!(taken, Refusal::Ledger(Rejection::DuplicateExternalId { .. })), "{taken:?}");

    let paid = addr
        .send(PayCharge { local_id: created.local_id, payer: None, amount: None })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(paid.status, TxStatus::Confirmed);
    assert_eq!(f.balance(&addr).await, Balance { available: m("5"), blocked: m("0") });
    let twice = refused(
        addr.send(PayCharge { local_id: created.local_id, payer: None, amount: None }).await.unwrap(),
    );
    assert!(matches!(twice, Refusal::NotPayable(_)), "{twice:?}");
    let cancel = refused(addr.send(CancelCharge { local_id: created.local_id }).await.unwrap());
    assert!(matches!(cancel, Refusal::NotPayable(_)), "{cancel:?}");
    assert_eq!(f.balance(&addr).await, Balance { available: m("5"), blocked: m("0") }, "paid once");
}

#[actix_rt::test]
async fn a_charge_past_its_expiration_ends_on_the_next_tick_and_cannot_be_paid() {
    let f = fixture("0.00");
    let addr = f.actor();
    let created = addr.send(charge("c1", "5.00", 60)).await.unwrap().unwrap();
    f.clock.advance(59).unwrap();
    addr.send(Tick).await.unwrap().unwrap();
    assert_eq!(f.repo.transaction(created.local_id).unwrap().unwrap().status, TxStatus::Pending);
    f.clock.advance(1).unwrap();
    addr.send(Tick).await.unwrap().unwrap();
    let ended = f.repo.transaction(created.local_id).unwrap().unwrap();
    assert_ne!(ended.status, TxStatus::Pending, "expired at its expiration time");
    let late = refused(
        addr.send(PayCharge { local_id: created.local_id, payer: None, amount: None }).await.unwrap(),
    );
    assert!(matches!(late, Refusal::NotPayable(_)), "{late:?}");
    assert_eq!(f.balance(&addr).await, Balance { available: m("0"), blocked: m("0") });
}

/// An on-us payment made before a charge's expiration whose credit arrives after the
/// actor closed the charge pays that charge (it became a loose received PIX before); one
/// made after the expiration does not.
#[actix_rt::test]
async fn an_on_us_payment_made_in_time_pays_a_charge_closed_before_its_credit_arrived() {
    use crate::domain::decide::{OnUsCredit, Record};
    let f = fixture("0.00");
    let addr = f.actor();
    let created = addr.send(charge("c1", "5.00", 60)).await.unwrap().unwrap();
    let txid = created.charge.as_ref().unwrap().txid.clone();
    let paid_at = f.clock.now() + chrono::Duration::seconds(59);
    f.clock.advance(61).unwrap();
    addr.send(Tick).await.unwrap().unwrap();
    assert_eq!(f.repo.transaction(created.local_id).unwrap().unwrap().status, TxStatus::Error, "closed");
    let credit = |e2e: &str, at| OnUsCredit {
        payee: f.account,
        end_to_end_id: e2e.into(),
        value: m("5.00"),
        payer_name: "Bia".into(),
        payer_document: "52998224725".into(),
        reference: Some(txid.clone()),
        paid_at: Some(at),
        returns: None,
    };
    for c in [
        credit("E99999999202611231200A0000000043", paid_at),
        credit("E99999999202611231200A0000000044", paid_at + chrono::Duration::seconds(2)),
    ] {
        let owed = f.repo.plan_batch(f.account, None, &[Record::OnUsCredit(c.clone())], &[]).unwrap();
        f.commit.commit(owed).await.unwrap();
        addr.send(ReceiveOnUs(c)).await.unwrap().unwrap();
    }
    let paid = f.repo.transaction(created.local_id).unwrap().unwrap();
    assert_eq!(
        (paid.status, paid.end_to_end_id.as_str()),
        (TxStatus::Confirmed, "E99999999202611231200A0000000043")
    );
    let loose = f.repo.transaction_by_e2e(f.account, "E99999999202611231200A0000000044").unwrap().unwrap();
    assert_eq!(loose.kind, TxKind::PixIn, "paid after the expiration: a received PIX");
    assert_eq!(f.balance(&addr).await.available, m("10.00"));
}

#[actix_rt::test]
async fn a_med_blocks_the_disputed_amount_and_its_rejection_releases_it_once() {
    let f = fixture("0.00");
    let addr = f.actor();
    let received = addr.send(pix_in("10.00")).await.unwrap().unwrap();
    let open = |amount: Option<&str>| OpenMed {
        end_to_end: received.end_to_end_id.clone(),
        cause: "SCAM".into(),
        amount: amount.map(m),
        description: None,
        dict_refund_id: None,
        infraction: None,
    };
    let above = refused(addr.send(open(Some("10.01"))).await.unwrap());
    assert!(matches!(above, Refusal::Med(crate::domain::med::MedRejection::AboveOriginal(_))), "{above:?}");
    let med = addr.send(open(Some("7.00"))).await.unwrap().unwrap();
    assert_eq!(med.blocked, m("7"));
    assert_eq!(f.balance(&addr).await, Balance { available: m("3"), blocked: m("7") });
    let rejected = crate::domain::med::AnalysisResult::Rejected;
    let closed = addr
        .send(CloseMed { id: med.id, result: Some(rejected), details: None, fraud_type: None })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(closed.analysis_result, Some(rejected));
    assert_eq!(f.balance(&addr).await, Balance { available: m("10"), blocked: m("0") });
    let again = refused(
        addr.send(CloseMed { id: med.id, result: None, details: None, fraud_type: None }).await.unwrap(),
    );
    assert!(matches!(again, Refusal::Med(crate::domain::med::MedRejection::Final(_))), "{again:?}");
    assert_eq!(f.balance(&addr).await, Balance { available: m("10"), blocked: m("0") });
    assert_eq!(
        f.repo.med(f.account, med.id).unwrap().unwrap().status,
        crate::domain::med::MedStatus::Analyzed
    );
}

#[actix_rt::test]
async fn new_settings_apply_to_the_next_command() {
    let f = fixture("10.00");
    let addr = f.actor();
    let mut settings = crate::domain::account::AccountSettings::default();
    settings.limits.per_transaction = m("1.00");
    addr.send(SettingsChanged(settings)).await.unwrap();
    let over = refused(addr.send(cash_out("a", "1.01")).await.unwrap());
    assert_eq!(over, Refusal::Ledger(Rejection::PerTransactionLimit));
    assert!(addr.send(cash_out("b", "1.00")).await.unwrap().is_ok(), "a value equal to the limit");
    assert_eq!(f.balance(&addr).await, Balance { available: m("9"), blocked: m("1") });
}

#[actix_rt::test]
async fn a_revised_cobv_expires_at_its_new_last_day_not_at_its_old_one() {
    use crate::domain::cobv::{payment_day, start_of_day};
    let f = fixture("0.00");
    let addr = f.actor();
    let today = payment_day(f.clock.now());
    let days = chrono::Duration::days;
    let with_due = |due: chrono::NaiveDate| {
        let mut req = crate::domain::decide::testing::cobv_request(0);
        if let Some(v) = req.cob.as_mut().and_then(|c| c.vencimento.as_mut()) {
            v.terms.due = due;
            v.terms.validity_after_due_days = 0;
            v.terms.discount = None;
        }
        req
    };
    let created = addr.send(CreateCharge(with_due(today + days(1)))).await.unwrap().unwrap();
    let revised =
        ReviseCharge { local_id: created.local_id, request: with_due(today + days(5)), based_on: 0 };
    let revised = addr.send(revised).await.unwrap().unwrap();
    assert_eq!(revised.cobv().map(|v| v.revisao), Some(1));
    let status = || f.repo.transaction(created.local_id).unwrap().unwrap().status;
    let go_to = |at: chrono::DateTime<chrono::Utc>| {
        let seconds = (at - f.clock.now()).num_seconds() + 1;
        f.clock.advance(seconds).unwrap();
    };
    // Past the first last day: the revision moved it, so the cobv is still open.
    go_to(start_of_day(today + days(2)));
    addr.send(Tick).await.unwrap().unwrap();
    assert_eq!(status(), TxStatus::Pending);
    // Past the revised last day: it ends (REMOVIDA_PELO_PSP).
    go_to(start_of_day(today + days(6)));
    addr.send(Tick).await.unwrap().unwrap();
    assert_eq!(status(), TxStatus::Error);
    let late = refused(
        addr.send(PayCharge { local_id: created.local_id, payer: None, amount: None }).await.unwrap(),
    );
    assert!(matches!(late, Refusal::NotPayable(_)), "{late:?}");
}

#[actix_rt::test]
async fn a_requests_reply_leaves_the_actor_before_its_sync_and_is_acknowledged_only_after() {
    use futures_util::FutureExt;
    let f = fixture("10.00");
    let addr = f.actor();
    // The first command reserves a block of ids with a sync of its own.
    addr.send(cash_out("first", "1.00")).await.unwrap().unwrap();
    let journal = f.commit.journal().unwrap();
    journal.faults().sync_gate.close();
    let early = addr.send(Traced { msg: cash_out("a", "1.00"), request_id: None }).await.unwrap();
    // The actor answered while its write waits for the sync.
    assert!(early.ticket > f.commit.durable_now(), "answered before the write was durable");
    let mut ack = Box::pin(acknowledged(&f.commit, early));
    assert!((&mut ack).now_or_never().is_none(), "acknowledged before the sync");
    assert_eq!(f.repo.transaction_by_external_id(f.account, "a").unwrap(), None, "not readable yet");
    journal.faults().sync_gate.open();
    let out = ack.await.unwrap();
    let stored = f.repo.transaction_by_external_id(f.account, "a").unwrap().unwrap();
    assert_eq!(stored.local_id, out.tx.local_id);
    // A later command sees both holds.
    assert_eq!(f.balance(&addr).await, Balance { available: m("8"), blocked: m("2") });
}

#[actix_rt::test]
async fn a_requests_write_that_fails_its_sync_is_unavailable_and_halts_the_actor() {
    let f = fixture("10.00");
    let addr = f.actor();
    let first = addr.send(Traced { msg: cash_out("a", "1.00"), request_id: None }).await.unwrap();
    acknowledged(&f.commit, first).await.unwrap();
    f.commit.journal().unwrap().faults().fail_sync.store(true, std::sync::atomic::Ordering::SeqCst);
    let early = addr.send(Traced { msg: cash_out("b", "1.00"), request_id: None }).await.unwrap();
    assert!(early.reply.is_ok(), "the actor decided before the sync failed");
    let lost = acknowledged(&f.commit, early).await;
    assert!(matches!(lost, Err(CommandError::Unavailable(_))), "{lost:?}");
    assert_eq!(f.repo.transaction_by_external_id(f.account, "b").unwrap(), None, "never readable");
    // The actor halts on its own wait for that write: it answers nothing more, then stops.
    loop {
        match addr.send(GetBalance).await {
            Ok(reply) => assert!(reply.is_err(), "{reply:?}"),
            Err(MailboxError::Closed) => break,
            Err(e) => panic!("{e}"),
        }
    }
}

#[actix_rt::test]
async fn an_answered_solicitation_does_not_expire_and_an_unanswered_one_expires_only_at_its_time() {
    use crate::domain::decide::RecChange;
    use crate::domain::rec::{Debtor, Link, RecStatus, Recipient};
    use crate::domain::recurrence::{AmountRule, Periodicity, RetryPolicy, Schedule};
    let f = fixture("0.00");
    let addr = f.actor();
    let today = crate::domain::listing::local_day(f.clock.now());
    let create = || CreateRec {
        link: Link {
            object: None,
            contract: "c".into(),
            debtor: Debtor { name: "Ana".into(), document: "52998224725".into() },
        },
        schedule: Schedule::new(today, Periodicity::Weekly, None).unwrap(),
        amount: AmountRule::Fixed(m("5")),
        retry: RetryPolicy::NotAllowed,
        agreement: None,
        auto_retry: Default::default(),
        auto_send_days: None,
        loc: None,
        first_txid: None,
    };
    let expires_at = f.clock.now() + chrono::Duration::seconds(600);
    let solicit = |id: &str| ChangeRec {
        rec: RecRef::Rec(id.to_owned()),
        change: RecChange::Solicit {
            recipient: Recipient {
                document: "11144477735".into(),
                account: "1".into(),
                branch: None,
                ispb: "00000000".into(),
                on_us: None,
            },
            expires_at,
        },
        payer: None,
    };
    let answered = addr.send(create()).await.unwrap().unwrap();
    let answered = addr.send(solicit(&answered.id)).await.unwrap().unwrap();
    let sid = answered.solicitations[0].id.clone();
    addr.send(sandbox_approval(sid)).await.unwrap().unwrap();
    let waiting = addr.send(create()).await.unwrap().unwrap();
    addr.send(solicit(&waiting.id)).await.unwrap().unwrap();
    let status = |local: u64| f.repo.rec(f.account, local).unwrap().unwrap().status;

    f.clock.advance(599).unwrap();
    addr.send(Tick).await.unwrap().unwrap();
    assert_eq!(
        (status(answered.local_id), status(waiting.local_id)),
        (RecStatus::Aprovada, RecStatus::Criada)
    );
    f.clock.advance(1).unwrap();
    addr.send(Tick).await.unwrap().unwrap();
    assert_eq!(status(answered.local_id), RecStatus::Aprovada, "an answered solicitation has no deadline");
    assert_eq!(status(waiting.local_id), RecStatus::Expirada);
    let late = addr.send(solicit(&waiting.id)).await.unwrap();
    assert!(matches!(refused(late), Refusal::Rec(crate::domain::rec::RecError::NotAwaitingAuthorisation(_))));
}

/// A recurring charge of 30.00, due in three days, of a monthly recurrence (30.00 fixed,
/// under `retry` and `auto_retry`) the sandbox's payer authorised: its first write, and its
/// due date.
async fn charge_of_an_approved_rec(
    f: &Fixture,
    addr: &Addr<AccountActor>,
    retry: crate::domain::recurrence::RetryPolicy,
    auto_retry: crate::domain::recurrence::AutoRetry,
    scenario: crate::domain::cobr::SettleScenario,
) -> (crate::domain::cobr::Cobr, chrono::NaiveDate) {
    use crate::domain::decide::{CobrRequest, RecChange};
    use crate::domain::rec::{Debtor, Link, Recipient};
    use crate::domain::recurrence::{AmountRule, Periodicity, Schedule};
    let today = crate::domain::listing::local_day(f.clock.now());
    let rec = CreateRec {
        link: Link {
            object: None,
            contract: "c".into(),
            debtor: Debtor { name: "Ana".into(), document: "52998224725".into() },
        },
        schedule: Schedule::new(today, Periodicity::Monthly, None).unwrap(),
        amount: AmountRule::Fixed(m("30")),
        agreement: None,
        auto_retry,
        auto_send_days: None,
        retry,
        loc: None,
        first_txid: None,
    };
    let rec = addr.send(rec).await.unwrap().unwrap();
    let recipient = Recipient {
        document: "11144477735".into(),
        account: "1".into(),
        branch: None,
        ispb: "00000000".into(),
        on_us: None,
    };
    let solicit = RecChange::Solicit { recipient, expires_at: f.clock.now() + chrono::Duration::hours(1) };
    let rec = addr
        .send(ChangeRec { rec: RecRef::Rec(rec.id), change: solicit, payer: None })
        .await
        .unwrap()
        .unwrap();
    addr.send(sandbox_approval(rec.solicitations[0].id.clone())).await.unwrap().unwrap();
    let due = today + chrono::Duration::days(3);
    let request = CobrRequest {
        txid: "t".repeat(26),
        due,
        adjust: false,
        value: m("30"),
        info: None,
        scenario,
        receiver_account: None,
        debtor_details: None,
    };
    (addr.send(CreateCobr { id_rec: rec.id.clone(), request }).await.unwrap().unwrap(), due)
}

#[actix_rt::test]
async fn a_recurring_charge_due_while_the_disk_is_full_settles_once_room_returns() {
    use crate::domain::cobr::{CobrStatus, SettleScenario};
    use crate::domain::recurrence::RetryPolicy;
    let f = fixture("0.00");
    let addr = f.actor();
    let (cobr, due) = charge_of_an_approved_rec(
        &f,
        &addr,
        RetryPolicy::NotAllowed,
        Default::default(),
        SettleScenario::Pay,
    )
    .await;
    let status = || f.repo.cobr(f.account, cobr.local_id).unwrap().unwrap().status;

    let journal = f.commit.journal().unwrap();
    journal.faults().no_room.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(!journal.try_make_room());
    let seconds = (crate::domain::cobv::start_of_day(due) - f.clock.now()).num_seconds() + 1;
    f.clock.advance(seconds).unwrap();
    addr.send(Tick).await.unwrap().unwrap();
    assert_eq!(status(), CobrStatus::Ativa, "nothing could be written");
    assert_eq!(f.balance(&addr).await.available, m("0"));
    journal.faults().no_room.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(journal.try_make_room());
    // The attempt comes back on its own after SETTLE_RETRY_AFTER (real time): wait for it,
    // bounded.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while status() != CobrStatus::Concluida {
        assert!(std::time::Instant::now() < deadline, "the postponed attempt never came");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    addr.send(Tick).await.unwrap().unwrap();
    assert_eq!(f.balance(&addr).await.available, m("30"), "credited once");
}

/// The payer's side of an on-us recurring charge: asked for the same attempt many times at
/// once (a receiver that crashed and asks again), the account is debited once and every
/// answer says so; an attempt its balance cannot pay is refused and moves nothing.
#[actix_rt::test]
async fn an_on_us_charge_debits_its_payer_once_however_often_it_is_asked_for() {
    use super::messages::{CollectCobr, Collected};
    use crate::domain::cobr::Failure;
    let f = fixture("50.00");
    let addr = f.actor();
    let order = |attempt: u32, value: &str| CollectCobr {
        external_id: format!("pixauto:RR99999999202611260000000000a:t1:{attempt}"),
        value: m(value),
        id_rec: "RR99999999202611260000000000a".into(),
        reference: "COBR/t1".into(),
        receiver_name: "Shop".into(),
        receiver_document: "52998224725".into(),
        receiving_key: "5f0b9e0e-1f0c-4a39-9c5e-2f1f3c2d9a10".into(),
    };
    let asks = (0..5).map(|_| addr.send(order(1, "30.00")));
    for answer in futures::future::join_all(asks).await {
        assert_eq!(answer.unwrap().unwrap(), Collected::Debited);
    }
    let after_one = f.balance(&addr).await.available;
    assert!(after_one <= m("20.00"), "30.00 and its fee left: {after_one}");
    assert_eq!(addr.send(order(1, "30.00")).await.unwrap().unwrap(), Collected::Debited);
    assert_eq!(f.balance(&addr).await.available, after_one, "asked again: not debited again");
    // The next attempt is another debit, which the balance left cannot pay.
    assert_eq!(addr.send(order(2, "30.00")).await.unwrap().unwrap(), Collected::Refused(Failure::NoFunds));
    assert_eq!(f.balance(&addr).await.available, after_one);
    let debits: Vec<_> = f
        .repo
        .transactions_of(f.account)
        .unwrap()
        .into_iter()
        .filter(|t| t.kind == TxKind::CashOut)
        .collect();
    assert_eq!(debits.len(), 1, "one debit in all: {debits:?}");
    assert_eq!(debits[0].qr_txid.as_deref(), Some("COBR/t1"), "its credit will name the charge");
}

/// Money in from a real rail, in the SPI's two steps, each repeated as the rail repeats
/// what it is not sure was done: accepting twice writes one record and moves nothing,
/// settling twice credits once, a rejected arrival goes without a credit, and a refusal
/// writes nothing.
#[actix_rt::test]
async fn an_arrival_is_accepted_once_credited_once_and_a_rejected_one_credits_nothing() {
    use crate::domain::decide::{Incoming, IncomingKind, IncomingRefusal};
    let f = fixture("0.00");
    let addr = f.actor();
    let arrival = |id: &str, value: &str, document: &str| AcceptIncoming {
        incoming: Incoming {
            id: id.into(),
            payee: f.account,
            value: m(value),
            payer_name: "Ana".into(),
            payer_document: "52998224725".into(),
            payer_ispb: "99999A03".into(),
            paid_at: f.clock.now(),
            kind: IncomingKind::Payment { reference: None },
        },
        creditor_document: document.into(),
    };
    let ours = "11222333000181";
    let end = |id: &str, settled: bool| EndIncoming { id: id.into(), settled };

    assert_eq!(addr.send(arrival("E1", "10.00", ours)).await.unwrap().unwrap(), Ok(()));
    assert_eq!(addr.send(arrival("E1", "10.00", ours)).await.unwrap().unwrap(), Ok(()));
    assert!(f.repo.incoming("E1").unwrap().is_some(), "accepted durably");
    assert_eq!(f.balance(&addr).await.available, m("0.00"), "accepting moves no money");

    assert!(addr.send(end("E1", true)).await.unwrap().unwrap());
    assert!(addr.send(end("E1", true)).await.unwrap().unwrap(), "settled already: done");
    assert_eq!(f.balance(&addr).await.available, m("10.00"), "credited once");
    assert!(f.repo.incoming("E1").unwrap().is_none(), "the record went with the credit");
    // The SPI delivers the settled payment's pacs.008 once more: the same answer, no record.
    assert_eq!(addr.send(arrival("E1", "10.00", ours)).await.unwrap().unwrap(), Ok(()));
    assert!(f.repo.incoming("E1").unwrap().is_none());

    assert_eq!(addr.send(arrival("E2", "5.00", ours)).await.unwrap().unwrap(), Ok(()));
    assert!(addr.send(end("E2", false)).await.unwrap().unwrap());
    assert!(f.repo.incoming("E2").unwrap().is_none());
    assert!(!addr.send(end("E2", true)).await.unwrap().unwrap(), "nothing waits under E2 any more");

    let refused = addr.send(arrival("E3", "5.00", "52998224725")).await.unwrap().unwrap();
    assert_eq!(refused, Err(IncomingRefusal::DocumentMismatch));
    assert!(f.repo.incoming("E3").unwrap().is_none(), "a refusal writes nothing");

    assert_eq!(f.balance(&addr).await.available, m("10.00"));
    let received: Vec<_> =
        f.repo.transactions_of(f.account).unwrap().into_iter().filter(|t| t.kind == TxKind::PixIn).collect();
    assert_eq!(received.len(), 1, "one received PIX: {received:?}");
    assert_eq!(received[0].end_to_end_id, "E1");
}

/// The clock's tick does everything that has come, including what an earlier step sets due
/// in the past (a jump past a due day's evening: the morning try fails, the evening try it
/// schedules is already due and fails, and the gateway's own retry is asked for), before it
/// answers; none of it is left to the timer, which a reader could overtake.
#[actix_rt::test]
async fn one_tick_carries_a_recurring_charge_through_every_step_that_has_come() {
    use crate::domain::cobr::{CobrStatus, SettleScenario};
    use crate::domain::recurrence::{AutoRetry, RetryPolicy};
    let f = fixture("0.00");
    let addr = f.actor();
    let retry = RetryPolicy::ThreeWithinSevenDays;
    let auto = AutoRetry::parse(&[1], retry).unwrap();
    let (cobr, due) =
        charge_of_an_approved_rec(&f, &addr, retry, auto, SettleScenario::NoFunds { failures: 2 }).await;
    let evening = crate::domain::cobv::start_of_day(due)
        + chrono::Duration::hours(crate::domain::cobr::EVENING_ATTEMPT_HOUR)
        + chrono::Duration::seconds(5);
    f.clock.advance((evening - f.clock.now()).num_seconds()).unwrap();
    addr.send(Tick).await.unwrap().unwrap();
    let read = f.repo.cobr(f.account, cobr.local_id).unwrap().unwrap();
    let steps: Vec<(bool, bool, bool)> =
        read.attempts.iter().map(|a| (a.evening, a.retry, a.outcome.is_some())).collect();
    assert_eq!(
        (read.status, steps),
        (CobrStatus::Ativa, vec![(false, false, true), (true, false, true), (false, true, false)]),
        "the morning's try and the evening's made, the gateway's retry asked for"
    );
    assert_eq!(read.attempts[2].date, due + chrono::Duration::days(1));
}
