//! Loom models of tollgate live in `tests/`; this library is empty on purpose.
