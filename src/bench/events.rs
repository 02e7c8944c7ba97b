//! The hot kernels of `events` (none registered yet).

use super::HotKernel;

/// The `events` kernels.
pub fn kernels() -> Vec<Box<dyn HotKernel>> {
    Vec::new()
}
