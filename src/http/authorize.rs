//! Who may call each route: decided in one place, once per request, on the route the router
//! itself matches, before anything else of the request is read.
//!
//! The route table declares each route's [`Access`] beside its error family. [`authorize`],
//! a middleware outside every other one that reads the request (the sandbox header, the
//! body, the Idempotency-Key), finds the route the request will reach and admits the caller
//! or answers 401 / 403 at once. A handler never authenticates: its `Caller` or `Admin`
//! extractor only takes what [`authorize`] left in the request.
//!
//! Why on the matched route and never on `req.path()`: actix's router matches the path with
//! every percent-escape decoded but those of `/`, `%` and `+` (actix-router's `Url`), while
//! `req.path()` is the raw text. A decision read off the raw path (`/%63ob/...` is not
//! `/cob/...`) let a token without a route's scope reach the route through an encoded path.
//! [`routed_pattern`] asks actix's own resource map with the router's path, so the two cannot
//! disagree; a path no route matches is left to the router's 404.

use std::borrow::Cow;
use std::collections::HashMap;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, ConnectionType, Method};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, HttpResponse};

use super::auth::{admit_admin, admit_client};
use super::error::ApiError;

/// What a route asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Nothing: the token route, the payload locations, health, metrics and the docs.
    Open,
    /// A client's bearer token; on a route of the API Pix, one carrying the route's scope
    /// (`domain::scope`).
    Client,
    /// A client's bearer token of a sandbox account.
    Sandbox,
    /// An operator's admin token.
    Admin,
}

/// One route of the table: its pattern as actix matches it, who may call it, and the
/// methods it answers.
#[derive(Debug)]
struct Route {
    def: actix_web::dev::ResourceDef,
    pattern: &'static str,
    access: Access,
    methods: Vec<Method>,
}

impl Route {
    /// What the route asks of a request with `method`; `None` when it answers no such
    /// method (the router's 405, where nothing runs).
    fn access_for(&self, method: &Method) -> Option<Access> {
        self.methods.contains(method).then_some(self.access)
    }
}

/// The access of every route pattern, and the methods it answers, as the route table
/// declared them; indexed by the pattern's first segment, so that finding a request's route
/// tries the few patterns that share its first segment rather than every route.
#[derive(Debug, Default)]
pub struct RouteAccess {
    by_first: HashMap<&'static str, Vec<Route>>,
}

/// A path's first segment: `/cob/{txid}` and `/cob/x` are under `cob`.
fn first_segment(path: &str) -> &str {
    path.strip_prefix('/').unwrap_or(path).split('/').next().unwrap_or("")
}

impl RouteAccess {
    /// Records that `pattern` answers `method` with `access`; a pattern has one access
    /// whatever the method. Patterns are kept in the order they are declared, which is the
    /// order actix's router tries them.
    pub fn declare(&mut self, pattern: &'static str, method: Method, access: Access) {
        let routes = self.by_first.entry(first_segment(pattern)).or_default();
        match routes.iter_mut().find(|r| r.pattern == pattern) {
            Some(route) => {
                assert_eq!(route.access, access, "{pattern} is declared with two accesses");
                route.methods.push(method);
            }
            None => routes.push(Route {
                def: actix_web::dev::ResourceDef::new(pattern),
                pattern,
                access,
                methods: vec![method],
            }),
        }
    }

    /// The route the router matches for `path` (as the router reads it).
    fn route(&self, path: &str) -> Option<&Route> {
        self.by_first.get(first_segment(path))?.iter().find(|r| r.def.is_match(path))
    }

    /// The pattern of the route the router matches for `path` (as the router reads it).
    pub fn find(&self, path: &str) -> Option<&'static str> {
        self.route(path).map(|r| r.pattern)
    }

    /// The access of the route `method` reaches on `pattern`; `None` when the pattern
    /// answers no such method (the router's 405, where nothing runs).
    pub fn get(&self, pattern: &str, method: &Method) -> Option<Access> {
        self.by_first.get(first_segment(pattern))?.iter().find(|r| r.pattern == pattern)?.access_for(method)
    }
}

/// The path the router matches: the request's path with its percent-escapes decoded as
/// actix-router decodes them (all but `%2F`, `%25` and `%2B`).
pub fn routed_path(req: &HttpRequest) -> &str {
    req.match_info().as_str()
}

/// The pattern of the route the request reaches (or reached), before or after routing;
/// `None` when no route matches (the router answers 404). [`authorize`] finds it once and
/// leaves it in the request, so the layers after it (the sandbox header, the
/// Idempotency-Key, the error envelope, the access line) do not search the routes again.
/// Without the route table (an app of a test) it asks actix's own resource map.
pub fn routed_pattern(req: &HttpRequest) -> Option<Cow<'static, str>> {
    if let Some(Routed(found)) = req.extensions().get::<Routed>() {
        return found.map(Cow::Borrowed);
    }
    match req.app_data::<RouteAccess>() {
        Some(table) => table.find(routed_path(req)).map(Cow::Borrowed),
        None => req.resource_map().match_pattern(routed_path(req)).map(Cow::Owned),
    }
}

/// The route [`authorize`] found for the request.
#[derive(Debug, Clone, Copy)]
struct Routed(Option<&'static str>);

/// Middleware: admits the request to its route, or answers 401 / 403 before anything else
/// of it is read.
pub async fn authorize(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let route = req.app_data::<RouteAccess>().and_then(|t| t.route(routed_path(req.request())));
    let decided = match route {
        Some(route) => admit(&req, route.access_for(req.method()), route.pattern),
        None => Ok(()),
    };
    req.extensions_mut().insert(Routed(route.map(|r| r.pattern)));
    match decided {
        Ok(()) => Ok(next.call(req).await?.map_into_boxed_body()),
        Err(e) => Ok(refuse(req, e)),
    }
}

/// Admits the request to the route of `pattern`, which asks `access` of the request's
/// method, leaving the caller in its extensions.
fn admit(req: &ServiceRequest, access: Option<Access>, pattern: &str) -> Result<(), ApiError> {
    match access {
        // Nothing runs: the docs page's assets (served outside the route table), and a
        // method the route does not answer (the router's 405).
        None | Some(Access::Open) => Ok(()),
        Some(Access::Admin) => {
            let admin = admit_admin(req.request())?;
            req.extensions_mut().insert(admin);
            Ok(())
        }
        Some(Access::Client) => {
            let caller = admit_client(req.request(), pattern, false)?;
            req.extensions_mut().insert(caller);
            Ok(())
        }
        Some(Access::Sandbox) => {
            let caller = admit_client(req.request(), pattern, true)?;
            req.extensions_mut().insert(caller);
            Ok(())
        }
    }
}

/// The refusal, rendered by `error::envelope` in the route's family. Its body is never read:
/// a request that announced one gets its connection closed after the answer, so nothing of
/// that body is taken for the next request.
fn refuse(req: ServiceRequest, e: ApiError) -> ServiceResponse<BoxBody> {
    let announces_body = {
        let headers = req.headers();
        headers.contains_key(header::TRANSFER_ENCODING)
            || headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.trim() != "0")
    };
    let mut res = HttpResponse::from_error(e);
    if announces_body {
        res.head_mut().set_connection_type(ConnectionType::Close);
    }
    // Kept as an HttpResponse, the error stays attached for `error::envelope`.
    let (request, _) = req.into_parts();
    ServiceResponse::new(request, res)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::middleware::from_fn;
    use actix_web::test::{call_service, init_service, TestRequest};
    use actix_web::{web, App};

    /// Answers, in a header, the pattern a middleware sees before routing for `uri`.
    async fn pattern_before_routing(uri: &str) -> Option<String> {
        async fn tell(
            req: ServiceRequest,
            next: Next<impl MessageBody + 'static>,
        ) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
            let seen = routed_pattern(req.request()).unwrap_or_default();
            let mut res = next.call(req).await?.map_into_boxed_body();
            res.headers_mut().insert(
                header::HeaderName::from_static("x-seen"),
                header::HeaderValue::from_str(&seen).expect("a pattern is a header value"),
            );
            Ok(res)
        }
        let app = init_service(
            App::new()
                .wrap(from_fn(tell))
                .route("/cob/{txid}", web::get().to(|| async { "" }))
                .route("/pix", web::get().to(|| async { "" })),
        )
        .await;
        let res = call_service(&app, TestRequest::get().uri(uri).to_request()).await;
        let seen = res.headers().get("x-seen")?.to_str().ok()?.to_owned();
        // What the router did agrees with what the middleware saw.
        assert_eq!(res.status().is_success(), !seen.is_empty(), "{uri}");
        Some(seen).filter(|s| !s.is_empty())
    }

    #[actix_web::test]
    async fn the_routed_pattern_is_the_route_the_router_matches_whatever_the_escapes() {
        assert_eq!(pattern_before_routing("/cob/abc").await.as_deref(), Some("/cob/{txid}"));
        assert_eq!(pattern_before_routing("/%63ob/abc").await.as_deref(), Some("/cob/{txid}"));
        assert_eq!(pattern_before_routing("/%63%4F%62/abc").await, None, "an escape keeps its case");
        assert_eq!(pattern_before_routing("/p%69x").await.as_deref(), Some("/pix"));
        assert_eq!(pattern_before_routing("/%2563ob/abc").await, None, "a double escape stays escaped");
        assert_eq!(pattern_before_routing("/cob%2Fabc").await, None, "an escaped slash divides no segment");
        assert_eq!(pattern_before_routing("/COB/abc").await, None);
        assert_eq!(pattern_before_routing("//cob/abc").await, None);
        assert_eq!(pattern_before_routing("/x/../cob/abc").await, None);
        assert_eq!(pattern_before_routing("/pix/").await, None);
    }
}
