//! The hot kernels of `mf` (none registered yet).

use super::HotKernel;

/// The `mf` kernels.
pub fn kernels() -> Vec<Box<dyn HotKernel>> {
    Vec::new()
}
