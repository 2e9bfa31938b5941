//! The OpenAPI 3.1 document, generated from the handlers' annotations. A unit test checks
//! that every route of the route table is described here.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{
    admin, balance, charges, cob, dict, error, me, med, ops, pix, refunds, sandbox, token, transactions,
    webhooks,
};

struct Security;

impl Modify for Security {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        let bearer = || {
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build(),
            )
        };
        components.add_security_scheme("bearer", bearer());
        components.add_security_scheme("admin", bearer());
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "pixgw", description = "PIX instant-payment gateway"),
    paths(
        token::issue_token,
        me::my_account,
        pix::cash_out,
        pix::cash_out_qrcode,
        charges::cash_in,
        refunds::refund_in,
        refunds::devolucao,
        refunds::get_devolucao,
        cob::put_cob,
        cob::get_cob,
        cob::patch_cob,
        balance::api_balance,
        transactions::list_transactions,
        med::list,
        med::open,
        med::analyze,
        med::cancel,
        transactions::get_transaction,
        webhooks::configure,
        webhooks::list,
        webhooks::remove,
        webhooks::logs,
        webhooks::resend,
        dict::dict_pix,
        balance::balances,
        balance::plain_balance,
        sandbox::pix_in,
        sandbox::pay,
        sandbox::refund_out,
        admin::create_account,
        admin::get_account,
        admin::patch_account,
        admin::register_certificate,
        admin::revoke_certificate,
        admin::rotate_secret,
        admin::move_clock,
        ops::healthz,
        ops::metrics,
        ops::openapi,
        ops::docs_redirect,
    ),
    components(schemas(error::ExtendedErrorBody, error::SimpleErrorBody, error::Violation)),
    modifiers(&Security)
)]
pub struct ApiDoc;
