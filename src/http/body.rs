//! The response body of the layer: the inner service's body, or the layer's own.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::budget::Settlement;

pin_project! {
    /// The body of a response that passed through
    /// [`RateLimitLayer`](super::RateLimitLayer): the inner service's body `B`, or the
    /// layer's own (a problem+json denial, or empty for gRPC).
    ///
    /// Under a budget policy ([`Policy::budget`](super::Policy::budget)) it also charges
    /// what the handler recorded in the request's [`Budget`](super::Budget): when the
    /// inner body ends (before its last frame is handed on), fails, or is dropped early,
    /// whichever comes first, once.
    ///
    /// # Example
    ///
    /// ```
    /// use http_body::Body;
    /// use tollgate::http::ResponseBody;
    ///
    /// let empty: ResponseBody<http_body_util::Empty<bytes::Bytes>> = ResponseBody::default();
    /// assert!(empty.is_end_stream());
    /// ```
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
        // Charged when taken (dropped): at the inner body's end, or with the body.
        settle: Option<Box<Settlement>>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Own { data: Option<Bytes> },
    }
}

impl<B> ResponseBody<B> {
    pub(crate) fn inner(body: B, settle: Option<Box<Settlement>>) -> Self {
        ResponseBody {
            kind: Kind::Inner { body },
            settle,
        }
    }

    pub(crate) fn own(data: Bytes) -> Self {
        ResponseBody {
            kind: Kind::Own {
                data: (!data.is_empty()).then_some(data),
            },
            settle: None,
        }
    }
}

impl<B> Default for ResponseBody<B> {
    fn default() -> Self {
        ResponseBody {
            kind: Kind::Own { data: None },
            settle: None,
        }
    }
}

impl<B: Body<Data = Bytes>> Body for ResponseBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        match this.kind.project() {
            KindProj::Inner { mut body } => {
                let polled = body.as_mut().poll_frame(cx);
                if this.settle.is_some() {
                    let ended = match &polled {
                        Poll::Ready(None | Some(Err(_))) => true,
                        // The last frame: charge before it is handed on, so that the
                        // client cannot see the end of the response before the charge.
                        Poll::Ready(Some(Ok(_))) => body.is_end_stream(),
                        Poll::Pending => false,
                    };
                    if ended {
                        drop(this.settle.take());
                    }
                }
                polled
            }
            KindProj::Own { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Own { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Own { data } => SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64)),
        }
    }
}
