//! What a request is counted against: key extractors.

use http::header::HeaderName;
use http::request::Parts;

/// Turns a request into the key a policy's limiter counts it against.
///
/// `None` means the key cannot be told; the policy's [`MissingKey`](super::MissingKey)
/// outcome applies. Implemented by [`ClientIp`](super::ClientIp), [`HeaderKey`],
/// [`MethodRoute`], [`Global`], and every `Fn(&Parts) -> Option<K>` closure.
///
/// # Example
///
/// ```
/// use tollgate::http::KeyExtractor;
///
/// // A closure: the tenant named in the path's first segment.
/// let tenant = |parts: &http::request::Parts| {
///     parts.uri.path().split('/').nth(1).filter(|s| !s.is_empty()).map(str::to_owned)
/// };
/// let (parts, ()) = http::Request::get("/acme/orders").body(())?.into_parts();
/// assert_eq!(tenant.extract(&parts), Some("acme".to_owned()));
/// # Ok::<(), http::Error>(())
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key type (what the limiter is keyed by).
    type Key: Send + Sync + 'static;

    /// The key of this request, or `None` when it has none.
    fn extract(&self, parts: &Parts) -> Option<Self::Key>;

    /// Why [`extract`](Self::extract) found no key in this request, in words for the
    /// operator: the layer's default [`MissingKey::Fail`](super::MissingKey::Fail) answer
    /// carries it and reports it once. Called only for requests without a key. The default
    /// names the extractor's type; [`ClientIp`](super::ClientIp) and [`HeaderKey`] say
    /// what exactly was missing.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::{HeaderKey, KeyExtractor};
    ///
    /// let (parts, ()) = http::Request::get("/").body(())?.into_parts();
    /// let reason = HeaderKey::new("x-api-key")?.missing_reason(&parts);
    /// assert_eq!(reason, "the request has no x-api-key header");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn missing_reason(&self, parts: &Parts) -> String {
        let _ = parts;
        format!(
            "the key extractor {} found no key in the request",
            std::any::type_name::<Self>()
        )
    }
}

impl<F, K> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<K> + Send + Sync + 'static,
    K: Send + Sync + 'static,
{
    type Key = K;

    fn extract(&self, parts: &Parts) -> Option<K> {
        self(parts)
    }
}

/// The value of a request header, such as an API key (`String`). A request without the
/// header, with it twice, or with a value that is not visible ASCII has no key.
///
/// # Example
///
/// ```
/// use tollgate::http::{HeaderKey, KeyExtractor};
///
/// let api_key = HeaderKey::new("x-api-key")?;
/// let (parts, ()) = http::Request::get("/").header("x-api-key", "k-123").body(())?.into_parts();
/// assert_eq!(api_key.extract(&parts), Some("k-123".to_owned()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct HeaderKey {
    name: HeaderName,
}

impl HeaderKey {
    /// Keys by header `name` (case-insensitive).
    ///
    /// # Errors
    ///
    /// [`http::header::InvalidHeaderName`] when `name` is not a valid header name.
    ///
    /// # Example
    ///
    /// ```
    /// assert!(tollgate::http::HeaderKey::new("x-api-key").is_ok());
    /// assert!(tollgate::http::HeaderKey::new("bad name").is_err());
    /// ```
    pub fn new(name: &str) -> Result<Self, http::header::InvalidHeaderName> {
        Ok(HeaderKey {
            name: HeaderName::from_bytes(name.as_bytes())?,
        })
    }
}

impl KeyExtractor for HeaderKey {
    type Key = String;

    fn extract(&self, parts: &Parts) -> Option<String> {
        let mut values = parts.headers.get_all(&self.name).iter();
        let first = values.next()?;
        if values.next().is_some() {
            return None;
        }
        first.to_str().ok().map(str::to_owned)
    }

    fn missing_reason(&self, parts: &Parts) -> String {
        let name = &self.name;
        match parts.headers.get_all(name).iter().count() {
            0 => format!("the request has no {name} header"),
            1 => format!("the request's {name} header is not visible ASCII"),
            n => format!("the request has {n} {name} headers (one is expected)"),
        }
    }
}

/// The method and route, `"GET /users/{id}"` (`String`): one budget per endpoint.
///
/// The route is axum's matched path template when the layer runs inside the router (added
/// with `Router::route_layer`, feature `axum`), else the request path.
///
/// # Example
///
/// ```
/// use tollgate::http::{KeyExtractor, MethodRoute};
///
/// let (parts, ()) = http::Request::post("/upload?x=1").body(())?.into_parts();
/// assert_eq!(MethodRoute.extract(&parts), Some("POST /upload".to_owned()));
/// # Ok::<(), http::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MethodRoute;

impl KeyExtractor for MethodRoute {
    type Key = String;

    fn extract(&self, parts: &Parts) -> Option<String> {
        #[cfg(feature = "axum")]
        if let Some(p) = parts.extensions.get::<axum::extract::MatchedPath>() {
            return Some(format!("{} {}", parts.method, p.as_str()));
        }
        Some(format!("{} {}", parts.method, parts.uri.path()))
    }
}

/// Every request has the same key `()`: one budget for the whole service, for a
/// [`RateLimiter`](crate::limiter::RateLimiter).
///
/// # Example
///
/// ```
/// use tollgate::http::{Global, Policy};
/// use tollgate::{Algorithm, Quota, RateLimiter};
///
/// let all = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1000)).build()?;
/// let policy = Policy::new("global", all, Global);
/// # let _ = policy;
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Global;

impl KeyExtractor for Global {
    type Key = ();

    fn extract(&self, _parts: &Parts) -> Option<()> {
        Some(())
    }
}
