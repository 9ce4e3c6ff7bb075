//! Wildcard values: a configured `value` holding `*` anywhere (`files*`, `bar*b`,
//! `foo*bar*baz`), each `*` matching any run of characters, possibly empty, as
//! envoyproxy/ratelimit matches them (since its 2026-03-12 change; before, only a trailing
//! `*` was a wildcard).

/// A configured value with at least one `*`, split at load time so that a match allocates
/// nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The value as written (`foo*bar`): the shared key of a `share_threshold` limit.
    text: String,
    /// The literal pieces between the stars (`["foo", "bar"]`); one more than the stars.
    parts: Vec<String>,
}

impl Pattern {
    /// The pattern of `value`, or `None` when it holds no `*` (an exact value).
    pub fn new(value: &str) -> Option<Pattern> {
        if !value.contains('*') {
            return None;
        }
        Some(Pattern {
            text: value.to_string(),
            parts: value.split('*').map(str::to_string).collect(),
        })
    }

    /// The value as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether `value` matches: it starts with the first piece, ends with the last, and
    /// holds the middle pieces in order between them, none overlapping another.
    pub fn matches(&self, value: &str) -> bool {
        let (first, rest) = match self.parts.split_first() {
            Some(x) => x,
            None => return value.is_empty(),
        };
        let Some((last, middle)) = rest.split_last() else {
            return value == first;
        };
        let fixed: usize = self.parts.iter().map(String::len).sum();
        if value.len() < fixed || !value.starts_with(first.as_str()) {
            return false;
        }
        if !value.ends_with(last.as_str()) {
            return false;
        }
        // Between the prefix and the suffix (they cannot overlap: the length was checked).
        let mut between = &value[first.len()..value.len() - last.len()];
        for piece in middle {
            match between.find(piece.as_str()) {
                Some(i) => between = &between[i + piece.len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, value: &str) -> bool {
        Pattern::new(pattern).expect("a pattern").matches(value)
    }

    #[test]
    fn exact_values_are_not_patterns() {
        assert_eq!(Pattern::new("plain"), None);
    }

    #[test]
    fn trailing_star_is_a_prefix() {
        assert!(m("files*", "files"));
        assert!(m("files*", "files/a/b"));
        assert!(!m("files*", "file"));
        assert!(m("*", ""));
        assert!(m("*", "anything"));
    }

    #[test]
    fn stars_anywhere() {
        assert!(m("bar*b", "barb"));
        assert!(m("bar*b", "bar-xyz-b"));
        assert!(!m("bar*b", "bar-xyz-c"));
        assert!(!m("bar*b", "ba"));
        assert!(m("*suffix", "a-suffix"));
        assert!(!m("*suffix", "a-suffi"));
        assert!(m("foo*bar*baz", "foobarbaz"));
        assert!(m("foo*bar*baz", "foo-1-bar-2-baz"));
        assert!(!m("foo*bar*baz", "foo-1-baz-2-bar"));
        assert!(!m("foo*bar*baz", "foobaz"));
        // The prefix and the suffix do not share characters.
        assert!(!m("ab*ba", "aba"));
        assert!(m("ab*ba", "abba"));
        assert!(m("a**b", "ab"));
    }
}
