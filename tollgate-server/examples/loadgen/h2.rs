//! The pieces of HTTP/2 (RFC 9113) the raw client needs: frame types, flags and settings,
//! frame headers read and written, the control frames it sends, and the HPACK (RFC 7541)
//! encoding of its request headers: static-table indices and literals, no Huffman coding;
//! the dynamic table used only as real clients use it (a connection's first request adds
//! its headers, later ones refer to them).

/// The client connection preface.
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Bytes in a frame header.
pub(crate) const HEADER_LEN: usize = 9;

/// DATA frame.
pub(crate) const DATA: u8 = 0x0;
/// HEADERS frame.
pub(crate) const HEADERS: u8 = 0x1;
/// PRIORITY frame.
pub(crate) const PRIORITY: u8 = 0x2;
/// RST_STREAM frame.
pub(crate) const RST_STREAM: u8 = 0x3;
/// SETTINGS frame.
pub(crate) const SETTINGS: u8 = 0x4;
/// PUSH_PROMISE frame.
pub(crate) const PUSH_PROMISE: u8 = 0x5;
/// PING frame.
pub(crate) const PING: u8 = 0x6;
/// GOAWAY frame.
pub(crate) const GOAWAY: u8 = 0x7;
/// WINDOW_UPDATE frame.
pub(crate) const WINDOW_UPDATE: u8 = 0x8;
/// CONTINUATION frame.
pub(crate) const CONTINUATION: u8 = 0x9;

/// END_STREAM flag (DATA, HEADERS).
pub(crate) const END_STREAM: u8 = 0x1;
/// ACK flag (SETTINGS, PING).
pub(crate) const ACK: u8 = 0x1;
/// END_HEADERS flag (HEADERS, CONTINUATION).
pub(crate) const END_HEADERS: u8 = 0x4;
/// PADDED flag (DATA, HEADERS).
pub(crate) const PADDED: u8 = 0x8;
/// PRIORITY flag (HEADERS).
pub(crate) const PRIORITY_FLAG: u8 = 0x20;

/// SETTINGS_HEADER_TABLE_SIZE.
pub(crate) const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
/// SETTINGS_ENABLE_PUSH.
pub(crate) const SETTINGS_ENABLE_PUSH: u16 = 0x2;
/// SETTINGS_MAX_CONCURRENT_STREAMS.
pub(crate) const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
/// SETTINGS_INITIAL_WINDOW_SIZE.
pub(crate) const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
/// SETTINGS_MAX_FRAME_SIZE.
pub(crate) const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;

/// The largest flow-control window (and stream identifier).
pub(crate) const MAX_WINDOW: i64 = (1 << 31) - 1;
/// The flow-control windows every connection and stream starts with.
pub(crate) const DEFAULT_WINDOW: i64 = 65_535;
/// The largest frame payload either side may send until told otherwise (we never raise
/// ours, so it bounds what the server sends us).
pub(crate) const DEFAULT_MAX_FRAME: usize = 16_384;
/// The dynamic table size an HPACK decoder starts with.
pub(crate) const DEFAULT_HEADER_TABLE: u32 = 4_096;

/// A frame's 9-byte header.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameHeader {
    /// Payload length.
    pub(crate) len: usize,
    /// Frame type.
    pub(crate) kind: u8,
    /// Flags.
    pub(crate) flags: u8,
    /// Stream identifier (the reserved bit cleared).
    pub(crate) stream: u32,
}

/// Reads the frame header at the start of `b` (at least [`HEADER_LEN`] bytes).
pub(crate) fn parse_header(b: &[u8]) -> FrameHeader {
    FrameHeader {
        len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
        kind: b[3],
        flags: b[4],
        stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
    }
}

/// Appends a frame header.
pub(crate) fn put_header(buf: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(len < 1 << 24);
    buf.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    buf.extend_from_slice(&stream.to_be_bytes());
}

/// Writes a frame header over the 9 bytes at `at` (reserved earlier, once the payload's
/// length is known).
pub(crate) fn patch_header(
    buf: &mut [u8],
    at: usize,
    len: usize,
    kind: u8,
    flags: u8,
    stream: u32,
) {
    let s = stream.to_be_bytes();
    buf[at..at + HEADER_LEN].copy_from_slice(&[
        (len >> 16) as u8,
        (len >> 8) as u8,
        len as u8,
        kind,
        flags,
        s[0],
        s[1],
        s[2],
        s[3],
    ]);
}

/// Appends a SETTINGS frame with `settings`.
pub(crate) fn put_settings(buf: &mut Vec<u8>, settings: &[(u16, u32)]) {
    put_header(buf, settings.len() * 6, SETTINGS, 0, 0);
    for (id, value) in settings {
        buf.extend_from_slice(&id.to_be_bytes());
        buf.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends a WINDOW_UPDATE frame.
pub(crate) fn put_window_update(buf: &mut Vec<u8>, stream: u32, increment: u32) {
    put_header(buf, 4, WINDOW_UPDATE, 0, stream);
    buf.extend_from_slice(&increment.to_be_bytes());
}

/// Appends a GOAWAY frame.
pub(crate) fn put_goaway(buf: &mut Vec<u8>, last_stream: u32, code: u32) {
    put_header(buf, 8, GOAWAY, 0, 0);
    buf.extend_from_slice(&last_stream.to_be_bytes());
    buf.extend_from_slice(&code.to_be_bytes());
}

/// The part of a DATA or HEADERS payload after its padding length (and, for HEADERS with
/// PRIORITY, the priority fields), without its padding; `None` if the padding does not
/// fit (a PROTOCOL_ERROR).
pub(crate) fn unpad(payload: &[u8], flags: u8, priority: bool) -> Option<&[u8]> {
    let (pad, mut from) = if flags & PADDED != 0 {
        (usize::from(*payload.first()?), 1)
    } else {
        (0, 0)
    };
    if priority && flags & PRIORITY_FLAG != 0 {
        from += 5;
    }
    let to = payload.len().checked_sub(pad)?;
    payload.get(from..to)
}

/// The name of an HTTP/2 error code, for messages.
pub(crate) fn error_name(code: u32) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => "unknown error code",
    }
}

/// Appends an HPACK integer with an `n`-bit prefix, the prefix's upper bits `first`.
fn put_int(buf: &mut Vec<u8>, n: u32, first: u8, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        buf.push(first | value as u8);
        return;
    }
    buf.push(first | max as u8);
    value -= max;
    while value >= 128 {
        buf.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    buf.push(value as u8);
}

/// Appends an HPACK string literal, not Huffman-coded.
fn put_str(buf: &mut Vec<u8>, s: &[u8]) {
    put_int(buf, 7, 0, s.len());
    buf.extend_from_slice(s);
}

/// Appends a "literal header field without indexing" whose name is static-table entry
/// `index`.
fn put_literal_indexed_name(buf: &mut Vec<u8>, index: usize, value: &[u8]) {
    put_int(buf, 4, 0x00, index);
    put_str(buf, value);
}

/// The header block of every request: `POST http://{authority}{path}`, gRPC's content
/// type and `te: trailers`. The same bytes for every call (no dynamic table).
pub(crate) fn request_headers(authority: &str, path: &str) -> Vec<u8> {
    let mut b = Vec::new();
    b.push(0x83); // :method POST (static 3)
    b.push(0x86); // :scheme http (static 6)
    put_literal_indexed_name(&mut b, 4, path.as_bytes()); // :path
    put_literal_indexed_name(&mut b, 1, authority.as_bytes()); // :authority
    put_literal_indexed_name(&mut b, 31, b"application/grpc"); // content-type
    b.push(0x00); // literal without indexing, new name
    put_str(&mut b, b"te");
    put_str(&mut b, b"trailers");
    b
}

/// Appends a "literal header field with incremental indexing" (the server's decoder adds
/// it to its dynamic table) whose name is static-table entry `index`, or a new name when
/// `index` is 0.
fn put_indexing(buf: &mut Vec<u8>, index: usize, name: &[u8], value: &[u8]) {
    put_int(buf, 6, 0x40, index);
    if index == 0 {
        put_str(buf, name);
    }
    put_str(buf, value);
}

/// The request headers with HPACK's dynamic table: the block of a connection's first
/// request (which inserts `:path`, `:authority`, `content-type` and `te`, in that order,
/// so `te` is dynamic index 62 and `:path` 65) and the block of every later request
/// (six one-byte indices). Their entries take 4 × 32 bytes plus the names and values,
/// well within the 4,096 bytes a decoder starts with.
pub(crate) fn request_headers_indexed(authority: &str, path: &str) -> (Vec<u8>, Vec<u8>) {
    let mut first = vec![0x83, 0x86]; // :method POST, :scheme http (static 3, 6)
    put_indexing(&mut first, 4, b"", path.as_bytes());
    put_indexing(&mut first, 1, b"", authority.as_bytes());
    put_indexing(&mut first, 31, b"", b"application/grpc");
    put_indexing(&mut first, 0, b"te", b"trailers");
    // Indexed fields: the most recent insertion is index 62.
    let later = vec![0x83, 0x86, 0x80 | 65, 0x80 | 64, 0x80 | 63, 0x80 | 62];
    (first, later)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        let mut b = Vec::new();
        put_int(&mut b, 5, 0, 10);
        put_int(&mut b, 5, 0, 1337);
        put_int(&mut b, 4, 0, 31);
        assert_eq!(b, [10, 31, 154, 10, 15, 16]); // RFC 7541 C.1.1, C.1.2
    }

    #[test]
    fn padding() {
        assert_eq!(unpad(&[2, 7, 8, 0, 0], PADDED, false), Some(&[7u8, 8][..]));
        assert_eq!(unpad(&[9, 7], PADDED, false), None);
        assert_eq!(
            unpad(&[0, 1, 2, 3, 4, 5, 6], PRIORITY_FLAG, true),
            Some(&[5u8, 6][..])
        );
        assert_eq!(unpad(&[1, 2], 0, false), Some(&[1u8, 2][..]));
    }
}
