//! A real axum server on 127.0.0.1:0, a real HTTP/1.1 client, and a parser for the
//! structured-field Lists of the RateLimit headers.

use std::net::SocketAddr;

use axum::routing::get;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tollgate::http::RateLimitLayer;

fn app(layer: RateLimitLayer) -> axum::Router {
    axum::Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/upload", axum::routing::post(|| async { "stored" }))
        .layer(layer)
}

/// Serves `GET /` ("ok") behind `layer` and returns the address.
pub(crate) async fn serve(layer: RateLimitLayer) -> SocketAddr {
    serve_app(app(layer)).await
}

/// Serves `app` on 127.0.0.1 (with the peer address recorded) and returns the address.
pub(crate) async fn serve_app(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

/// Serves the same app as [`serve`] the way a new user might: plain
/// `axum::serve(listener, app)`, which records no `ConnectInfo` (no peer address).
pub(crate) async fn serve_without_connect_info(layer: RateLimitLayer) -> SocketAddr {
    let app = app(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// One response: status, headers and body text.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

/// Sends `method path` to `addr` with `headers` (repeated names become repeated lines).
pub(crate) async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &'static str,
) -> Reply {
    send_bytes(
        addr,
        method,
        path,
        headers,
        Bytes::from_static(body.as_bytes()),
    )
    .await
}

/// [`send`] with a body of any bytes.
pub(crate) async fn send_bytes(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Reply {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = client
        .request(req.body(Full::new(body)).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

pub(crate) async fn get_with(addr: SocketAddr, headers: &[(&str, &str)]) -> Reply {
    send(addr, "GET", "/", headers, "").await
}

/// One member of a structured-field List: a String with integer parameters.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) name: String,
    pub(crate) params: Vec<(String, i64)>,
}

impl Item {
    pub(crate) fn param(&self, key: &str) -> i64 {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .unwrap_or_else(|| panic!("no parameter {key} in {self:?}"))
            .1
    }
}

/// Parses an RFC 9651 List whose members are Strings with Integer parameters; panics
/// (failing the test) on anything else.
pub(crate) fn parse_list(s: &str) -> Vec<Item> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut items = Vec::new();
    let ows = |i: &mut usize| {
        while *i < b.len() && (b[*i] == b' ' || b[*i] == b'\t') {
            *i += 1;
        }
    };
    loop {
        ows(&mut i);
        assert_eq!(b[i], b'"', "member must be a String: {s}");
        i += 1;
        let mut name = String::new();
        loop {
            match b[i] {
                b'\\' => {
                    assert!(matches!(b[i + 1], b'"' | b'\\'), "bad escape: {s}");
                    name.push(b[i + 1] as char);
                    i += 2;
                }
                b'"' => {
                    i += 1;
                    break;
                }
                c => {
                    assert!((0x20..=0x7e).contains(&c), "bad char: {s}");
                    name.push(c as char);
                    i += 1;
                }
            }
        }
        let mut params = Vec::new();
        while i < b.len() && b[i] == b';' {
            i += 1;
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_lowercase() || b[i].is_ascii_digit() || b"_-.*".contains(&b[i]))
            {
                i += 1;
            }
            let key = s[start..i].to_owned();
            assert!(!key.is_empty(), "empty key: {s}");
            assert_eq!(b[i], b'=', "parameter without an integer: {s}");
            i += 1;
            let start = i;
            if b[i] == b'-' {
                i += 1;
            }
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            params.push((key, s[start..i].parse().expect("integer")));
        }
        items.push(Item { name, params });
        ows(&mut i);
        if i == b.len() {
            return items;
        }
        assert_eq!(b[i], b',', "members are separated by commas: {s}");
        i += 1;
    }
}

#[test]
fn list_parser_rejects_the_drafts_flawed_forms() {
    assert_eq!(parse_list(r#""a";q=3;w=60, "b\"c";r=0"#).len(), 2);
    for bad in ["a;q=3", r#""a";q=3.5x"#, r#""a";q=x"#] {
        assert!(
            std::panic::catch_unwind(|| parse_list(bad)).is_err(),
            "{bad}"
        );
    }
}
