//! The two listeners: gRPC (`envoy.service.ratelimit.v3.RateLimitService`) and HTTP
//! (`POST /json`, `GET /healthcheck`, `GET /metrics`), both draining in-flight calls on
//! shutdown.

use crate::engine::{DecideError, Engine};
use crate::json::{parse_request, response_json};
use crate::proto::rate_limit_service::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use crate::proto::{RateLimitRequest, RateLimitResponse};
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

/// The gRPC service over the engine.
#[derive(Debug, Clone)]
pub struct Rls(pub Arc<Engine>);

#[tonic::async_trait]
impl RateLimitService for Rls {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        match self.0.decide(request.get_ref()).await {
            Ok(r) => Ok(tonic::Response::new(r)),
            Err(e) => {
                crate::stats::call("grpc", "error");
                tracing::debug!(error = %e, "call refused");
                Err(match e {
                    DecideError::InvalidArgument(m) => tonic::Status::invalid_argument(m),
                    DecideError::Unavailable(m) => tonic::Status::unavailable(m),
                })
            }
        }
    }
}

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

/// The HTTP routes.
pub fn router(state: Http) -> axum::Router {
    axum::Router::new()
        .route("/json", post(json))
        .route("/healthcheck", get(healthcheck))
        .route("/metrics", get(metrics))
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

/// Serves gRPC on `listener` until `shutdown` resolves, then drains.
///
/// # Errors
///
/// The transport's error.
pub async fn serve_grpc(
    listener: TcpListener,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    // TCP_NODELAY on every accepted connection: tonic's `tcp_nodelay` applies only to
    // listeners it binds itself, and with Nagle's algorithm on, a response written while
    // the previous one is unacknowledged waits for the peer's (delayed) ACK.
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .add_service(RateLimitServiceServer::new(Rls(engine)))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}
