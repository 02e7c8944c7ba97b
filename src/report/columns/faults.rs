//! The columns of a `faults` scenario's CSV files (see docs/FAULTS.md).
