//! examples/axum.rs prints curl lines, each with what it answers (issue 37, item 7): the
//! same requests, in the same order, to the example's router on a real axum server on
//! 127.0.0.1 (a trusted proxy there, as for curl on that machine), from a real hyper
//! client, and every claim checked against the responses: the status, and which policy
//! refused (the problem+json body names it) or how many a policy says are left.

use bytes::Bytes;

use crate::axum_example::{claim, command, Answer, Try, TRIES};
use crate::support::{parse_list, send_bytes, serve_app, Reply};

/// Panics (failing the test) unless `r` is `answer`; `what` names the line.
fn check(r: &Reply, answer: Answer, what: &str) {
    let refused = |policy: &str| -> bool {
        r.body
            .contains(&format!(r#""violated-policies":["{policy}"]"#))
            || r.body.contains(&format!(r#"rate limit \"{policy}\""#))
    };
    match answer {
        Answer::Ok | Answer::OkLeft(..) => {
            assert_eq!(r.status, 200, "{what}: {}", r.body);
            if let Answer::OkLeft(policy, left) = answer {
                let field = parse_list(r.header("ratelimit").expect("a RateLimit field"));
                let member = field
                    .iter()
                    .find(|i| i.name == policy)
                    .unwrap_or_else(|| panic!("{what}: no {policy:?} in {field:?}"));
                assert_eq!(member.param("r"), i64::from(left), "{what}: {field:?}");
            }
        }
        Answer::Refused(status, policy) => {
            assert_eq!(r.status, status, "{what}: {}", r.body);
            assert_eq!(r.header("content-type"), Some("application/problem+json"));
            assert!(
                refused(policy),
                "{what}: not refused by {policy:?}: {}",
                r.body
            );
            if status == 429 {
                // Only that policy is named as violated.
                assert!(
                    r.body
                        .contains(&format!(r#""violated-policies":["{policy}"]"#)),
                    "{what}: {}",
                    r.body
                );
            }
        }
    }
}

async fn run(t: &Try, addr: std::net::SocketAddr) {
    let what = format!("`{}` # {}", command(addr, t), claim(t));
    let (method, body) = match t.upload {
        Some(n) => ("POST", Bytes::from(vec![0u8; n])),
        None => ("GET", Bytes::new()),
    };
    for (k, answer) in t.answers.iter().enumerate() {
        let r = send_bytes(addr, method, t.path, t.headers, body.clone()).await;
        check(&r, *answer, &format!("{what}, response {}", k + 1));
    }
}

#[tokio::test]
async fn every_curl_line_the_axum_example_prints_answers_what_it_claims() {
    let addr = serve_app(crate::axum_example::app().unwrap()).await;
    for t in TRIES {
        run(t, addr).await;
    }
    // What the lines print is made of what was checked.
    let printed: Vec<String> = TRIES.iter().map(claim).collect();
    assert_eq!(
        printed[1],
        "200 x5, then 429 from \"ip\": 5 a minute per client (this machine, no X-Forwarded-For)"
    );
    assert!(
        printed[3].starts_with("200, then 429 from \"upload-bytes\""),
        "{}",
        printed[3]
    );
    assert!(
        command(addr, &TRIES[3]).starts_with("for i in 1 2; do head -c 40000 /dev/zero | curl "),
        "{}",
        command(addr, &TRIES[3])
    );
}
