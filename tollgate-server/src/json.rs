//! The JSON shapes of `POST /json`: envoyproxy/ratelimit's, which are the protobuf JSON
//! mapping of `RateLimitRequest` and `RateLimitResponse` (field names in lowerCamelCase or
//! as in the .proto, enums by name, 64-bit numbers as numbers or strings, durations as
//! `"12.5s"`, zero values left out).

use crate::config::Unit;
use crate::proto::{
    Code, Entry, RateLimitDescriptor, RateLimitOverride, RateLimitRequest, RateLimitResponse,
};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// A number written as a JSON number or a string (the protobuf JSON mapping allows both).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Num {
    N(u64),
    S(String),
}

impl Num {
    fn get(&self) -> Result<u64, String> {
        match self {
            Num::N(n) => Ok(*n),
            Num::S(s) => s.parse().map_err(|_| format!("`{s}` is not a number")),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEntry {
    key: String,
    #[serde(default)]
    value: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonOverride {
    #[serde(alias = "requestsPerUnit")]
    requests_per_unit: Num,
    unit: Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Vec<JsonEntry>,
    #[serde(default)]
    limit: Option<JsonOverride>,
    #[serde(default, alias = "hitsAddend")]
    hits_addend: Option<Num>,
    #[serde(default, alias = "isNegativeHits")]
    is_negative_hits: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    descriptors: Vec<JsonDescriptor>,
    #[serde(default, alias = "hitsAddend")]
    hits_addend: Option<Num>,
}

fn unit_of(v: &Value) -> Result<i32, String> {
    match v {
        Value::String(s) => Unit::parse(s)
            .map(Unit::proto)
            .ok_or_else(|| format!("unknown unit `{s}`")),
        Value::Number(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| format!("unit {n} out of range")),
        _ => Err("unit must be a name or a number".into()),
    }
}

/// Parses a `/json` body.
///
/// # Errors
///
/// A message saying what is wrong (invalid UTF-8, invalid JSON, a wrong field).
pub fn parse_request(body: &[u8]) -> Result<RateLimitRequest, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("body is not UTF-8: {e}"))?;
    let r: JsonRequest = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let hits = match &r.hits_addend {
        Some(n) => {
            u32::try_from(n.get()?).map_err(|_| "hits_addend exceeds 2^32 - 1".to_string())?
        }
        None => 0,
    };
    let mut descriptors = Vec::with_capacity(r.descriptors.len());
    for d in r.descriptors {
        let limit = match d.limit {
            Some(l) => Some(RateLimitOverride {
                requests_per_unit: u32::try_from(l.requests_per_unit.get()?)
                    .map_err(|_| "requests_per_unit exceeds 2^32 - 1".to_string())?,
                unit: unit_of(&l.unit)?,
            }),
            None => None,
        };
        descriptors.push(RateLimitDescriptor {
            entries: d
                .entries
                .into_iter()
                .map(|e| Entry {
                    key: e.key,
                    value: e.value,
                })
                .collect(),
            limit,
            hits_addend: d.hits_addend.map(|n| n.get()).transpose()?,
            is_negative_hits: d.is_negative_hits,
        });
    }
    Ok(RateLimitRequest {
        domain: r.domain,
        descriptors,
        hits_addend: hits,
    })
}

fn code_name(n: i32) -> &'static str {
    match n {
        1 => Code::Ok.as_str_name(),
        2 => Code::OverLimit.as_str_name(),
        _ => Code::Unknown.as_str_name(),
    }
}

/// A duration in the protobuf JSON mapping: seconds with 0, 3, 6 or 9 decimals and `s`.
fn duration(d: &prost_types::Duration) -> String {
    if d.nanos == 0 {
        format!("{}s", d.seconds)
    } else if d.nanos % 1_000_000 == 0 {
        format!("{}.{:03}s", d.seconds, d.nanos / 1_000_000)
    } else if d.nanos % 1_000 == 0 {
        format!("{}.{:06}s", d.seconds, d.nanos / 1_000)
    } else {
        format!("{}.{:09}s", d.seconds, d.nanos)
    }
}

/// The JSON of a response, as envoyproxy/ratelimit writes it.
pub fn response_json(r: &RateLimitResponse) -> Value {
    let mut out = Map::new();
    out.insert("overallCode".into(), json!(code_name(r.overall_code)));
    let statuses: Vec<Value> = r
        .statuses
        .iter()
        .map(|s| {
            let mut m = Map::new();
            m.insert("code".into(), json!(code_name(s.code)));
            if let Some(l) = &s.current_limit {
                let mut cl = Map::new();
                if !l.name.is_empty() {
                    cl.insert("name".into(), json!(l.name));
                }
                if l.requests_per_unit != 0 {
                    cl.insert("requestsPerUnit".into(), json!(l.requests_per_unit));
                }
                if let Some(u) = Unit::from_proto(l.unit) {
                    cl.insert("unit".into(), json!(u.name()));
                }
                m.insert("currentLimit".into(), Value::Object(cl));
            }
            if s.limit_remaining != 0 {
                m.insert("limitRemaining".into(), json!(s.limit_remaining));
            }
            if let Some(d) = &s.duration_until_reset {
                m.insert("durationUntilReset".into(), json!(duration(d)));
            }
            Value::Object(m)
        })
        .collect();
    if !statuses.is_empty() {
        out.insert("statuses".into(), Value::Array(statuses));
    }
    let hv = |hs: &[crate::proto::HeaderValue]| {
        Value::Array(
            hs.iter()
                .map(|h| json!({"key": h.key, "value": h.value}))
                .collect(),
        )
    };
    if !r.response_headers_to_add.is_empty() {
        out.insert(
            "responseHeadersToAdd".into(),
            hv(&r.response_headers_to_add),
        );
    }
    if !r.request_headers_to_add.is_empty() {
        out.insert("requestHeadersToAdd".into(), hv(&r.request_headers_to_add));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_field_spellings_and_string_numbers() {
        let r = parse_request(br#"{"domain":"d","hitsAddend":3,"descriptors":[{"entries":[{"key":"k","value":"v"}],"hits_addend":"7","limit":{"requestsPerUnit":5,"unit":"MINUTE"}}]}"#).unwrap();
        assert_eq!(r.hits_addend, 3);
        assert_eq!(r.descriptors[0].hits_addend, Some(7));
        assert_eq!(r.descriptors[0].limit.as_ref().unwrap().unit, 2);
    }

    #[test]
    fn bad_bodies_say_why() {
        assert!(parse_request(b"\xff\xfe").unwrap_err().contains("UTF-8"));
        assert!(parse_request(b"{").unwrap_err().contains("invalid JSON"));
        assert!(parse_request(br#"{"domain":"d","hits_addend":99999999999}"#).is_err());
        assert!(parse_request(br#"{"domain":"d","bogus":1}"#)
            .unwrap_err()
            .contains("bogus"));
    }

    #[test]
    fn durations() {
        let d = |s, n| {
            duration(&prost_types::Duration {
                seconds: s,
                nanos: n,
            })
        };
        assert_eq!(d(12, 0), "12s");
        assert_eq!(d(1, 500_000_000), "1.500s");
        assert_eq!(d(0, 1), "0.000000001s");
    }
}
