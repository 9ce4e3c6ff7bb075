//! The Envoy rate limit service's messages (`envoy.service.ratelimit.v3` and the types it
//! uses), written as prost structs with Envoy's field numbers, and the tonic service that
//! `build.rs` generates for them. `proto/` holds the same messages as `.proto` files (the
//! Python protocol tests compile those), so the two are checked against each other on the
//! wire by every test run.

#![allow(missing_docs, unreachable_pub, clippy::doc_markdown)]

/// A header name and value (`envoy.config.core.v3.HeaderValue`).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct HeaderValue {
    /// The header's name.
    #[prost(string, tag = "1")]
    pub key: String,
    /// The header's value.
    #[prost(string, tag = "2")]
    pub value: String,
    /// The value as raw bytes (unused by this server).
    #[prost(bytes = "vec", tag = "3")]
    pub raw_value: Vec<u8>,
}

/// One (key, value) pair of a descriptor.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct Entry {
    /// The entry's key.
    #[prost(string, tag = "1")]
    pub key: String,
    /// The entry's value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// A limit the caller asks for in place of the configured one.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RateLimitOverride {
    /// Requests per unit.
    #[prost(uint32, tag = "1")]
    pub requests_per_unit: u32,
    /// The unit (`envoy.type.v3.RateLimitUnit`; the same numbers as [`Unit`]).
    #[prost(int32, tag = "2")]
    pub unit: i32,
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RateLimitDescriptor {
    /// The entries, most general first.
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<Entry>,
    /// The caller's own limit for this descriptor.
    #[prost(message, optional, tag = "2")]
    pub limit: Option<RateLimitOverride>,
    /// Hits this descriptor adds (`google.protobuf.UInt64Value`), instead of the request's.
    #[prost(message, optional, tag = "3")]
    pub hits_addend: Option<u64>,
    /// Give the hits back instead of taking them (`give_back` on the matched limit).
    #[prost(bool, tag = "4")]
    pub is_negative_hits: bool,
}

/// `envoy.service.ratelimit.v3.RateLimitRequest`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RateLimitRequest {
    /// The configuration domain.
    #[prost(string, tag = "1")]
    pub domain: String,
    /// What to limit on: every descriptor must be within its limit.
    #[prost(message, repeated, tag = "2")]
    pub descriptors: Vec<RateLimitDescriptor>,
    /// Hits this request adds to each matched limit (0 means 1).
    #[prost(uint32, tag = "3")]
    pub hits_addend: u32,
}

/// `RateLimitResponse.Code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ::prost::Enumeration)]
#[repr(i32)]
pub enum Code {
    /// Not decided.
    Unknown = 0,
    /// Within every limit.
    Ok = 1,
    /// Over some limit.
    OverLimit = 2,
}

impl Code {
    /// The protobuf name, as the JSON endpoint writes it.
    pub fn as_str_name(self) -> &'static str {
        match self {
            Code::Unknown => "UNKNOWN",
            Code::Ok => "OK",
            Code::OverLimit => "OVER_LIMIT",
        }
    }
}

/// `RateLimitResponse.RateLimit.Unit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ::prost::Enumeration)]
#[repr(i32)]
pub enum Unit {
    /// Not known.
    Unknown = 0,
    /// A second.
    Second = 1,
    /// A minute.
    Minute = 2,
    /// An hour.
    Hour = 3,
    /// A day.
    Day = 4,
    /// A month (30 days, as envoyproxy/ratelimit counts it).
    Month = 5,
    /// A year (365 days).
    Year = 6,
    /// A week.
    Week = 7,
}

/// `RateLimitResponse.RateLimit`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RateLimit {
    /// The limit's name, when the configuration gives one.
    #[prost(string, tag = "3")]
    pub name: String,
    /// Requests per unit.
    #[prost(uint32, tag = "1")]
    pub requests_per_unit: u32,
    /// The unit.
    #[prost(enumeration = "Unit", tag = "2")]
    pub unit: i32,
}

/// `RateLimitResponse.DescriptorStatus`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct DescriptorStatus {
    /// This descriptor's outcome.
    #[prost(enumeration = "Code", tag = "1")]
    pub code: i32,
    /// The limit that decided it (none when no limit matched or it is unlimited).
    #[prost(message, optional, tag = "2")]
    pub current_limit: Option<RateLimit>,
    /// Requests left in the current window.
    #[prost(uint32, tag = "3")]
    pub limit_remaining: u32,
    /// Time until the limit is whole again.
    #[prost(message, optional, tag = "4")]
    pub duration_until_reset: Option<::prost_types::Duration>,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RateLimitResponse {
    /// The outcome over every descriptor.
    #[prost(enumeration = "Code", tag = "1")]
    pub overall_code: i32,
    /// One status per descriptor of the request, in order.
    #[prost(message, repeated, tag = "2")]
    pub statuses: Vec<DescriptorStatus>,
    /// Headers Envoy adds to the response it sends downstream.
    #[prost(message, repeated, tag = "3")]
    pub response_headers_to_add: Vec<HeaderValue>,
    /// Headers Envoy adds to the request it sends upstream.
    #[prost(message, repeated, tag = "4")]
    pub request_headers_to_add: Vec<HeaderValue>,
}

/// The generated tonic server and client of `RateLimitService`.
pub mod rate_limit_service {
    include!(concat!(
        env!("OUT_DIR"),
        "/envoy.service.ratelimit.v3.RateLimitService.rs"
    ));
}
