//! envoyproxy/ratelimit's environment variables (its `src/settings/settings.go`), for the
//! settings both servers have, so that a deployment made for it runs with only the image
//! changed. A command-line flag wins over a variable; a variable of upstream's that has no
//! counterpart here is ignored, as upstream ignores variables it does not know.
//!
//! | variable | here |
//! | --- | --- |
//! | `RUNTIME_ROOT`, `RUNTIME_SUBDIRECTORY`, `RUNTIME_APPDIRECTORY` | `--config ROOT/SUBDIRECTORY/APPDIRECTORY` (defaults `/srv/runtime_data/current`, none, `config`), when one of them is set |
//! | `GRPC_HOST`, `GRPC_PORT` | `--grpc` (defaults `0.0.0.0`, `8081`), when one is set |
//! | `HOST`, `PORT` | `--http` (defaults `0.0.0.0`, `8080`), when one is set |
//! | `BACKEND_TYPE`, `REDIS_URL`, `REDIS_SOCKET_TYPE`, `REDIS_TYPE`, `REDIS_AUTH`, `REDIS_TLS` | `--redis` (exact mode) and `--redis-cluster`, when `REDIS_URL` is set |
//! | `LOG_LEVEL`, `LOG_FORMAT` | the log filter (when `RUST_LOG` is not set), `--log-format` |
//! | `LIMIT_RESPONSE_HEADERS_ENABLED` | `--response-headers ratelimit` (`true`) or `off` (`false`) |
//! | `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT` | `--count-denied-hits` when `false` |
//! | `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED` | `--healthy-with-at-least-one-config-loaded` |
//! | `SHADOW_MODE`, `QUOTA_MODE` | `--global-shadow-mode`, `--global-quota-mode` |
//! | `MERGE_DOMAIN_CONFIG` | `--merge-domain-config` |

use crate::headers::HeaderMode;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

/// What upstream's variables ask for; `None` where they say nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Upstream {
    /// The configuration directory.
    pub config: Option<PathBuf>,
    /// The gRPC listener.
    pub grpc: Option<SocketAddr>,
    /// The HTTP listener.
    pub http: Option<SocketAddr>,
    /// The Redis URL (a `redis://`, `rediss://` or `redis+unix://` URL, or cluster seeds).
    pub redis: Option<String>,
    /// Whether `redis` lists Redis Cluster seeds.
    pub redis_cluster: bool,
    /// The log filter (`debug`, `info`, `warn`, `error`).
    pub log_level: Option<String>,
    /// `json` or `text`.
    pub log_format: Option<String>,
    /// The response headers.
    pub response_headers: Option<HeaderMode>,
    /// Whether denied hits are counted.
    pub count_denied_hits: Option<bool>,
    /// Whether `/healthcheck` fails until a configuration with a domain is loaded.
    pub healthy_needs_config: Option<bool>,
    /// Every limit in shadow mode.
    pub global_shadow: Option<bool>,
    /// Every limit in quota mode.
    pub global_quota: Option<bool>,
    /// The files of one domain merged.
    pub merge_domains: Option<bool>,
}

/// Go's `strconv.ParseBool`, which upstream's settings use.
fn parse_bool(name: &str, v: &str) -> Result<bool, String> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("{name}={v}: expected true or false")),
    }
}

/// `host:port` from two variables, either may be missing (then its default).
fn listener(
    get: &impl Fn(&str) -> Option<String>,
    host_var: &str,
    port_var: &str,
    default_port: u16,
) -> Result<Option<SocketAddr>, String> {
    let (host, port) = (get(host_var), get(port_var));
    if host.is_none() && port.is_none() {
        return Ok(None);
    }
    let host = host.unwrap_or_else(|| "0.0.0.0".into());
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("{port_var}={p}: not a port number"))?,
        None => default_port,
    };
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("{host_var}={host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host_var}={host}: no address"))?;
    Ok(Some(addr))
}

/// The Redis URL upstream's variables describe.
fn redis(get: &impl Fn(&str) -> Option<String>) -> Result<(Option<String>, bool), String> {
    let backend = get("BACKEND_TYPE").unwrap_or_else(|| "redis".into());
    let Some(url) = get("REDIS_URL") else {
        return Ok((None, false));
    };
    if !backend.eq_ignore_ascii_case("redis") {
        return Err(format!(
            "BACKEND_TYPE={backend}: only redis is supported (or none: the in-process backend)"
        ));
    }
    let cluster = match get("REDIS_TYPE").map(|t| t.to_ascii_lowercase()).as_deref() {
        None | Some("single") => false,
        Some("cluster") => true,
        Some(other) => return Err(format!("REDIS_TYPE={other}: expected SINGLE or CLUSTER")),
    };
    let unix = match get("REDIS_SOCKET_TYPE").as_deref() {
        None | Some("unix") => true,
        Some("tcp") => false,
        Some(other) => return Err(format!("REDIS_SOCKET_TYPE={other}: expected unix or tcp")),
    };
    let tls = get("REDIS_TLS")
        .map(|v| parse_bool("REDIS_TLS", &v))
        .transpose()?
        .unwrap_or(false);
    let auth = get("REDIS_AUTH").filter(|a| !a.is_empty()).map(|a| {
        if a.contains(':') {
            format!("{a}@")
        } else {
            format!(":{a}@")
        }
    });
    let auth = auth.unwrap_or_default();
    let one = |addr: &str| {
        if addr.contains("://") {
            addr.to_string()
        } else if unix {
            format!("redis+unix://{addr}")
        } else {
            format!("{}://{auth}{addr}", if tls { "rediss" } else { "redis" })
        }
    };
    // Upstream's cluster URL is a comma-separated list of seeds.
    let url = url
        .split(',')
        .map(|s| one(s.trim()))
        .collect::<Vec<_>>()
        .join(",");
    Ok((Some(url), cluster))
}

/// Reads upstream's variables through `get` (`std::env::var` in the binary).
///
/// # Errors
///
/// A variable set to a value that cannot be used (a bad port, a bool that is not one, an
/// unsupported backend), naming it.
pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Upstream, String> {
    let flag = |name: &str| get(name).map(|v| parse_bool(name, &v)).transpose();
    let root = get("RUNTIME_ROOT");
    let sub = get("RUNTIME_SUBDIRECTORY");
    let app = get("RUNTIME_APPDIRECTORY");
    let config = (root.is_some() || sub.is_some() || app.is_some()).then(|| {
        let mut p = PathBuf::from(root.unwrap_or_else(|| "/srv/runtime_data/current".into()));
        if let Some(s) = sub {
            p.push(s);
        }
        p.push(app.unwrap_or_else(|| "config".into()));
        p
    });
    let (redis, redis_cluster) = redis(&get)?;
    let response_headers = flag("LIMIT_RESPONSE_HEADERS_ENABLED")?.map(|on| {
        if on {
            HeaderMode::Ratelimit
        } else {
            HeaderMode::Off
        }
    });
    Ok(Upstream {
        config,
        grpc: listener(&get, "GRPC_HOST", "GRPC_PORT", 8081)?,
        http: listener(&get, "HOST", "PORT", 8080)?,
        redis,
        redis_cluster,
        log_level: get("LOG_LEVEL").map(|l| l.to_ascii_lowercase()),
        log_format: get("LOG_FORMAT").map(|f| if f == "json" { f } else { "text".into() }),
        response_headers,
        count_denied_hits: flag("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT")?.map(|stop| !stop),
        healthy_needs_config: flag("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED")?,
        global_shadow: flag("SHADOW_MODE")?,
        global_quota: flag("QUOTA_MODE")?,
        merge_domains: flag("MERGE_DOMAIN_CONFIG")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> Result<Upstream, String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        from_env(|k| m.get(k).cloned())
    }

    #[test]
    fn nothing_set_says_nothing() {
        assert_eq!(env(&[]).unwrap(), Upstream::default());
    }

    #[test]
    fn runtime_directory_and_listeners() {
        let u = env(&[
            ("RUNTIME_ROOT", "/data"),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("GRPC_PORT", "9081"),
            ("HOST", "127.0.0.1"),
        ])
        .unwrap();
        assert_eq!(u.config, Some(PathBuf::from("/data/ratelimit/config")));
        assert_eq!(u.grpc, Some("0.0.0.0:9081".parse().unwrap()));
        assert_eq!(u.http, Some("127.0.0.1:8080".parse().unwrap()));
        let u = env(&[("RUNTIME_SUBDIRECTORY", "rl")]).unwrap();
        assert_eq!(
            u.config,
            Some(PathBuf::from("/srv/runtime_data/current/rl/config"))
        );
    }

    #[test]
    fn redis_from_upstreams_variables() {
        let u = env(&[("REDIS_SOCKET_TYPE", "tcp"), ("REDIS_URL", "redis:6379")]).unwrap();
        assert_eq!(u.redis.as_deref(), Some("redis://redis:6379"));
        assert!(!u.redis_cluster);
        let u = env(&[("REDIS_URL", "/var/run/redis.sock")]).unwrap();
        assert_eq!(u.redis.as_deref(), Some("redis+unix:///var/run/redis.sock"));
        let u = env(&[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_TYPE", "CLUSTER"),
            ("REDIS_URL", "a:1,b:2"),
            ("REDIS_AUTH", "secret"),
            ("REDIS_TLS", "true"),
        ])
        .unwrap();
        assert_eq!(
            u.redis.as_deref(),
            Some("rediss://:secret@a:1,rediss://:secret@b:2")
        );
        assert!(u.redis_cluster);
        assert!(env(&[("REDIS_URL", "x"), ("BACKEND_TYPE", "memcache")]).is_err());
        assert!(env(&[("REDIS_URL", "x"), ("REDIS_TYPE", "SENTINEL")]).is_err());
    }

    #[test]
    fn switches() {
        let u = env(&[
            ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
            ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false"),
            ("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "1"),
            ("LOG_LEVEL", "DEBUG"),
            ("LOG_FORMAT", "json"),
            ("SHADOW_MODE", "F"),
            ("MERGE_DOMAIN_CONFIG", "true"),
        ])
        .unwrap();
        assert_eq!(u.response_headers, Some(HeaderMode::Ratelimit));
        assert_eq!(u.count_denied_hits, Some(true));
        assert_eq!(u.healthy_needs_config, Some(true));
        assert_eq!(u.log_level.as_deref(), Some("debug"));
        assert_eq!(u.log_format.as_deref(), Some("json"));
        assert_eq!(u.global_shadow, Some(false));
        assert_eq!(u.global_quota, None);
        assert_eq!(u.merge_domains, Some(true));
    }

    #[test]
    fn bad_values_name_their_variable() {
        let e = env(&[("GRPC_PORT", "eighty")]).unwrap_err();
        assert!(e.contains("GRPC_PORT"), "{e}");
        let e = env(&[("SHADOW_MODE", "yes")]).unwrap_err();
        assert!(e.contains("SHADOW_MODE"), "{e}");
    }
}
