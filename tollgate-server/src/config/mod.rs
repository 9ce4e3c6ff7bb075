//! Reading a configuration directory: every `*.yaml`/`*.yml` file in it is one domain in
//! envoyproxy/ratelimit's format. A file that cannot be used is refused with an error
//! naming the file, the line and column, and the field.

pub mod yaml;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use yaml::{Descriptor, DomainFile, RateLimitSpec, Unit};

/// Why a configuration directory was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file at fault (the directory itself when it cannot be read).
    pub file: PathBuf,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// The 1-based column, when known.
    pub column: Option<usize>,
    /// The path of the field at fault (`descriptors[0].rate_limit.unit`), when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// A whole configuration: the domains by name, each with the file it came from.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Domain name to (file, parsed content).
    pub domains: BTreeMap<String, (PathBuf, DomainFile)>,
}

/// Parses one file's text (`path` names it in errors).
///
/// # Errors
///
/// A [`ConfigError`] naming the file, line, column and field.
pub fn parse_file(path: &Path, text: &str) -> Result<DomainFile, ConfigError> {
    let de = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize::<_, DomainFile>(de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        let loc = inner.location();
        // serde_norway appends " at line L column C" to its message: keep the bare one.
        let mut message = inner.to_string();
        if let Some(i) = message.find(" at line ") {
            message.truncate(i);
        }
        ConfigError {
            file: path.to_path_buf(),
            line: loc.as_ref().map(|l| l.line()),
            column: loc.as_ref().map(|l| l.column()),
            field: (field != "." && !field.is_empty()).then_some(field),
            message,
        }
    })
}

/// The YAML files of `dir`, sorted by name.
///
/// # Errors
///
/// When the directory cannot be read.
pub fn config_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let read = std::fs::read_dir(dir).map_err(|e| io_error(dir, &e))?;
    let mut files: Vec<PathBuf> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
        })
        .collect();
    files.sort();
    Ok(files)
}

fn io_error(path: &Path, e: &std::io::Error) -> ConfigError {
    ConfigError {
        file: path.to_path_buf(),
        line: None,
        column: None,
        field: None,
        message: format!("cannot read: {e}"),
    }
}

/// Reads every YAML file of `dir`; a domain in two files is refused.
///
/// # Errors
///
/// The first file that cannot be read or parsed, or a domain defined twice.
pub fn load_dir(dir: &Path) -> Result<Config, ConfigError> {
    load_dir_merging(dir, false)
}

/// Reads every YAML file of `dir`. With `merge` (envoyproxy/ratelimit's
/// `MERGE_DOMAIN_CONFIG`), the files of one domain are merged: their top-level
/// descriptors joined (a key and value in two files is refused), their domain settings
/// equal or given once; without it, a domain in two files is refused.
///
/// # Errors
///
/// The first file that cannot be read or parsed, a domain defined twice (without
/// `merge`), or a descriptor or domain setting that two merged files both define.
pub fn load_dir_merging(dir: &Path, merge: bool) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    for file in config_files(dir)? {
        let bytes = std::fs::read(&file).map_err(|e| io_error(&file, &e))?;
        let text = String::from_utf8(bytes).map_err(|e| ConfigError {
            file: file.clone(),
            line: None,
            column: None,
            field: None,
            message: format!("not UTF-8: {e}"),
        })?;
        let parsed = parse_file(&file, &text)?;
        if parsed.domain.is_empty() {
            return Err(ConfigError {
                file,
                line: Some(1),
                column: None,
                field: Some("domain".into()),
                message: "the domain must not be empty".into(),
            });
        }
        match config.domains.get_mut(&parsed.domain) {
            Some((_, existing)) if merge => merge_into(existing, parsed, &file)?,
            Some((other, _)) => {
                return Err(ConfigError {
                    file: file.clone(),
                    line: None,
                    column: None,
                    field: Some("domain".into()),
                    message: format!(
                        "domain `{}` is already defined in {}",
                        parsed.domain,
                        other.display()
                    ),
                });
            }
            None => {
                config.domains.insert(parsed.domain.clone(), (file, parsed));
            }
        }
    }
    Ok(config)
}

/// Adds the file `file`'s `more` to the domain `into` (see [`load_dir_merging`]).
fn merge_into(into: &mut DomainFile, more: DomainFile, file: &Path) -> Result<(), ConfigError> {
    let refuse = |field: &str, message: String| ConfigError {
        file: file.to_path_buf(),
        line: None,
        column: None,
        field: Some(field.into()),
        message,
    };
    for d in &more.descriptors.0 {
        let twice = into
            .descriptors
            .0
            .iter()
            .any(|x| x.key == d.key && x.value == d.value);
        if twice {
            let composite = match &d.value {
                Some(v) => format!("{}.{}_{v}", more.domain, d.key),
                None => format!("{}.{}", more.domain, d.key),
            };
            return Err(refuse(
                "descriptors",
                format!("duplicate descriptor composite key `{composite}`"),
            ));
        }
    }
    if more.max_keys.is_some() && into.max_keys.is_some() && more.max_keys != into.max_keys {
        return Err(refuse(
            "max_keys",
            "merged files of one domain give different max_keys".into(),
        ));
    }
    if more.allow_limit_override.is_some()
        && into.allow_limit_override.is_some()
        && more.allow_limit_override != into.allow_limit_override
    {
        return Err(refuse(
            "allow_limit_override",
            "merged files of one domain give different allow_limit_override".into(),
        ));
    }
    into.max_keys = into.max_keys.or(more.max_keys);
    into.allow_limit_override = into.allow_limit_override.or(more.allow_limit_override);
    into.descriptors.0.extend(more.descriptors.0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ConfigError {
        parse_file(Path::new("x.yaml"), text).unwrap_err()
    }

    #[test]
    fn envoy_example_parses() {
        let text = "domain: mongo_cps\ndescriptors:\n  - key: database\n    value: users\n    rate_limit:\n      unit: second\n      requests_per_unit: 500\n  - key: database\n    value: default\n    rate_limit:\n      unit: SECOND\n      requests_per_unit: 500\n";
        let d = parse_file(Path::new("x.yaml"), text).unwrap();
        assert_eq!(d.domain, "mongo_cps");
        assert_eq!(d.descriptors.0.len(), 2);
        let rl = d.descriptors.0[1].rate_limit.as_ref().unwrap();
        assert_eq!(rl.unit, Some(Unit::Second));
        assert_eq!(rl.requests_per_unit, 500);
    }

    #[test]
    fn bad_unit_names_line_and_field() {
        let e = err("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 5\n");
        assert_eq!(e.line, Some(5), "{e}");
        assert_eq!(e.field.as_deref(), Some("descriptors[0].rate_limit.unit"));
        assert!(e.message.contains("fortnight"), "{e}");
        assert!(e.to_string().starts_with("x.yaml:5:"), "{e}");
    }

    #[test]
    fn unknown_field_and_duplicates_are_refused() {
        let e = err("domain: d\ndescriptors:\n  - key: k\n    ratelimit: {}\n");
        assert!(e.message.contains("ratelimit"), "{e}");
        assert_eq!(e.line, Some(4), "{e}");
        let e =
            err("domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n");
        assert!(e.message.contains("duplicate"), "{e}");
    }

    #[test]
    fn burst_on_a_window_is_refused_by_the_library() {
        let e = err("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: fixed_window\n      burst: 9\n");
        assert!(e.message.contains("rate_limit"), "{e}");
        assert!(e.line.is_some(), "{e}");
    }
}
