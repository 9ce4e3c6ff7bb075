//! The open streams of one connection, by identifier: a ring indexed by
//! `(id - first) / 2`, since the client opens odd identifiers in order and most streams
//! finish in about the order they were opened. Finding a stream is an index, opening and
//! closing one allocate nothing once the ring has grown to the calls in flight.

use std::collections::VecDeque;
use std::time::Instant;

/// Why a call failed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Failure {
    /// The server reset its stream (or broke its flow control).
    Reset = 0,
    /// Above the last stream of the server's GOAWAY: never processed.
    Refused = 1,
    /// It ended without a response message (a gRPC error: a trailers-only response).
    NoMessage = 2,
    /// Its response message was unusable (undecodable, compressed, cut, or two).
    BadMessage = 3,
    /// In flight when the connection failed.
    Lost = 4,
}

impl Failure {
    /// How many kinds there are.
    pub(crate) const KINDS: usize = 5;
    /// Each kind's description, by its number.
    pub(crate) const NAMES: [&'static str; Failure::KINDS] = [
        "reset by the server",
        "refused by the server's GOAWAY",
        "ended without a response message (a gRPC error status)",
        "an unusable response message",
        "lost with their connection",
    ];
}

/// A closed stream: when it started, its outcome, whether its body was still unsent.
pub(crate) type Closed = (Instant, Result<i32, Failure>, bool);

/// One call's stream.
#[derive(Debug)]
pub(crate) struct Stream {
    /// Its identifier.
    pub(crate) id: u32,
    /// When its request was handed to the write.
    pub(crate) start: Instant,
    /// Our send window on it (the server's initial window, less what we sent, plus its
    /// WINDOW_UPDATEs).
    pub(crate) window: i64,
    /// The call number whose request body still waits for send window (HEADERS sent).
    pub(crate) body: Option<u64>,
    /// The response message's `overall_code`, once decoded.
    pub(crate) code: Option<i32>,
    /// The response was unusable (a second message, a compressed or undecodable one).
    pub(crate) bad: bool,
    /// Bytes of a response message split over DATA frames, until it is whole.
    pub(crate) partial: Vec<u8>,
    /// Still open (a closed stream waits in the ring until those before it close).
    open: bool,
}

/// The open streams of a connection.
#[derive(Debug, Default)]
pub(crate) struct Streams {
    /// From the oldest stream not yet removed.
    ring: VecDeque<Stream>,
    /// How many of the ring's streams are open.
    live: usize,
}

impl Streams {
    /// Streams open.
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// Opens stream `id` (greater than every stream opened before).
    pub(crate) fn open(&mut self, id: u32, start: Instant, window: i64, body: Option<u64>) {
        if let Some(last) = self.ring.back() {
            // Identifiers advance by 2; a gap would break the indexing.
            debug_assert_eq!(id, last.id + 2);
        }
        self.ring.push_back(Stream {
            id,
            start,
            window,
            body,
            code: None,
            bad: false,
            partial: Vec::new(),
            open: true,
        });
        self.live += 1;
    }

    /// The open stream `id`, if any.
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut Stream> {
        let first = self.ring.front()?.id;
        let i = id.checked_sub(first)? as usize / 2;
        self.ring.get_mut(i).filter(|s| s.open && s.id == id)
    }

    /// Closes stream `id` if it is open: a success if it carried one whole response
    /// message and `failed` is `None`.
    pub(crate) fn close(&mut self, id: u32, failed: Option<Failure>) -> Option<Closed> {
        let s = self.get_mut(id)?;
        s.open = false;
        let outcome = match (failed, s.code) {
            (Some(f), _) => Err(f),
            _ if s.bad || !s.partial.is_empty() => Err(Failure::BadMessage),
            (None, Some(code)) => Ok(code),
            (None, None) => Err(Failure::NoMessage),
        };
        let closed = (s.start, outcome, s.body.is_some());
        self.live -= 1;
        while self.ring.front().is_some_and(|s| !s.open) {
            self.ring.pop_front();
        }
        Some(closed)
    }

    /// Sets the start of the `n` streams opened last.
    pub(crate) fn stamp_last(&mut self, n: usize, start: Instant) {
        for s in self.ring.iter_mut().rev().take(n) {
            s.start = start;
        }
    }

    /// The open streams, oldest first.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.ring.iter_mut().filter(|s| s.open)
    }

    /// Identifiers of the open streams above `last` (those a GOAWAY did not process).
    pub(crate) fn ids_above(&self, last: u32) -> Vec<u32> {
        self.ring
            .iter()
            .filter(|s| s.open && s.id > last)
            .map(|s| s.id)
            .collect()
    }
}
