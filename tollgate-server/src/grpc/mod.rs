//! The gRPC listener: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`
//! served on the [`h2`] crate directly.
//!
//! Why not tonic's server: a unary call through tonic, hyper and tower cost about 71,000
//! instructions of server time, of which the decision was under 7,000; hyper spawns a
//! task per stream and tonic's generic body, codec and routing layers sit between the
//! frames and the message. Here each connection is one task that accepts its streams and
//! answers every call inline (`call::answer`, polled beside the connection in one
//! `FuturesUnordered`, no task per call), reading the one request message, deciding, and
//! writing the response message and its trailers. HTTP/2 itself (framing, HPACK, flow
//! control, `GOAWAY`) is h2's, the same implementation tonic uses.
//!
//! Shutdown: when `shutdown` resolves, the listener closes, every connection gets a
//! graceful `GOAWAY` (no new streams), calls in flight are answered, and
//! [`serve_grpc`] returns once every connection has closed.

mod call;
mod status;

pub use call::{MAX_MESSAGE, PATH};
pub use status::{Code, Status};

use crate::engine::Engine;
use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// A call waiting for the rest of its request or for the backend.
type Call<'a> = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Streams one connection may have open at once (advertised in SETTINGS).
pub const MAX_CONCURRENT_STREAMS: u32 = 1024;

/// The largest header block accepted (advertised in SETTINGS).
pub const MAX_HEADER_LIST: u32 = 64 << 10;

/// Serves gRPC on `listener` until `shutdown` resolves, then drains: see the module.
///
/// # Errors
///
/// None today: a failed `accept` (e.g. out of file descriptors) is logged and retried
/// after a pause, and a connection's errors end only that connection. The `Result` keeps
/// room for listener failures that cannot be retried.
///
/// ```no_run
/// # async fn run(engine: std::sync::Arc<tollgate_server::engine::Engine>) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8081").await?;
/// tollgate_server::grpc::serve_grpc(listener, engine, async {
///     let _ = tokio::signal::ctrl_c().await;
/// })
/// .await
/// # }
/// ```
pub async fn serve_grpc(
    listener: TcpListener,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _peer)) => {
                    connections.spawn(connection(tcp, Arc::clone(&engine), stop_rx.clone()));
                }
                Err(e) => {
                    // Per-connection failures (a peer that reset before accept) and
                    // resource exhaustion (EMFILE) alike: log, pause, go on.
                    tracing::warn!(error = %e, "gRPC accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// One HTTP/2 connection: its streams' calls answered inline, until the client closes
/// it or, after `stop`, the last call in flight is answered.
async fn connection(tcp: TcpStream, engine: Arc<Engine>, mut stop: watch::Receiver<bool>) {
    // With Nagle's algorithm, a response written while the previous one is unacknowledged
    // waits for the client's delayed ACK.
    let _ = tcp.set_nodelay(true);
    let handshake = h2::server::Builder::new()
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_header_list_size(MAX_HEADER_LIST)
        .initial_window_size(1 << 20)
        .initial_connection_window_size(1 << 20)
        .handshake::<_, Bytes>(tcp);
    let mut conn = tokio::select! {
        c = handshake => match c {
            Ok(c) => c,
            Err(e) => return tracing::debug!(error = %e, "HTTP/2 handshake failed"),
        },
        _ = stop.wait_for(|s| *s) => return,
    };
    let mut stopped = pin!(async move {
        let _ = stop.wait_for(|s| *s).await;
    });
    let mut stopping = false;
    let mut calls: FuturesUnordered<Call<'_>> = FuturesUnordered::new();
    let mut ready = Vec::new();
    let ended = poll_fn(|cx| loop {
        if !stopping && stopped.as_mut().poll(cx).is_ready() {
            stopping = true;
            conn.graceful_shutdown();
        }
        while let Poll::Ready(Some(())) = calls.poll_next_unpin(cx) {}
        // Take every request h2 has read before answering any: each `poll_accept` also
        // flushes what is queued to send, so answering between them would cost a write
        // per call; this way the answers to one read leave in one write (the next poll).
        let end = loop {
            match conn.poll_accept(cx) {
                Poll::Ready(Some(Ok(call))) => ready.push(call),
                Poll::Ready(Some(Err(e))) => break Some(Err(e)),
                Poll::Ready(None) => break Some(Ok(())),
                Poll::Pending => break None,
            }
        };
        if let Some(end) = end {
            return Poll::Ready(end);
        }
        if ready.is_empty() {
            return Poll::Pending;
        }
        for (req, respond) in ready.drain(..) {
            // Most calls finish on their first poll (the request's DATA frame came with
            // its HEADERS, the in-process engine decides at once): poll it here, and
            // keep it only if it has to wait.
            let mut call: Call<'_> = Box::pin(call::answer(req, respond, &engine));
            if call.as_mut().poll(cx).is_pending() {
                calls.push(call);
            }
        }
    })
    .await;
    if let Err(e) = ended {
        if !e.is_io()
            || e.get_io().map(std::io::Error::kind) != Some(std::io::ErrorKind::ConnectionReset)
        {
            tracing::debug!(error = %e, "gRPC connection ended");
        }
    }
}
