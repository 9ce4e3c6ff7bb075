//! Shared by the fuzz targets: the guide's models and the checks against them.

pub mod budget;
pub mod check;
pub mod model;
pub mod spec;
