//! Scenarios shipped in `scenarios/` and embedded in the binary at build time.

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// The text of the bundled scenario `name` (file stem in `scenarios/`).
pub fn find(name: &str) -> Option<&'static str> {
    BUNDLED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Names of all bundled scenarios, sorted.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUNDLED.iter().map(|(n, _)| *n)
}
