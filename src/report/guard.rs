//! Turning a panic on untrusted data into an error.
//!
//! Tables are built from records read back from journals and shard folders,
//! files a user can edit. Their well-formedness is checked when they are
//! decoded; [`without_panics`] is the last line behind those checks: a
//! record that still makes the table code index out of bounds becomes an
//! error message instead of a crash, and nothing is printed by the panic
//! hook while it runs.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Runs `f`; a panic inside it (on this thread) is returned as its
/// message instead of unwinding further or being printed.
pub(crate) fn without_panics<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_hook();
    let was = GUARDED.with(|g| g.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(was));
    result.map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "an inconsistency".to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_messages() {
        assert_eq!(without_panics(|| 3), Ok(3));
        let v: Vec<u8> = Vec::new();
        let i = v.len() + 2;
        let e = without_panics(|| v[i]).unwrap_err();
        assert!(e.contains("out of bounds"), "{e}");
        let e = without_panics(|| -> u8 { panic!("custom {}", 7) }).unwrap_err();
        assert_eq!(e, "custom 7");
    }
}
