//! The response body of the layer: the inner service's body, or the layer's own.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// The body of a response that passed through
    /// [`RateLimitLayer`](super::RateLimitLayer): the inner service's body `B`, or the
    /// layer's own (a problem+json denial, or empty for gRPC).
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
    pub(crate) fn inner(body: B) -> Self {
        ResponseBody {
            kind: Kind::Inner { body },
        }
    }

    pub(crate) fn own(data: Bytes) -> Self {
        ResponseBody {
            kind: Kind::Own {
                data: (!data.is_empty()).then_some(data),
            },
        }
    }
}

impl<B> Default for ResponseBody<B> {
    fn default() -> Self {
        ResponseBody {
            kind: Kind::Own { data: None },
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
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx),
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
