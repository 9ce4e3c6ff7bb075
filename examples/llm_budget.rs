//! An LLM gateway's token budget: 1,000 tokens a minute per API key (`x-api-key`),
//! refilled smoothly, where what a request costs is known only once its answer has been
//! generated.
//!
//! `GET /v1/generate?tokens=N&pace_ms=M` streams an "answer" of `N` tokens (one chunk
//! each, `M` ms apart) and records every token in the request's `Budget` as it goes. The
//! layer admits a request while the key has anything left (a peek: nothing is taken
//! yet) and charges the recorded tokens when the body ends, or, when the client goes away
//! mid-stream, the tokens streamed until then. An answer larger than what was left puts
//! the key in debt, and its next requests are refused (429, `Retry-After`) until the debt
//! is paid off at the quota's rate. Requests without an API key are refused with 401.
//!
//! Run it and try the printed curl lines:
//!
//! ```text
//! cargo run --example llm_budget --features axum
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{StatusCode, Uri};
use axum::routing::get;
use tollgate::http::{Budget, HeaderKey, MissingKey, Policy, RateLimitLayer};
use tollgate::{Algorithm, Clock, KeyedRateLimiter, Quota};

/// The gateway: `/v1/generate` behind a token budget per API key on `tokens` (generic
/// over the limiter's clock so that its test can drive time by hand).
pub(crate) fn app<C: Clock>(
    tokens: Arc<KeyedRateLimiter<String, C>>,
) -> Result<axum::Router, Box<dyn std::error::Error>> {
    let budget = Policy::budget("tokens", tokens, HeaderKey::new("x-api-key")?)
        .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED));
    Ok(axum::Router::new()
        .route("/v1/generate", get(generate))
        .layer(RateLimitLayer::new(budget)))
}

/// Streams `tokens` tokens (default 16), `pace_ms` apart (default 0), recording each
/// one in the budget as it is produced.
async fn generate(budget: Budget, uri: Uri) -> Body {
    let tokens = param(&uri, "tokens").unwrap_or(16);
    let pace = Duration::from_millis(param(&uri, "pace_ms").unwrap_or(0).into());
    Body::new(Answer {
        left: tokens,
        produced: 0,
        pace,
        tick: None,
        budget,
    })
}

/// The value of `name` in the query string.
fn param(uri: &Uri, name: &str) -> Option<u32> {
    uri.query()?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
}

/// A stand-in for a model's output stream: one token per frame.
struct Answer {
    left: u32,
    produced: u32,
    pace: Duration,
    tick: Option<Pin<Box<tokio::time::Sleep>>>,
    budget: Budget,
}

impl HttpBody for Answer {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.left == 0 {
            return Poll::Ready(None);
        }
        if !this.pace.is_zero() {
            let pace = this.pace;
            let tick = this
                .tick
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(pace)));
            if tick.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.tick = None;
        }
        this.left -= 1;
        this.produced += 1;
        // What the model reports per token (or per chunk, or once at the end with
        // `set_cost`): charged by the layer when the body ends or is dropped.
        this.budget.charge(1);
        let token = format!("tok{} ", this.produced);
        Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from(token)))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tokens = Arc::new(
        KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_minute(1_000))
            .max_keys(100_000)
            .build()?,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}; try:");
    println!(
        "  curl -i http://{addr}/v1/generate                                   # 401: no API key"
    );
    println!("  curl -si -H 'x-api-key: k1' 'http://{addr}/v1/generate?tokens=900' | head -5   # RateLimit r=1000: all left");
    println!("  curl -si -H 'x-api-key: k1' 'http://{addr}/v1/generate?tokens=400' | head -5   # r=100 or so: admitted, then about 300 owed");
    println!("  curl -si -H 'x-api-key: k1' 'http://{addr}/v1/generate?tokens=10' | head -5    # 429 until the debt is paid: Retry-After about 18");
    println!("  curl -sN -H 'x-api-key: k2' 'http://{addr}/v1/generate?tokens=1000&pace_ms=50'  # Ctrl-C after a few: only those are charged");
    axum::serve(listener, app(tokens)?).await?;
    Ok(())
}
