//! What the service does with a verdict: forward the request (and which rate-limit
//! fields its response gets) or answer with a refusal; and the verdict's metrics.

use http::{Response, StatusCode};

use super::{Config, OnBackendError};
use crate::http::body::ResponseBody;
use crate::http::budget::Admitted;
use crate::http::decide::{no_key_detail, Verdict};
#[cfg(feature = "metrics")]
use crate::http::policy::Policy;
use crate::http::response::{fields, is_grpc, refuse, retry_after, Fields, Refusal};

/// What the service does after the decision.
pub(super) enum Next<B> {
    /// Call the inner service; add these headers to its response; charge these budget
    /// policies after it.
    Forward(Option<Fields>, Admitted),
    Refuse(Response<ResponseBody<B>>),
}

/// Counts the verdict in the policies' `metrics` series (feature `metrics`).
#[cfg(feature = "metrics")]
fn record(policies: &[Policy], verdict: &Verdict) {
    match verdict {
        Verdict::Pass(reports, _) => {
            for r in reports.iter() {
                let c = &policies[r.policy].counters;
                if r.denied() { &c.shadow } else { &c.allowed }.increment(1);
            }
        }
        Verdict::Deny(reports) => {
            for r in reports.iter() {
                policies[r.policy].counters.limited.increment(1);
            }
        }
        Verdict::Failed(i, _) => policies[*i].counters.backend_errors.increment(1),
        Verdict::Reject(..) | Verdict::NoKey(_) => {}
    }
}

/// What `verdict` becomes: the request forwarded (with the fields for its response), or
/// the refusal to answer with (counted in the policies' metrics first).
pub(super) fn next<B>(config: &Config, parts: &http::request::Parts, verdict: Verdict) -> Next<B> {
    let policies = &config.policies;
    #[cfg(feature = "metrics")]
    record(policies, &verdict);
    // Read only when refusing: the admitted path does not look at the content type.
    let grpc = || is_grpc(&parts.headers);
    match verdict {
        Verdict::Pass(reports, budgets) => {
            let h = &config.headers;
            if h.on_allowed || h.legacy {
                let f = fields(h, policies, &reports, h.on_allowed);
                Next::Forward((!f.is_empty()).then_some(f), budgets)
            } else {
                Next::Forward(None, budgets)
            }
        }
        Verdict::Deny(reports) => {
            let names: Vec<&str> = reports.iter().map(|r| policies[r.policy].name()).collect();
            let retry = retry_after(&reports);
            let detail = match retry {
                Some(s) => format!("rate limit {:?} exceeded; retry in {s} s", names.join(", ")),
                None => format!(
                    "request cost exceeds the capacity of {:?}; it can never be admitted",
                    names.join(", ")
                ),
            };
            let mut resp = refuse(
                grpc(),
                &Refusal {
                    status: StatusCode::TOO_MANY_REQUESTS,
                    detail,
                    violated: names,
                    retry_after: retry,
                },
            );
            fields(&config.headers, policies, &reports, true).insert_into(resp.headers_mut());
            Next::Refuse(resp)
        }
        Verdict::Reject(i, status) => Next::Refuse(refuse(
            grpc(),
            &Refusal {
                status,
                detail: format!("request has no key for rate limit {:?}", policies[i].name()),
                violated: Vec::new(),
                retry_after: None,
            },
        )),
        Verdict::NoKey(i) => {
            let detail = no_key_detail(&policies[i], parts);
            policies[i].report_missing_once(&detail);
            Next::Refuse(refuse(
                grpc(),
                &Refusal {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    detail,
                    violated: Vec::new(),
                    retry_after: None,
                },
            ))
        }
        Verdict::Failed(i, e) => match config.on_error {
            OnBackendError::Allow => Next::Forward(None, Admitted::default()),
            OnBackendError::Status(status) => Next::Refuse(refuse(
                grpc(),
                &Refusal {
                    status,
                    detail: format!("rate limit {:?} could not decide: {e}", policies[i].name()),
                    violated: Vec::new(),
                    retry_after: None,
                },
            )),
        },
    }
}
