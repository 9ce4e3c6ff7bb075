//! The quota bounds the guide states (`tollgate::guide::promises`, "Building") are read from
//! its source and checked against the builder: each stated maximum builds, and one more is
//! refused (issue 13: the README then said 1,048,575 per millisecond for `FixedWindow` where
//! the code accepts 2,097,151). Edit a figure there and this test says whether it is true.

use std::time::Duration;
use tollgate::{Algorithm, ConfigError, Quota, RateLimiter};

/// The promises chapter's text: its `//!` lines without the comment marker.
fn promises() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/guide/promises.rs");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The chapter's text with line breaks as spaces.
fn flat() -> String {
    promises().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The number written right after `marker` (digits and thousands commas).
fn number_after(text: &str, marker: &str) -> u64 {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("the promises chapter no longer says {marker:?}"));
    let digits: String = text[at + marker.len()..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

fn builds(algorithm: Algorithm, limit: u64, period: Duration) -> Result<(), ConfigError> {
    let limit = u32::try_from(limit).expect("limit fits u32");
    RateLimiter::builder(algorithm, Quota::new(limit, period))
        .build()
        .map(|_| ())
}

/// `max` builds and `max + 1` does not.
fn is_the_maximum(algorithm: Algorithm, max: u64, period: Duration) {
    assert!(
        builds(algorithm, max, period).is_ok(),
        "{algorithm:?}: the guide says {max} per {period:?} is accepted"
    );
    assert!(
        builds(algorithm, max + 1, period).is_err(),
        "{algorithm:?}: the guide says {max} per {period:?} is the maximum, but {} builds",
        max + 1
    );
}

#[test]
fn the_guide_states_the_window_bounds_the_builder_enforces() {
    let text = flat();
    let sliding = "a `SlidingWindow` takes up to";
    let per_second = number_after(&text, sliding);
    is_the_maximum(Algorithm::SlidingWindow, per_second, Duration::from_secs(1));
    let rest = &text[text.find(sliding).unwrap()..];
    let per_minute = number_after(rest, "per second,");
    is_the_maximum(
        Algorithm::SlidingWindow,
        per_minute,
        Duration::from_secs(60),
    );
    let per_hour = number_after(rest, "per minute or");
    is_the_maximum(
        Algorithm::SlidingWindow,
        per_hour,
        Duration::from_secs(3600),
    );

    let fixed = "a `FixedWindow`";
    let per_ms = number_after(&text, fixed);
    is_the_maximum(Algorithm::FixedWindow, per_ms, Duration::from_millis(1));
    let rest = &text[text.find(fixed).unwrap()..];
    assert!(rest.contains("any `u32` limit per 2.2 s"));
    assert!(builds(
        Algorithm::FixedWindow,
        u64::from(u32::MAX),
        Duration::from_millis(2_200)
    )
    .is_ok());

    let log = number_after(&text, "`SlidingLog` limit above");
    is_the_maximum(Algorithm::SlidingLog, log, Duration::from_secs(1));
}
