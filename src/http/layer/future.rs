//! The response path: [`ResponseFuture`] (the inner service's future, a refusal, or a
//! boxed asynchronous decision) and the rate-limit fields merged into the inner response.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{HeaderMap, Response};
use pin_project_lite::pin_project;

use crate::http::body::ResponseBody;
use crate::http::budget::Settlement;
use crate::http::response::{Fields, RATELIMIT, RATELIMIT_POLICY};

type BoxResponse<B, E> = Pin<Box<dyn Future<Output = Result<Response<ResponseBody<B>>, E>> + Send>>;

pin_project! {
    /// The future of [`RateLimit`]'s `call`: the inner service's (plus the rate-limit
    /// headers), the layer's own refusal, or (with an asynchronous backend) a boxed
    /// decision followed by the inner call.
    ///
    /// # Example
    ///
    /// ```
    /// fn is_future<F: std::future::Future>() {}
    /// is_future::<tollgate::http::ResponseFuture<std::future::Ready<Result<http::Response<String>, ()>>, String, ()>>();
    /// ```
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        pub(super) kind: Kind<F, B, E>,
    }
}

pin_project! {
    #[project = KindProj]
    pub(super) enum Kind<F, B, E> {
        // `settle`: what a layer with budget policies charges after the response (on
        // the body's end, or when the future or the body is dropped first).
        Inner { #[pin] future: F, headers: Option<Fields>, settle: Option<Box<Settlement>> },
        // Boxed: a refusal allocates its body anyway, and the admitted path's future
        // stays small.
        Refused { response: Option<Box<Response<ResponseBody<B>>>> },
        Boxed { future: BoxResponse<B, E> },
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner {
                future,
                headers,
                settle,
            } => {
                let result = std::task::ready!(future.poll(cx));
                // On an error, dropped here: what the handler recorded is charged now.
                let settle = settle.take();
                Poll::Ready(Ok(finish(result?, headers.take(), settle)))
            }
            KindProj::Refused { response } => match response.take() {
                Some(r) => Poll::Ready(Ok(*r)),
                None => Poll::Pending,
            },
            KindProj::Boxed { future } => future.as_mut().poll(cx),
        }
    }
}

pub(super) fn finish<B>(
    resp: Response<B>,
    headers: Option<Fields>,
    settle: Option<Box<Settlement>>,
) -> Response<ResponseBody<B>> {
    let (mut parts, body) = resp.into_parts();
    if let Some(h) = headers {
        merge(&mut parts.headers, h);
    }
    Response::from_parts(parts, ResponseBody::inner(body, settle))
}

/// Adds this layer's fields to a response that an inner layer (or the service) may have
/// given its own: `RateLimit` and `RateLimit-Policy` are Lists, so the members are joined
/// (inner first); any other field already present is the inner one's and is kept.
fn merge(into: &mut HeaderMap, ours: Fields) {
    for (name, value) in ours.into_iter() {
        match into.get(&name) {
            None => {
                into.insert(name, value);
            }
            Some(theirs) if name == RATELIMIT || name == RATELIMIT_POLICY => {
                let mut joined = theirs.as_bytes().to_vec();
                joined.extend_from_slice(b", ");
                joined.extend_from_slice(value.as_bytes());
                if let Ok(v) = http::HeaderValue::from_bytes(&joined) {
                    into.insert(name, v);
                }
            }
            Some(_) => {}
        }
    }
}
