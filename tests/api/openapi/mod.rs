//! `openapi.yaml` against the live router: the spec documents the server
//! exactly as it is served.
//!
//! - **Routes, both directions.** The spec's (method, path) operations equal
//!   `neardup::http::ROUTES`; every operation is routed by a live server; every
//!   method a spec path does not list is answered 405 with an `Allow` header
//!   naming exactly the listed ones; paths outside the spec are
//!   `route-not-found`.
//! - **Examples.** Every request-body example is accepted by its operation,
//!   and every example (request, response, parameter) conforms to its schema.
//! - **Live bodies.** A happy path per route and the error responses each
//!   route produces are checked against the schema documented for their
//!   status code: status documented, media type as documented, required
//!   headers present, body conforming.
//!
//! The conformance checker (`schema_errors`) is deliberately small and
//! strict: `$ref` (local), `type`, `enum`, `const`, `properties`, `required`,
//! `additionalProperties`, `items`, `anyOf`/`oneOf` and the numeric, length
//! and size bounds. A schema keyword it does not know is an error, so the
//! spec cannot grow constraints the tests silently skip; `pattern` and
//! `format` are the only unchecked assertions.

mod checker;
mod examples;
mod live;
mod responses;
mod routes;
mod served;
mod spec;
mod twins;
