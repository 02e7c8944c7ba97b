//! Typed CSV rows: one struct per CSV file, whose fields are the file's
//! columns in order.
//!
//! [`csv_row!`](crate::csv_row) declares the struct and, beside it, a
//! struct of the same field names holding each column's name
//! (`Row::NAMES.lost_fraction == "lost_fraction"`). The table writer takes
//! its header from the fields, and code that reads a column back (figures,
//! the report) names it through `NAMES`, so renaming a field renames the
//! column everywhere and a reader of a column that no longer exists does not
//! build.

use super::{Table, fmt_f64};

/// How a field's value is written into its CSV cell.
pub(crate) trait Cell {
    /// The cell's text.
    fn cell(&self) -> String;
}

impl Cell for f64 {
    /// Shortest round-trip decimal; NaN as an empty cell ([`fmt_f64`]).
    fn cell(&self) -> String {
        fmt_f64(*self)
    }
}

impl Cell for String {
    fn cell(&self) -> String {
        self.clone()
    }
}

impl Cell for &str {
    fn cell(&self) -> String {
        (*self).to_string()
    }
}

macro_rules! display_cells {
    ($($t:ty),*) => {
        $(impl Cell for $t {
            fn cell(&self) -> String {
                self.to_string()
            }
        })*
    };
}
display_cells!(usize, u64, u32, i64, bool);

impl<T: Cell> Cell for Option<T> {
    /// The value's cell, or an empty cell.
    fn cell(&self) -> String {
        self.as_ref().map_or_else(String::new, Cell::cell)
    }
}

/// A CSV row type declared with [`csv_row!`](crate::csv_row).
pub(crate) trait Row {
    /// Column names, in field order.
    const COLUMNS: &'static [&'static str];
    /// The row's cells, in field order.
    fn cells(&self) -> Vec<String>;

    /// An empty table with this row's columns.
    fn table() -> Table {
        Table::new(Self::COLUMNS.iter().copied())
    }
}

impl Table {
    /// Appends a typed row (its columns must be this table's).
    pub(crate) fn add<R: Row>(&mut self, row: &R) {
        debug_assert!(
            self.header
                .iter()
                .map(String::as_str)
                .eq(R::COLUMNS.iter().copied()),
            "a row of other columns"
        );
        self.push(row.cells());
    }
}

/// Declares a CSV row struct (every field `pub(crate)`, its type a
/// [`Cell`]) and its column-name struct:
///
/// ```ignore
/// csv_row! {
///     /// A row of `trials.csv`.
///     pub(crate) struct TrialRow / TrialColumns {
///         /// Series name.
///         series: String,
///         /// Rework iterations.
///         rework_iterations: usize,
///     }
/// }
/// assert_eq!(TrialRow::NAMES.rework_iterations, "rework_iterations");
/// ```
#[macro_export]
#[doc(hidden)]
macro_rules! csv_row {
    (
        $(#[$meta:meta])*
        $vis:vis struct $row:ident / $names:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $row {
            $( $(#[$fmeta])* pub(crate) $field: $ty, )*
        }

        #[doc = concat!("The column names of [`", stringify!($row), "`], one field per column.")]
        #[derive(Clone, Copy, Debug)]
        #[allow(dead_code)]
        $vis struct $names {
            $(
                #[doc = concat!("`", stringify!($field), "`")]
                pub(crate) $field: &'static str,
            )*
        }

        impl $row {
            /// Each column's name, by field.
            #[allow(dead_code)]
            pub(crate) const NAMES: $names = $names { $( $field: stringify!($field), )* };
        }

        impl $crate::report::row::Row for $row {
            const COLUMNS: &'static [&'static str] = &[ $( stringify!($field), )* ];
            fn cells(&self) -> Vec<String> {
                vec![ $( $crate::report::row::Cell::cell(&self.$field), )* ]
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::csv_row! {
        /// A test row.
        struct Sample / SampleColumns {
            /// A name.
            name: String,
            /// A number.
            value: f64,
            /// A count.
            count: usize,
            /// Maybe a number.
            maybe: Option<f64>,
        }
    }

    #[test]
    fn fields_are_columns_and_cells_are_formatted_like_fmt_f64() {
        assert_eq!(Sample::COLUMNS, ["name", "value", "count", "maybe"]);
        assert_eq!(Sample::NAMES.maybe, "maybe");
        let mut t = Sample::table();
        t.add(&Sample {
            name: "a,b".into(),
            value: 0.1,
            count: 3,
            maybe: None,
        });
        t.add(&Sample {
            name: "c".into(),
            value: f64::NAN,
            count: 0,
            maybe: Some(2.5),
        });
        let text = String::from_utf8(t.to_csv().unwrap()).unwrap();
        assert_eq!(text, "name,value,count,maybe\n\"a,b\",0.1,3,\nc,,0,2.5\n");
    }
}
