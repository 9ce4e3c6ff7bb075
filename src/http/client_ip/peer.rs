//! The connection's peer address: where each server records it ([`PeerAddr`] for any
//! server, axum's `ConnectInfo`, tonic's `TcpConnectInfo`), and what to say when none did.

use std::net::{IpAddr, SocketAddr};

use http::request::Parts;

/// The peer address of a connection, for servers that do not record one themselves.
///
/// The layer looks for the peer in the request's extensions: this type, axum's
/// `ConnectInfo<SocketAddr>` (feature `axum`), or tonic's `TcpConnectInfo` (feature
/// `tonic`). A plain hyper server inserts it per connection:
///
/// ```no_run
/// # #[cfg(feature = "axum")]
/// # async fn serve() -> std::io::Result<()> {
/// use std::convert::Infallible;
/// use tollgate::http::PeerAddr;
///
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// loop {
///     let (stream, peer) = listener.accept().await?;
///     let svc = hyper::service::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
///         req.extensions_mut().insert(PeerAddr(peer));
///         // ... then call the service wrapped in RateLimitLayer with `req`
///         async move { Ok::<_, Infallible>(http::Response::new(String::from("ok"))) }
///     });
///     tokio::spawn(hyper::server::conn::http1::Builder::new()
///         .serve_connection(hyper_util::rt::TokioIo::new(stream), svc));
/// }
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerAddr(pub SocketAddr);

// What this build reads, for the message below.
#[cfg(feature = "axum")]
macro_rules! no_axum {
    () => {
        ""
    };
}
#[cfg(not(feature = "axum"))]
macro_rules! no_axum {
    () => {
        " (and this build of tollgate reads ConnectInfo only with its `axum` feature)"
    };
}
#[cfg(feature = "tonic")]
macro_rules! tonic_peer {
    () => {
        "its server records TcpConnectInfo for plain TCP connections (not for TLS or a \
         custom incoming stream)"
    };
}
#[cfg(not(feature = "tonic"))]
macro_rules! tonic_peer {
    () => {
        "this build of tollgate reads TcpConnectInfo only with its `tonic` feature"
    };
}

/// Why a request has no peer address, and what records one (what this build reads).
pub(super) const NO_PEER: &str = concat!(
    "no peer address was found for the request (ClientIp keys by the connection's peer, ",
    "read from the request's extensions); ",
    "axum: serve the app with `into_make_service_with_connect_info::<SocketAddr>()`, ",
    "plain `axum::serve(listener, app)` records no ConnectInfo",
    no_axum!(),
    "; tonic: ",
    tonic_peer!(),
    "; any other server: insert `tollgate::http::PeerAddr` into each request's extensions",
);

/// The connection's peer, from whichever server recorded it.
pub(crate) fn peer_addr(parts: &Parts) -> Option<IpAddr> {
    #[cfg(feature = "axum")]
    if let Some(axum::extract::ConnectInfo(a)) = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(a.ip());
    }
    #[cfg(feature = "tonic")]
    if let Some(info) = parts
        .extensions
        .get::<tonic::transport::server::TcpConnectInfo>()
    {
        if let Some(a) = info.remote_addr() {
            return Some(a.ip());
        }
    }
    if let Some(PeerAddr(a)) = parts.extensions.get::<PeerAddr>() {
        return Some(a.ip());
    }
    None
}
