//! The hot kernels of `lda` (none registered yet).

use super::HotKernel;

/// The `lda` kernels.
pub fn kernels() -> Vec<Box<dyn HotKernel>> {
    Vec::new()
}
