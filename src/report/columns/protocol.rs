//! The columns of a `protocol` scenario's CSV files (see docs/PROTOCOLS.md).
