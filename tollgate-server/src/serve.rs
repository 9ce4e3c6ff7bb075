//! The HTTP listener (`POST /json`, `GET /healthcheck`, `GET /metrics`, and
//! envoyproxy/ratelimit's debug page `GET /rlconfig`), draining in-flight calls on
//! shutdown. The gRPC listener is [`crate::grpc`].

use crate::engine::{DecideError, Engine};
use crate::json::{parse_request, response_json};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::net::TcpListener;

/// What the HTTP handlers share.
#[derive(Debug, Clone)]
pub struct Http {
    /// The decisions.
    pub engine: Arc<Engine>,
    /// The Prometheus exporter.
    pub metrics: PrometheusHandle,
    /// Set when shutting down: `/healthcheck` then answers 503, so load balancers stop
    /// sending while the in-flight calls drain.
    pub draining: Arc<AtomicBool>,
    /// envoyproxy/ratelimit's `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`: `/healthcheck`
    /// answers 500 while the configuration served has no domain.
    pub healthy_needs_config: bool,
}

async fn json(State(s): State<Http>, body: Bytes) -> Response {
    let req = match parse_request(&body) {
        Ok(r) => r,
        Err(m) => {
            crate::stats::call("json", "error");
            return (StatusCode::BAD_REQUEST, m).into_response();
        }
    };
    match s.engine.decide(&req).await {
        Ok(r) => {
            let status = match r.overall_code {
                1 => StatusCode::OK,
                2 => StatusCode::TOO_MANY_REQUESTS,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            (status, axum::Json(response_json(&r))).into_response()
        }
        Err(DecideError::InvalidArgument(m)) => (StatusCode::BAD_REQUEST, m).into_response(),
        Err(DecideError::Unavailable(m)) => (StatusCode::INTERNAL_SERVER_ERROR, m).into_response(),
    }
}

async fn healthcheck(State(s): State<Http>) -> Response {
    if s.draining.load(Ordering::Relaxed) {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response()
    } else if s.healthy_needs_config && s.engine.rules().domains.is_empty() {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "no configuration loaded\n",
        )
            .into_response()
    } else {
        (StatusCode::OK, "OK\n").into_response()
    }
}

async fn metrics(State(s): State<Http>) -> Response {
    (
        [("content-type", "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
        .into_response()
}

async fn rlconfig(State(s): State<Http>) -> Response {
    (
        [("content-type", "text/plain; charset=utf-8")],
        s.engine.rules().dump(),
    )
        .into_response()
}

/// The HTTP routes.
pub fn router(state: Http) -> axum::Router {
    axum::Router::new()
        .route("/json", post(json))
        .route("/healthcheck", get(healthcheck))
        .route("/metrics", get(metrics))
        .route("/rlconfig", get(rlconfig))
        .with_state(state)
}

/// Serves HTTP on `listener` until `shutdown` resolves, then drains.
///
/// # Errors
///
/// The listener's I/O error.
pub async fn serve_http(
    listener: TcpListener,
    state: Http,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
