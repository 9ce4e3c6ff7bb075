//! The raw client's frame handling on crafted server bytes: padding, CONTINUATION, a
//! message split over DATA frames, a trailers-only error, RST_STREAM, GOAWAY, and
//! garbage.

use crate::conn::Conn;
use crate::h2::*;
use crate::{Args, Plan};
use clap::Parser;
use prost::Message;
use std::time::Instant;
use tollgate_server::proto::RateLimitResponse;

/// A new connection for 4 calls in flight (`--requests 4`), its preface already taken
/// from its output, nothing received yet.
fn new4(now: Instant) -> Conn {
    let a = Args::parse_from(["loadgen", "--requests", "4", "--concurrency", "4"]);
    let mut c = Conn::new(&a, Plan::new(&a, now), 4, 0, 1);
    c.out.clear();
    c
}

/// A connection of 4 calls in flight (`--requests 4`), its preface written, the server's
/// SETTINGS taken and its 4 streams (1, 3, 5, 7) opened.
fn open4() -> Conn {
    let now = Instant::now();
    let mut c = new4(now);
    let mut s = Vec::new();
    put_settings(&mut s, &[(SETTINGS_MAX_CONCURRENT_STREAMS, 100)]);
    assert_eq!(c.on_bytes(&s, now), Ok(s.len()));
    c.fill(now).unwrap();
    assert_eq!(c.live(), 4);
    c
}

/// A gRPC message carrying `RateLimitResponse { overall_code: code }`.
fn message(code: i32) -> Vec<u8> {
    let m = RateLimitResponse {
        overall_code: code,
        ..Default::default()
    }
    .encode_to_vec();
    let mut b = vec![0];
    b.extend_from_slice(&(m.len() as u32).to_be_bytes());
    b.extend_from_slice(&m);
    b
}

/// A frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_header(&mut b, payload.len(), kind, flags, stream);
    b.extend_from_slice(payload);
    b
}

#[test]
fn responses() {
    let mut c = open4();
    let mut b = Vec::new();
    // Stream 1: padded HEADERS (with priority) continued, a padded message split over two
    // DATA frames, trailers ending it: OVER_LIMIT.
    b.extend(frame(
        HEADERS,
        PADDED | PRIORITY_FLAG,
        1,
        &[2, 0, 0, 0, 0, 9, 0x88, 0, 0],
    ));
    b.extend(frame(CONTINUATION, END_HEADERS, 1, &[0x88]));
    let m = message(2);
    let mut first = vec![3];
    first.extend_from_slice(&m[..3]);
    first.extend_from_slice(&[0, 0, 0]);
    b.extend(frame(DATA, PADDED, 1, &first));
    b.extend(frame(DATA, 0, 1, &m[3..]));
    b.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &[0x88]));
    // Stream 3: trailers-only (a gRPC error).
    b.extend(frame(HEADERS, END_HEADERS | END_STREAM, 3, &[0x88]));
    // Stream 5: OK, with a PING and an unknown frame type in between.
    b.extend(frame(HEADERS, END_HEADERS, 5, &[0x88]));
    b.extend(frame(PING, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8]));
    b.extend(frame(0xfa, 0, 5, b"ignored"));
    b.extend(frame(DATA, 0, 5, &message(1)));
    b.extend(frame(HEADERS, END_HEADERS | END_STREAM, 5, &[0x88]));
    // Stream 7: reset.
    b.extend(frame(RST_STREAM, 0, 7, &[0, 0, 0, 2]));
    // Half a frame: left for the next read.
    let whole = b.len();
    b.extend_from_slice(&[0, 0, 8, PING]);
    assert_eq!(c.on_bytes(&b, Instant::now()), Ok(whole));
    assert_eq!(c.live(), 0);
    assert_eq!(
        (c.tally.lat_us.len(), c.tally.over, c.tally.errors),
        (4, 1, 2)
    );
    // The PING was answered.
    assert!(c
        .out
        .ends_with(&frame(PING, ACK, 0, &[1, 2, 3, 4, 5, 6, 7, 8])));
}

#[test]
fn goaway_and_garbage() {
    let mut c = open4();
    let mut g = vec![0, 0, 0, 0, 0, 0, 0, 0];
    g[3] = 3; // last stream 3: 5 and 7 were not processed
    assert!(c.on_bytes(&frame(GOAWAY, 0, 0, &g), Instant::now()).is_ok());
    assert_eq!((c.live(), c.tally.errors), (2, 2));
    let mut c = open4();
    let junk = b"HTTP/1.1 400 Bad Request\r\n\r\n";
    assert!(c.on_bytes(junk, Instant::now()).is_err());
    let mut c = open4();
    // A frame on a stream we never opened.
    assert!(c
        .on_bytes(&frame(DATA, 0, 9, b"x"), Instant::now())
        .is_err());
}

/// The DATA frames in `out` (stream ids).
fn data_frames(out: &[u8]) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut pos = 0;
    while pos + HEADER_LEN <= out.len() {
        let f = parse_header(&out[pos..]);
        if f.kind == DATA {
            ids.push(f.stream);
        }
        pos += HEADER_LEN + f.len;
    }
    ids
}

#[test]
fn send_windows() {
    let now = Instant::now();
    let mut c = new4(now);
    // Streams start with a window of 10 bytes: HEADERS only, the bodies wait.
    let mut s = Vec::new();
    put_settings(&mut s, &[(SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    c.on_bytes(&s, now).unwrap();
    c.fill(now).unwrap();
    assert_eq!(c.live(), 4);
    assert!(data_frames(&c.out).is_empty());
    c.out.clear();
    // A WINDOW_UPDATE on stream 3 lets its body go.
    let mut w = Vec::new();
    put_window_update(&mut w, 3, 1000);
    c.on_bytes(&w, now).unwrap();
    assert_eq!(data_frames(&c.out), [3]);
    c.out.clear();
    // A larger initial window lets the others go.
    let mut s = Vec::new();
    put_settings(&mut s, &[(SETTINGS_INITIAL_WINDOW_SIZE, 65_535)]);
    c.on_bytes(&s, now).unwrap();
    assert_eq!(data_frames(&c.out), [1, 5, 7]);
}
