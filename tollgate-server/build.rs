//! Generates the tonic server and client of `envoy.service.ratelimit.v3.RateLimitService`
//! from a description written here (tonic-build's `manual` builder): pure Rust, no
//! `protoc` needed. The codec is `src/codec.rs` (prost, malformed requests answered
//! INVALID_ARGUMENT). The messages are hand-written prost structs in `src/proto.rs`, with
//! the field numbers of `proto/` (which the Python protocol tests compile).

fn main() {
    let method = tonic_build::manual::Method::builder()
        .name("should_rate_limit")
        .route_name("ShouldRateLimit")
        .input_type("crate::proto::RateLimitRequest")
        .output_type("crate::proto::RateLimitResponse")
        .codec_path("crate::codec::RlsCodec")
        .build();
    let service = tonic_build::manual::Service::builder()
        .name("RateLimitService")
        .package("envoy.service.ratelimit.v3")
        .method(method)
        .build();
    tonic_build::manual::Builder::new().compile(&[service]);
    println!("cargo:rerun-if-changed=build.rs");
}
