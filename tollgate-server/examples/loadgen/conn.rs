//! One HTTP/2 connection of `--api grpc-raw`, without its socket: the requests it opens
//! (pre-encoded headers, a prost-encoded body per call, written into one buffer), the
//! frames it parses (no HPACK decoder: a call's outcome is its DATA message and its
//! END_STREAM), the settings and flow-control windows of both sides, and the tally of
//! finished calls. `raw.rs` moves its bytes.

use crate::h2::*;
use crate::message::{put_body, take_message};
use crate::streams::{Failure, Streams};
use crate::{request, Args, Plan, Tally};
use std::time::Instant;
use tollgate_server::proto::{RateLimitRequest, RateLimitResponse};

/// DATA bytes received before they are given back to the connection's window, in one
/// WINDOW_UPDATE (the window is 2^31-1, so this only keeps it from running down).
const WINDOW_BATCH: u64 = 1 << 20;

/// A connection's protocol state and its calls.
pub(crate) struct Conn {
    /// The HEADERS block of every request.
    headers: Vec<u8>,
    /// The header block of the requests after the first, once the first (which fills the
    /// server's dynamic table) is sent.
    later_headers: Option<Vec<u8>>,
    /// The literal header block, for a server that lowers its dynamic table's size.
    literal_headers: Vec<u8>,
    /// The request, reused: only its descriptor value changes from call to call.
    req: RateLimitRequest,
    /// Distinct descriptor values.
    keys: u64,
    /// The next call's number (its value is `v{call % keys}`).
    next_call: u64,
    /// How far call numbers advance (the number of connections).
    call_step: u64,
    /// Calls in flight wanted on this connection.
    target: usize,
    /// When calls are opened and counted.
    plan: Plan,
    /// Calls opened.
    opened: u64,
    /// Calls finished (counted or not).
    pub(crate) finished: u64,
    /// The server's first SETTINGS arrived (no stream is opened before: its
    /// SETTINGS_MAX_CONCURRENT_STREAMS may be lower than our calls in flight).
    settings_seen: bool,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS.
    peer_max_streams: usize,
    /// The server's SETTINGS_INITIAL_WINDOW_SIZE: our send window on a new stream.
    peer_window: i64,
    /// The server's SETTINGS_MAX_FRAME_SIZE.
    peer_max_frame: usize,
    /// The dynamic table size the server's HPACK decoder may assume we use.
    peer_table: u32,
    /// Our send window on the connection.
    send_window: i64,
    /// The next header block starts with a dynamic table size update to 0 (the server
    /// lowered SETTINGS_HEADER_TABLE_SIZE).
    table_update: bool,
    /// DATA bytes received and not yet given back with a WINDOW_UPDATE.
    unacked: u64,
    /// A header block awaiting CONTINUATION: its stream and whether it ends the stream.
    continuation: Option<(u32, bool)>,
    /// The server's GOAWAY: last stream it processes, error code.
    goaway: Option<(u32, u32)>,
    /// The next stream identifier.
    next_id: u32,
    /// The streams in flight.
    streams: Streams,
    /// Streams whose request body waits for send window.
    pending_bodies: usize,
    /// The response, reused for decoding.
    resp: RateLimitResponse,
    /// Streams opened since the last [`Conn::stamp`].
    new_streams: usize,
    /// Bytes to write.
    pub(crate) out: Vec<u8>,
    /// The counted calls.
    pub(crate) tally: Tally,
    /// Failed calls by [`Failure`] (counted or not).
    pub(crate) failures: [u64; Failure::KINDS],
}

impl Conn {
    /// A connection carrying `target` calls in flight, numbered `first`, `first + step`, …;
    /// its output starts with the preface, our SETTINGS and the connection's
    /// WINDOW_UPDATE.
    pub(crate) fn new(a: &Args, plan: Plan, target: usize, first: u64, step: u64) -> Conn {
        let mut out = Vec::with_capacity(64 * 1024);
        out.extend_from_slice(PREFACE);
        put_settings(
            &mut out,
            &[
                (SETTINGS_ENABLE_PUSH, 0),
                (SETTINGS_INITIAL_WINDOW_SIZE, MAX_WINDOW as u32),
            ],
        );
        put_window_update(&mut out, 0, (MAX_WINDOW - DEFAULT_WINDOW) as u32);
        let (headers, later_headers) = if a.hpack == "literal" {
            (request_headers(&a.target, &a.path), None)
        } else {
            let (first, later) = request_headers_indexed(&a.target, &a.path);
            (first, Some(later))
        };
        Conn {
            headers,
            later_headers,
            literal_headers: request_headers(&a.target, &a.path),
            req: request(a, 0),
            keys: a.keys.max(1),
            next_call: first,
            call_step: step,
            target,
            plan,
            opened: 0,
            finished: 0,
            settings_seen: false,
            peer_max_streams: usize::MAX,
            peer_window: DEFAULT_WINDOW,
            peer_max_frame: DEFAULT_MAX_FRAME,
            peer_table: DEFAULT_HEADER_TABLE,
            send_window: DEFAULT_WINDOW,
            table_update: false,
            unacked: 0,
            continuation: None,
            goaway: None,
            next_id: 1,
            streams: Streams::default(),
            pending_bodies: 0,
            resp: RateLimitResponse::default(),
            new_streams: 0,
            out,
            tally: Tally {
                lat_us: Vec::with_capacity(1 << 16),
                ..Tally::default()
            },
            failures: [0; Failure::KINDS],
        }
    }

    /// Calls in flight.
    pub(crate) fn live(&self) -> usize {
        self.streams.live()
    }

    /// What the connection waits for, for error messages.
    pub(crate) fn waiting(&self) -> String {
        if self.settings_seen {
            format!("{} calls in flight", self.live())
        } else {
            "no SETTINGS from the server yet".into()
        }
    }

    /// More calls are to be opened.
    fn wants_more(&self, now: Instant) -> bool {
        match self.plan.share {
            Some(n) => self.opened < n,
            None => now < self.plan.end,
        }
    }

    /// Opens every call that can be opened now: up to the calls in flight wanted and the
    /// server's stream limit, while the connection's send window takes its body.
    pub(crate) fn fill(&mut self, now: Instant) -> Result<(), String> {
        if !self.settings_seen || self.goaway.is_some() {
            return Ok(());
        }
        let limit = self.target.min(self.peer_max_streams);
        while self.streams.live() < limit && self.wants_more(now) {
            let id = self.next_id;
            if i64::from(id) > MAX_WINDOW {
                return Err(format!(
                    "stream identifiers used up after {} calls (use more connections)",
                    self.opened
                ));
            }
            let h = self.out.len();
            let block = self.headers.len() + usize::from(self.table_update);
            put_header(&mut self.out, block, HEADERS, END_HEADERS, id);
            if self.table_update {
                self.out.push(0x20); // dynamic table size update: 0
            }
            self.out.extend_from_slice(&self.headers);
            let d = self.out.len();
            let body = put_body(&mut self.out, &mut self.req, self.keys, self.next_call, id);
            if body > self.peer_max_frame {
                return Err(format!(
                    "a request body of {body} bytes exceeds the server's SETTINGS_MAX_FRAME_SIZE"
                ));
            }
            if body as i64 > self.send_window {
                // Wait for the server's WINDOW_UPDATE on the connection.
                self.out.truncate(h);
                break;
            }
            self.table_update = false;
            if let Some(later) = self.later_headers.take() {
                self.headers = later;
            }
            let pending = if body as i64 > self.peer_window {
                // The stream's window cannot take the body yet: HEADERS only.
                self.out.truncate(d);
                self.pending_bodies += 1;
                Some(self.next_call)
            } else {
                self.send_window -= body as i64;
                None
            };
            let window = self.peer_window - if pending.is_none() { body as i64 } else { 0 };
            self.streams.open(id, now, window, pending);
            self.next_id += 2;
            self.next_call += self.call_step;
            self.opened += 1;
            self.new_streams += 1;
        }
        Ok(())
    }

    /// Sends the bodies that waited for window, where the windows now take them.
    fn flush_bodies(&mut self) {
        for s in self.streams.iter_mut() {
            let Some(call) = s.body else { continue };
            let at = self.out.len();
            let body = put_body(&mut self.out, &mut self.req, self.keys, call, s.id);
            if body as i64 > s.window || body as i64 > self.send_window {
                self.out.truncate(at);
                continue;
            }
            s.window -= body as i64;
            self.send_window -= body as i64;
            s.body = None;
            self.pending_bodies -= 1;
        }
    }

    /// Sets the start of the calls opened since the last stamp: their bytes are about to
    /// be handed to the write.
    pub(crate) fn stamp(&mut self, t: Instant) {
        self.streams.stamp_last(self.new_streams, t);
        self.new_streams = 0;
    }

    /// `Some(Ok)` when the connection has done its part (no call in flight, none to
    /// open); `Some(Err)` when it can do no more (a GOAWAY) before its part is done.
    pub(crate) fn done(&self, now: Instant) -> Option<Result<(), String>> {
        if self.streams.live() > 0 {
            return None;
        }
        if !self.wants_more(now) {
            return Some(Ok(()));
        }
        self.goaway.map(|(last, code)| {
            Err(format!(
                "the server sent GOAWAY ({}, last stream {last}) after {} calls",
                error_name(code),
                self.opened
            ))
        })
    }

    /// Parses every whole frame at the start of `buf` (read at `now`); returns the bytes
    /// used. An error is a connection error: the connection is given up.
    pub(crate) fn on_bytes(&mut self, buf: &[u8], now: Instant) -> Result<usize, String> {
        let mut pos = 0;
        while buf.len() - pos >= HEADER_LEN {
            let f = parse_header(&buf[pos..]);
            if !self.settings_seen && (f.kind != SETTINGS || f.flags & ACK != 0) {
                let head = &buf[pos..buf.len().min(pos + 24)];
                return Err(format!(
                    "the server's first frame is not SETTINGS (not HTTP/2?): it begins {:?}",
                    String::from_utf8_lossy(head)
                ));
            }
            if f.len > DEFAULT_MAX_FRAME {
                return Err(format!(
                    "FRAME_SIZE_ERROR: a frame of type {} with {} bytes, over our 16384",
                    f.kind, f.len
                ));
            }
            let end = pos + HEADER_LEN + f.len;
            if end > buf.len() {
                break;
            }
            self.frame(f, &buf[pos + HEADER_LEN..end], now)?;
            pos = end;
        }
        if self.unacked >= WINDOW_BATCH {
            put_window_update(&mut self.out, 0, self.unacked as u32);
            self.unacked = 0;
        }
        Ok(pos)
    }

    /// Handles one frame.
    fn frame(&mut self, f: FrameHeader, p: &[u8], now: Instant) -> Result<(), String> {
        if let Some((sid, _)) = self.continuation {
            if f.kind != CONTINUATION || f.stream != sid {
                return Err(format!(
                    "PROTOCOL_ERROR: a frame of type {} on stream {} where CONTINUATION of stream {sid} was due",
                    f.kind, f.stream
                ));
            }
        }
        let need = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(format!("PROTOCOL_ERROR: {what}"))
            }
        };
        match f.kind {
            DATA => {
                self.ours(f)?;
                self.unacked += f.len as u64;
                let data = unpad(p, f.flags, false)
                    .ok_or_else(|| "PROTOCOL_ERROR: DATA padding exceeds the frame".to_string())?;
                if let Some(s) = self.streams.get_mut(f.stream) {
                    take_message(s, data, &mut self.resp);
                }
                if f.flags & END_STREAM != 0 {
                    self.finish(f.stream, None, now);
                }
            }
            HEADERS => {
                self.ours(f)?;
                need(
                    unpad(p, f.flags, true).is_some(),
                    "HEADERS padding exceeds the frame",
                )?;
                let end_stream = f.flags & END_STREAM != 0;
                if f.flags & END_HEADERS == 0 {
                    self.continuation = Some((f.stream, end_stream));
                } else if end_stream {
                    self.finish(f.stream, None, now);
                }
            }
            CONTINUATION => {
                let Some((sid, end_stream)) = self.continuation else {
                    return Err("PROTOCOL_ERROR: CONTINUATION without HEADERS".into());
                };
                if f.flags & END_HEADERS != 0 {
                    self.continuation = None;
                    if end_stream {
                        self.finish(sid, None, now);
                    }
                }
            }
            PRIORITY => need(f.len == 5 && f.stream != 0, "a malformed PRIORITY")?,
            RST_STREAM => {
                need(f.len == 4, "RST_STREAM of a length other than 4")?;
                self.ours(f)?;
                self.finish(f.stream, Some(Failure::Reset), now);
            }
            SETTINGS => self.settings(f, p)?,
            PUSH_PROMISE => need(false, "PUSH_PROMISE though SETTINGS_ENABLE_PUSH is 0")?,
            PING => {
                need(f.len == 8 && f.stream == 0, "a malformed PING")?;
                if f.flags & ACK == 0 {
                    put_header(&mut self.out, 8, PING, ACK, 0);
                    self.out.extend_from_slice(p);
                }
            }
            GOAWAY => {
                need(f.len >= 8 && f.stream == 0, "a malformed GOAWAY")?;
                let last = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff;
                let code = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
                self.goaway = Some((last, code));
                for id in self.streams.ids_above(last) {
                    self.finish(id, Some(Failure::Refused), now);
                }
            }
            WINDOW_UPDATE => {
                need(f.len == 4, "WINDOW_UPDATE of a length other than 4")?;
                let inc = i64::from(u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff);
                if f.stream == 0 {
                    need(inc > 0, "a WINDOW_UPDATE of 0 on the connection")?;
                    self.send_window += inc;
                    if self.send_window > MAX_WINDOW {
                        return Err(
                            "FLOW_CONTROL_ERROR: the connection's window over 2^31-1".into()
                        );
                    }
                } else {
                    self.ours(f)?;
                    let bad = match self.streams.get_mut(f.stream) {
                        Some(s) => {
                            s.window += inc;
                            inc == 0 || s.window > MAX_WINDOW
                        }
                        None => false,
                    };
                    if bad {
                        self.finish(f.stream, Some(Failure::Reset), now);
                    }
                }
                if self.pending_bodies > 0 {
                    self.flush_bodies();
                }
            }
            _ => {} // Unknown frame types are ignored.
        }
        Ok(())
    }

    /// Checks that a stream frame is on a stream we opened.
    fn ours(&self, f: FrameHeader) -> Result<(), String> {
        if f.stream % 2 == 1 && f.stream < self.next_id {
            Ok(())
        } else {
            Err(format!(
                "PROTOCOL_ERROR: a frame of type {} on stream {}, which we did not open",
                f.kind, f.stream
            ))
        }
    }

    /// Applies the server's SETTINGS and acknowledges them.
    fn settings(&mut self, f: FrameHeader, p: &[u8]) -> Result<(), String> {
        if f.stream != 0 {
            return Err("PROTOCOL_ERROR: SETTINGS on a stream".into());
        }
        if f.flags & ACK != 0 {
            return match f.len {
                0 => Ok(()),
                _ => Err("FRAME_SIZE_ERROR: a SETTINGS ACK with a payload".into()),
            };
        }
        if f.len % 6 != 0 {
            return Err("FRAME_SIZE_ERROR: SETTINGS not a multiple of 6 bytes".into());
        }
        for kv in p.chunks_exact(6) {
            let v = u32::from_be_bytes([kv[2], kv[3], kv[4], kv[5]]);
            match u16::from_be_bytes([kv[0], kv[1]]) {
                SETTINGS_HEADER_TABLE_SIZE if v < self.peer_table => {
                    // From now on no dynamic table: a size update to 0 (which empties
                    // the server's table) and the literal block, which meets any lower
                    // setting.
                    self.table_update = true;
                    self.peer_table = 0;
                    self.headers = self.literal_headers.clone();
                    self.later_headers = None;
                }
                SETTINGS_ENABLE_PUSH if v > 1 => {
                    return Err("PROTOCOL_ERROR: SETTINGS_ENABLE_PUSH over 1".into());
                }
                SETTINGS_MAX_CONCURRENT_STREAMS => self.peer_max_streams = v as usize,
                SETTINGS_INITIAL_WINDOW_SIZE => {
                    let v = i64::from(v);
                    if v > MAX_WINDOW {
                        return Err(
                            "FLOW_CONTROL_ERROR: SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1".into(),
                        );
                    }
                    let delta = v - self.peer_window;
                    for s in self.streams.iter_mut() {
                        s.window += delta;
                        if s.window > MAX_WINDOW {
                            return Err("FLOW_CONTROL_ERROR: a stream's window over 2^31-1".into());
                        }
                    }
                    self.peer_window = v;
                }
                SETTINGS_MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&v) {
                        return Err(format!("PROTOCOL_ERROR: SETTINGS_MAX_FRAME_SIZE {v}"));
                    }
                    self.peer_max_frame = v as usize;
                }
                _ => {} // MAX_HEADER_LIST_SIZE (ours is small) and unknown settings.
            }
        }
        self.settings_seen = true;
        put_header(&mut self.out, 0, SETTINGS, ACK, 0);
        if self.pending_bodies > 0 {
            self.flush_bodies();
        }
        Ok(())
    }

    /// Ends stream `id` (if still open) at `now`: a success if it carried a response
    /// message and `failed` is `None`.
    fn finish(&mut self, id: u32, failed: Option<Failure>, now: Instant) {
        let Some((start, outcome, unsent)) = self.streams.close(id, failed) else {
            return;
        };
        self.finished += 1;
        if unsent {
            self.pending_bodies -= 1;
        }
        if let Err(f) = outcome {
            self.failures[f as usize] += 1;
        }
        if self.plan.share.is_none() && (start < self.plan.warm || now > self.plan.end) {
            return;
        }
        let us = now.saturating_duration_since(start).as_micros();
        self.tally
            .lat_us
            .push(u32::try_from(us).unwrap_or(u32::MAX));
        match outcome {
            Ok(2) => self.tally.over += 1,
            Ok(_) => {}
            Err(_) => self.tally.errors += 1,
        }
    }

    /// Gives the connection up: every call in flight is an error.
    pub(crate) fn fail(&mut self) {
        let lost = self.streams.live() as u64;
        self.tally.errors += lost;
        self.failures[Failure::Lost as usize] += lost;
    }

    /// Queues a GOAWAY (NO_ERROR): the polite end of a connection that did its part.
    pub(crate) fn close(&mut self) {
        put_goaway(&mut self.out, 0, 0);
    }
}
