//! The gRPC transport (`src/grpc/`) driven by a raw HTTP/2 client (the h2 crate), so the
//! requests can be what no gRPC library sends: bad framing, compression, wrong methods and
//! content types, oversized messages, hundreds of calls pipelined on one connection, and a
//! call still in flight when the server is told to stop.

mod common;

use bytes::Bytes;
use common::{desc, request, Server, TempDir};
use h2::client::SendRequest;
use prost::Message;
use std::time::{Duration, Instant};
use tollgate_server::grpc::{MAX_MESSAGE, PATH};
use tollgate_server::proto::{Code, RateLimitResponse};

const CONFIG: &str = "domain: t
descriptors:
  - key: k
    rate_limit:
      unit: hour
      requests_per_unit: 100
      algorithm: token_bucket
";

async fn connect(port: u16) -> SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    // h2 (0.4.20) clients count each small DATA frame they have received and not yet read
    // against a budget (about 160 unread 100-byte responses) and then close the
    // connection with ENHANCE_YOUR_CALM: the pipelined test below holds 300 answers in
    // flight, so its client gets a larger budget.
    let (client, conn) = h2::client::Builder::new()
        .data_frame_budget(1 << 20)
        .handshake::<_, Bytes>(tcp)
        .await
        .expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client.ready().await.expect("ready")
}

/// What came back: the HTTP status, `grpc-status` (from the headers of a trailers-only
/// answer or from the trailers), and the response message's bytes.
#[derive(Debug)]
struct Answer {
    http: u16,
    grpc: Option<u32>,
    message: Vec<u8>,
}

impl Answer {
    fn response(&self) -> RateLimitResponse {
        assert_eq!(self.grpc, Some(0), "{self:?}");
        assert!(self.message.len() >= 5 && self.message[0] == 0, "{self:?}");
        RateLimitResponse::decode(&self.message[5..]).expect("a RateLimitResponse")
    }
}

/// A request's head: `method` on `path`, `content_type`, `te: trailers`, and one more
/// header when given.
fn head(
    method: &str,
    path: &str,
    content_type: &str,
    extra: Option<(&str, String)>,
) -> http::Request<()> {
    let mut b = http::Request::builder()
        .method(method)
        .uri(format!("http://127.0.0.1{path}"))
        .header("content-type", content_type)
        .header("te", "trailers");
    if let Some((name, value)) = extra {
        b = b.header(name, value);
    }
    b.body(()).expect("request")
}

/// Sends one request (`body` as the whole DATA, or nothing when None) and reads the answer.
async fn send(
    client: &mut SendRequest<Bytes>,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<Vec<u8>>,
) -> Answer {
    let req = head(method, path, content_type, None);
    let (resp, mut stream) = client
        .send_request(req, body.is_none())
        .expect("send request");
    if let Some(b) = body {
        stream.send_data(Bytes::from(b), true).expect("send data");
    }
    read(resp).await
}

async fn read(resp: h2::client::ResponseFuture) -> Answer {
    let resp = resp.await.expect("response");
    let http = resp.status().as_u16();
    let mut grpc = status_of(resp.headers());
    let mut body = resp.into_body();
    let mut message = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("data");
        let _ = body.flow_control().release_capacity(chunk.len());
        message.extend_from_slice(&chunk);
    }
    if let Some(t) = body.trailers().await.expect("trailers") {
        grpc = grpc.or(status_of(&t));
    }
    Answer {
        http,
        grpc,
        message,
    }
}

fn status_of(h: &http::HeaderMap) -> Option<u32> {
    h.get("grpc-status")?.to_str().ok()?.parse().ok()
}

fn framed(flag: u8, message: &[u8]) -> Vec<u8> {
    let mut b = vec![flag];
    b.extend_from_slice(&u32::try_from(message.len()).expect("len").to_be_bytes());
    b.extend_from_slice(message);
    b
}

fn call_bytes(value: &str) -> Vec<u8> {
    request("t", vec![desc(&[("k", value)])]).encode_to_vec()
}

async fn grpc(client: &mut SendRequest<Bytes>, body: Vec<u8>) -> Answer {
    send(client, "POST", PATH, "application/grpc", Some(body)).await
}

#[tokio::test]
async fn bad_requests_get_a_clear_status_and_the_server_keeps_serving() {
    let dir = TempDir::new("transport");
    dir.write("t.yaml", CONFIG);
    let s = Server::start(&dir.0, &[]);
    let mut c = connect(s.grpc).await;
    let ok = call_bytes("a");

    let a = grpc(&mut c, framed(0, &ok)).await;
    assert_eq!(a.response().overall_code, Code::Ok as i32);

    // gRPC statuses: (what was sent, the status expected).
    let two = [framed(0, &ok), framed(0, &ok)].concat();
    let mut truncated = framed(0, &ok);
    truncated.truncate(truncated.len() - 1);
    let cases: Vec<(&str, Vec<u8>, u32)> = vec![
        ("a compressed message", framed(1, &ok), 12),
        ("an invalid compressed flag", framed(9, &ok), 13),
        ("a truncated message", truncated, 13),
        ("a truncated prefix", vec![0, 0, 0], 13),
        ("no message", Vec::new(), 13),
        ("two messages", two, 13),
        (
            "a message that is not a RateLimitRequest",
            framed(0, b"\x0a\xff\xff\xff\xff\x0f"),
            3,
        ),
        (
            "a string that is not UTF-8",
            framed(0, b"\x0a\x02\xff\xfe"),
            3,
        ),
        (
            "no descriptors",
            framed(0, &request("t", vec![]).encode_to_vec()),
            3,
        ),
        (
            "a message over the size limit",
            framed(0, &vec![0u8; MAX_MESSAGE + 1]),
            8,
        ),
    ];
    for (what, body, code) in cases {
        let a = grpc(&mut c, body).await;
        assert_eq!((a.http, a.grpc), (200, Some(code)), "{what}: {a:?}");
        assert!(a.message.is_empty(), "{what}: a status, no message");
    }
    // A declared length over the limit is refused from the prefix alone.
    let mut huge = vec![0u8, 0xff, 0xff, 0xff, 0xff];
    huge.extend_from_slice(&ok);
    assert_eq!(grpc(&mut c, huge).await.grpc, Some(8));

    let other = send(
        &mut c,
        "POST",
        "/envoy.service.ratelimit.v3.RateLimitService/Other",
        "application/grpc",
        Some(framed(0, &ok)),
    )
    .await;
    assert_eq!(
        (other.http, other.grpc),
        (200, Some(12)),
        "an unknown method"
    );
    let get = send(&mut c, "GET", PATH, "application/grpc", None).await;
    assert_eq!((get.http, get.grpc), (405, None), "GET");
    let json = send(
        &mut c,
        "POST",
        PATH,
        "application/json",
        Some(b"{}".to_vec()),
    )
    .await;
    assert_eq!((json.http, json.grpc), (415, None), "not gRPC");

    // The same connection still answers, and the refused calls took nothing.
    let a = grpc(&mut c, framed(0, &ok)).await.response();
    assert_eq!(
        a.statuses[0].limit_remaining, 98,
        "two admitted calls, nothing else"
    );
    let mut fresh = connect(s.grpc).await;
    assert_eq!(
        grpc(&mut fresh, framed(0, &call_bytes("b")))
            .await
            .response()
            .overall_code,
        Code::Ok as i32
    );
}

#[tokio::test]
async fn calls_pipelined_on_one_connection_each_get_their_own_answer_exactly() {
    let dir = TempDir::new("pipelined");
    dir.write("t.yaml", CONFIG);
    let s = Server::start(&dir.0, &[]);
    let c = connect(s.grpc).await;
    // 300 calls in flight at once on one connection: 250 on one key (limit 100), 50 on
    // keys of their own.
    let mut calls = Vec::new();
    for i in 0..300 {
        let value = if i % 6 == 5 {
            format!("own{i}")
        } else {
            "shared".to_string()
        };
        let mut c = c.clone();
        calls.push(tokio::spawn(async move {
            let a = grpc(&mut c, framed(0, &call_bytes(&value)))
                .await
                .response();
            (value, a.overall_code)
        }));
    }
    let mut shared_ok = 0;
    for call in calls {
        let (value, code) = call.await.expect("call");
        if value == "shared" {
            shared_ok += usize::from(code == Code::Ok as i32);
        } else {
            assert_eq!(
                code,
                Code::Ok as i32,
                "{value}: a key of its own is under its limit"
            );
        }
    }
    assert_eq!(
        shared_ok, 100,
        "exactly the limit admitted on the shared key"
    );
}

#[tokio::test]
async fn a_call_in_flight_at_sigterm_is_answered_before_the_server_stops() {
    let dir = TempDir::new("drain");
    dir.write("t.yaml", CONFIG);
    let s = Server::start(&dir.0, &[]);
    let mut c = connect(s.grpc).await;
    // The call's headers go now, its message only after the signal.
    let req = head("POST", PATH, "application/grpc", None);
    let (resp, mut stream) = c.send_request(req, false).expect("send headers");
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.signal("TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s.log_text().contains("SIGTERM") {
        assert!(Instant::now() < deadline, "{}", s.log_text());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !s.log_text().contains("stopped"),
        "stopped with a call in flight"
    );
    stream
        .send_data(Bytes::from(framed(0, &call_bytes("late"))), true)
        .expect("send the message");
    let a = tokio::time::timeout(Duration::from_secs(10), read(resp))
        .await
        .expect("answered");
    assert_eq!(a.response().overall_code, Code::Ok as i32);
    while !s.log_text().contains("stopped") {
        assert!(Instant::now() < deadline, "{}", s.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // And no new call is taken once draining: a new connection is refused.
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", s.grpc))
            .await
            .is_err(),
        "the listener is closed"
    );
}

#[tokio::test]
async fn the_connection_limits_are_advertised_and_a_header_list_over_them_is_refused() {
    let dir = TempDir::new("limits");
    dir.write("t.yaml", CONFIG);
    let s = Server::start(&dir.0, &[]);
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", s.grpc))
        .await
        .expect("connect");
    let (client, mut conn) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    // One call while driving the connection here, so that the server's SETTINGS arrive.
    let first = async {
        let mut c = client.clone().ready().await.expect("ready");
        grpc(&mut c, framed(0, &call_bytes("a"))).await
    };
    let a = tokio::select! {
        a = first => a,
        r = &mut conn => panic!("connection ended: {r:?}"),
    };
    assert_eq!(a.response().overall_code, Code::Ok as i32);
    assert_eq!(
        conn.max_concurrent_send_streams(),
        tollgate_server::grpc::MAX_CONCURRENT_STREAMS as usize
    );
    tokio::spawn(async move {
        let _ = conn.await;
    });
    // A header list over 64 KiB: the server refuses that stream (HTTP 431 or a reset),
    // and the connection goes on serving.
    let mut c = client.ready().await.expect("ready");
    let req = head(
        "POST",
        PATH,
        "application/grpc",
        Some(("x-big", "v".repeat(70 << 10))),
    );
    let refused = match c.send_request(req, false) {
        Ok((resp, mut stream)) => {
            let _ = stream.send_data(Bytes::from(framed(0, &call_bytes("big"))), true);
            match resp.await {
                Ok(r) => r.status() == http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                Err(e) => e.is_reset() || e.is_remote(),
            }
        }
        Err(e) => panic!("the client refused to send it itself: {e}"),
    };
    assert!(refused, "a 70 KiB header list was accepted");
    let mut c = c.ready().await.expect("the connection still serves");
    let a = grpc(&mut c, framed(0, &call_bytes("a"))).await.response();
    assert_eq!(
        a.statuses[0].limit_remaining, 98,
        "the refused call took nothing"
    );
}

#[tokio::test]
async fn a_message_split_over_several_data_frames_is_joined() {
    let dir = TempDir::new("split");
    dir.write("t.yaml", CONFIG);
    let s = Server::start(&dir.0, &[]);
    let mut c = connect(s.grpc).await;
    let whole = framed(0, &call_bytes("split"));
    let req = head("POST", PATH, "application/grpc", None);
    let (resp, mut stream) = c.send_request(req, false).expect("send headers");
    // The prefix cut in two, then the rest of the message in two more frames.
    for (part, last) in [
        (&whole[..2], false),
        (&whole[2..7], false),
        (&whole[7..], true),
    ] {
        stream
            .send_data(Bytes::copy_from_slice(part), last)
            .expect("send a part");
    }
    let a = read(resp).await.response();
    assert_eq!(a.overall_code, Code::Ok as i32);
    assert_eq!(a.statuses[0].limit_remaining, 99);
}

#[tokio::test]
async fn a_stream_ended_by_an_empty_data_frame_after_the_message_is_answered() {
    let dir = TempDir::new("late_end");
    dir.write("t.yaml", CONFIG);
    let s = Server::start(&dir.0, &[]);
    let mut c = connect(s.grpc).await;
    let req = head("POST", PATH, "application/grpc", None);
    let (resp, mut stream) = c.send_request(req, false).expect("send headers");
    // The whole message without END_STREAM, then an empty frame that ends the stream.
    let whole = framed(0, &call_bytes("late_end"));
    stream
        .send_data(Bytes::from(whole), false)
        .expect("send the message");
    stream
        .send_data(Bytes::new(), true)
        .expect("end the stream");
    let a = read(resp).await.response();
    assert_eq!(a.overall_code, Code::Ok as i32);
    assert_eq!(a.statuses[0].limit_remaining, 99);
}
