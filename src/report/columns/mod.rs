//! Each CSV file's columns, as one row struct per file
//! ([`csv_row!`](crate::csv_row)): the experiment kinds write their tables
//! through them and the figures read columns back by their field names, so a
//! renamed column changes both or does not build.

pub(crate) mod faults;
pub(crate) mod perturbation;
pub(crate) mod precision;
pub(crate) mod protocol;
pub(crate) mod recovery;
