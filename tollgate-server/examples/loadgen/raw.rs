//! `--api grpc-raw`: the calls spread over `--connections` HTTP/2 connections, each
//! driven by one task that writes every request it can send in one write and parses
//! every whole frame of each read ([`Conn`]), all on this thread.

use crate::conn::Conn;
use crate::streams::Failure;
use crate::{report, Args, Plan, Tally};
use std::future::poll_fn;
use std::pin::Pin;
use std::process::ExitCode;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The read buffer of a connection (many responses per read; a frame is at most 16 KiB).
const READ_BUF: usize = 256 * 1024;

/// A connection's I/O counts.
#[derive(Debug, Default, Clone, Copy)]
struct Io {
    /// Reads that returned bytes.
    reads: u64,
    /// Writes (each of a whole batch).
    writes: u64,
    /// Bytes read.
    bytes_in: u64,
    /// Bytes written.
    bytes_out: u64,
}

/// Runs the calls and prints the report; fails if a connection failed.
pub(crate) async fn run(a: &Args) -> ExitCode {
    let began = Instant::now();
    let plan = Plan::new(a, began);
    let concurrency = a.concurrency.max(1);
    let conns = a.connections.clamp(1, concurrency);
    let timeout = Duration::from_secs(a.timeout.max(1));
    let mut tasks = Vec::new();
    for c in 0..conns {
        let tcp = match tokio::time::timeout(timeout, TcpStream::connect(&a.target)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => {
                eprintln!("error: cannot connect to {}: {e}", a.target);
                return ExitCode::FAILURE;
            }
            Err(_) => {
                eprintln!("error: cannot connect to {}: timed out", a.target);
                return ExitCode::FAILURE;
            }
        };
        tcp.set_nodelay(true).expect("TCP_NODELAY");
        let target = concurrency / conns + usize::from(c < concurrency % conns);
        let part = plan.part(c as u64, conns as u64);
        let conn = Conn::new(a, part, target, c as u64, conns as u64);
        tasks.push(tokio::spawn(drive(tcp, conn, timeout)));
    }
    let mut all = Tally::default();
    let mut io = Io::default();
    let (mut finished, mut failures) = (0, [0u64; Failure::KINDS]);
    let mut fatal = Vec::new();
    for (c, task) in tasks.into_iter().enumerate() {
        let (conn, cio, err) = task.await.expect("connection task");
        if let Some(e) = err {
            fatal.push(format!("connection {c}: {e}"));
        }
        finished += conn.finished;
        for (sum, n) in failures.iter_mut().zip(conn.failures) {
            *sum += n;
        }
        all.merge(conn.tally);
        io.reads += cio.reads;
        io.writes += cio.writes;
        io.bytes_in += cio.bytes_in;
        io.bytes_out += cio.bytes_out;
    }
    // The measured time: the whole run with --requests, else the window.
    let secs = match a.requests {
        Some(_) => began.elapsed().as_secs_f64(),
        None => a.seconds as f64,
    };
    report(a, all, secs);
    if a.io_stats {
        let per = |n: u64| finished as f64 / n.max(1) as f64;
        eprintln!(
            "grpc-raw io: calls={finished} reads={} writes={} calls_per_read={:.2} calls_per_write={:.2} bytes_in_per_call={:.1} bytes_out_per_call={:.1}",
            io.reads,
            io.writes,
            per(io.reads),
            per(io.writes),
            io.bytes_in as f64 / finished.max(1) as f64,
            io.bytes_out as f64 / finished.max(1) as f64,
        );
    }
    if failures.iter().any(|&n| n > 0) {
        let kinds: Vec<String> = failures
            .iter()
            .zip(Failure::NAMES)
            .filter(|(n, _)| **n > 0)
            .map(|(n, name)| format!("{n} {name}"))
            .collect();
        eprintln!(
            "grpc-raw: failed calls (warm-up included): {}",
            kinds.join(", ")
        );
    }
    if fatal.is_empty() {
        ExitCode::SUCCESS
    } else {
        for e in fatal {
            eprintln!("error: {e}");
        }
        ExitCode::FAILURE
    }
}

/// Drives one connection to the end of its part; returns it, its I/O counts and, if it
/// failed, why.
async fn drive(
    mut tcp: TcpStream,
    mut conn: Conn,
    timeout: Duration,
) -> (Conn, Io, Option<String>) {
    let mut io = Io::default();
    match pump(&mut tcp, &mut conn, &mut io, timeout).await {
        Ok(()) => {
            conn.close();
            // Best effort: the calls are done whether or not the GOAWAY gets there.
            let _ = write_all(&mut tcp, &conn.out, timeout).await;
            (conn, io, None)
        }
        Err(e) => {
            conn.fail();
            (conn, io, Some(e))
        }
    }
}

/// The connection's loop: open what can be opened and write it all at once, read what
/// has come, parse it; until the connection's part is done or it fails.
async fn pump(
    tcp: &mut TcpStream,
    conn: &mut Conn,
    io: &mut Io,
    timeout: Duration,
) -> Result<(), String> {
    let mut rbuf = vec![0u8; READ_BUF];
    let mut filled = 0;
    let mut now = Instant::now();
    loop {
        conn.fill(now)?;
        if !conn.out.is_empty() {
            conn.stamp(Instant::now());
            write_all(tcp, &conn.out, timeout).await?;
            io.writes += 1;
            io.bytes_out += conn.out.len() as u64;
            conn.out.clear();
        }
        if let Some(done) = conn.done(now) {
            return done;
        }
        let n = read(tcp, &mut rbuf[filled..], timeout)
            .await
            .map_err(|e| format!("{e} ({})", conn.waiting()))?;
        if n == 0 {
            return Err(format!(
                "the server closed the connection ({})",
                conn.waiting()
            ));
        }
        now = Instant::now();
        io.reads += 1;
        io.bytes_in += n as u64;
        filled += n;
        let used = conn.on_bytes(&rbuf[..filled], now)?;
        rbuf.copy_within(used..filled, 0);
        filled -= used;
    }
}

/// Reads what the socket has (at least one byte, or 0 at its end), waiting at most
/// `timeout` for it.
async fn read(tcp: &mut TcpStream, buf: &mut [u8], timeout: Duration) -> Result<usize, String> {
    let once = poll_fn(|cx| {
        let mut rb = ReadBuf::new(&mut *buf);
        match Pin::new(&mut *tcp).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().len())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    });
    match tokio::time::timeout(timeout, once).await {
        Ok(r) => r.map_err(|e| format!("read: {e}")),
        Err(_) => Err(format!(
            "no bytes from the server for {} s",
            timeout.as_secs()
        )),
    }
}

/// Writes all of `buf`, waiting at most `timeout` each time the socket is full.
async fn write_all(tcp: &mut TcpStream, buf: &[u8], timeout: Duration) -> Result<(), String> {
    let mut at = 0;
    while at < buf.len() {
        let once = poll_fn(|cx| Pin::new(&mut *tcp).poll_write(cx, &buf[at..]));
        match tokio::time::timeout(timeout, once).await {
            Ok(Ok(0)) => return Err("write: the socket takes no more bytes".into()),
            Ok(Ok(n)) => at += n,
            Ok(Err(e)) => return Err(format!("write: {e}")),
            Err(_) => {
                return Err(format!(
                    "the server read nothing for {} s",
                    timeout.as_secs()
                ))
            }
        }
    }
    Ok(())
}
