//! `--api canned-server`: a stand-in gRPC server that answers every call with the same
//! pre-encoded OK response (no HPACK decoding, no request decoding), on one thread. It
//! costs far less per call than tollgate-server, so driving it measures what the raw
//! client itself can do from one core. Not a server to test anything else against.

use crate::h2::*;
use crate::Args;
use prost::Message;
use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tollgate_server::proto::RateLimitResponse;

/// Listens on `--target` and serves every connection until the process is stopped.
pub(crate) async fn run(a: &Args) {
    let listener = TcpListener::bind(&a.target).await.expect("bind --target");
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        tokio::spawn(serve(tcp));
    }
}

/// The frames answering a call on stream 0 (to be patched): response HEADERS, the DATA
/// message (an OK `RateLimitResponse`), the trailers; and where their stream ids are.
fn response() -> (Vec<u8>, [usize; 3]) {
    let message = RateLimitResponse {
        overall_code: 1,
        ..Default::default()
    }
    .encode_to_vec();
    let mut out = Vec::new();
    // :status 200 (static 8), content-type (static 31) application/grpc.
    let h = b"\x88\x0f\x10\x10application/grpc";
    put_header(&mut out, h.len(), HEADERS, END_HEADERS, 0);
    out.extend_from_slice(h);
    let d = out.len();
    put_header(&mut out, 5 + message.len(), DATA, 0, 0);
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(&message);
    // grpc-status: 0, a literal without indexing with a new name.
    let t = out.len();
    let trailers = b"\x00\x0bgrpc-status\x010";
    put_header(
        &mut out,
        trailers.len(),
        HEADERS,
        END_HEADERS | END_STREAM,
        0,
    );
    out.extend_from_slice(trailers);
    (out, [5, d + 5, t + 5])
}

/// One connection: ACKs SETTINGS and PING, gives back the window DATA used, answers
/// every stream that ends.
async fn serve(mut tcp: TcpStream) {
    let (canned, ids) = response();
    let mut rbuf = vec![0u8; 256 * 1024];
    let mut filled = 0;
    let mut out = Vec::with_capacity(64 * 1024);
    put_settings(&mut out, &[]);
    let mut preface = false;
    loop {
        if !out.is_empty() && write_all(&mut tcp, &out).await.is_err() {
            return;
        }
        out.clear();
        let n = poll_fn(|cx| {
            let mut rb = ReadBuf::new(&mut rbuf[filled..]);
            match Pin::new(&mut tcp).poll_read(cx, &mut rb) {
                Poll::Ready(r) => Poll::Ready(r.map(|()| rb.filled().len())),
                Poll::Pending => Poll::Pending,
            }
        })
        .await;
        match n {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
        let mut pos = 0;
        if !preface {
            if filled < PREFACE.len() {
                continue;
            }
            if &rbuf[..PREFACE.len()] != PREFACE {
                return;
            }
            preface = true;
            pos = PREFACE.len();
        }
        let mut data = 0u32;
        while filled - pos >= HEADER_LEN {
            let f = parse_header(&rbuf[pos..]);
            let end = pos + HEADER_LEN + f.len;
            if f.len > DEFAULT_MAX_FRAME {
                return;
            }
            if end > filled {
                break;
            }
            let p = &rbuf[pos + HEADER_LEN..end];
            match f.kind {
                SETTINGS if f.flags & ACK == 0 => put_header(&mut out, 0, SETTINGS, ACK, 0),
                PING if f.flags & ACK == 0 => {
                    put_header(&mut out, 8, PING, ACK, 0);
                    out.extend_from_slice(p);
                }
                DATA => data += f.len as u32,
                GOAWAY => return,
                _ => {}
            }
            if f.flags & END_STREAM != 0 && (f.kind == DATA || f.kind == HEADERS) {
                let at = out.len();
                out.extend_from_slice(&canned);
                for i in ids {
                    out[at + i..at + i + 4].copy_from_slice(&f.stream.to_be_bytes());
                }
            }
            pos = end;
        }
        if data > 0 {
            // The client's streams are short: only the connection's window needs it back.
            put_window_update(&mut out, 0, data);
        }
        rbuf.copy_within(pos..filled, 0);
        filled -= pos;
    }
}

/// Writes all of `buf`.
async fn write_all(tcp: &mut TcpStream, buf: &[u8]) -> std::io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        at += poll_fn(|cx| Pin::new(&mut *tcp).poll_write(cx, &buf[at..])).await?;
    }
    Ok(())
}
