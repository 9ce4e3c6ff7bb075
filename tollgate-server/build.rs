//! Generates the tonic *client* of `envoy.service.ratelimit.v3.RateLimitService` (the
//! integration tests' and the load generator's cross-check) from a description written
//! here (tonic-build's `manual` builder): pure Rust, no `protoc` needed. The server side
//! is `src/grpc/`, on h2 directly. The messages are hand-written prost structs in
//! `src/proto.rs`, with the field numbers of `proto/` (which the Python protocol tests
//! compile).

fn main() {
    let method = tonic_build::manual::Method::builder()
        .name("should_rate_limit")
        .route_name("ShouldRateLimit")
        .input_type("crate::proto::RateLimitRequest")
        .output_type("crate::proto::RateLimitResponse")
        .codec_path("tonic_prost::ProstCodec")
        .build();
    let service = tonic_build::manual::Service::builder()
        .name("RateLimitService")
        .package("envoy.service.ratelimit.v3")
        .method(method)
        .build();
    tonic_build::manual::Builder::new()
        .build_server(false)
        .compile(&[service]);
    println!("cargo:rerun-if-changed=build.rs");
}
