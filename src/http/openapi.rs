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

/// The `Idempotency-Key` header on every client POST it applies to (`idempotency.rs`).
struct IdempotencyKey;

impl Modify for IdempotencyKey {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        use utoipa::openapi::Required;
        for (path, item) in doc.paths.paths.iter_mut() {
            let Some(op) = item.post.as_mut() else { continue };
            if !super::idempotency::applies_to_path(path) {
                continue;
            }
            let header = ParameterBuilder::new()
                .name("Idempotency-Key")
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(
                    "1 to 255 visible ASCII characters, per account, kept 24 h: a repeat with the same \
                     request answers the first response (Idempotent-Replayed: true); another request \
                     under the key is 422; one still running or interrupted is 409",
                ))
                .schema(Some(
                    ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).max_length(Some(255)),
                ))
                .build();
            op.parameters.get_or_insert_with(Vec::new).push(header.into());
        }
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
    modifiers(&Security, &IdempotencyKey)
)]
pub struct ApiDoc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_posts_document_the_idempotency_key_and_the_token_route_does_not() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let has_key = |path: &str| {
            doc["paths"][path]["post"]["parameters"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header"))
        };
        assert!(has_key("/api/pix/cash-out"));
        assert!(has_key("/sandbox/pix-in"));
        assert!(!has_key("/api/auth/token"));
        assert!(!has_key("/dict/pix"));
        assert!(!has_key("/admin/accounts"));
    }
}
