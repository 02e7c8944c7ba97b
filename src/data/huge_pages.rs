//! Large read-mostly buffers backed by transparent huge pages, where the
//! system allows it.
//!
//! A minibatch gathers rows scattered over a dataset of tens of megabytes:
//! with 4 KiB pages nearly every row costs a TLB miss and a page walk, which
//! a software prefetch also waits for. With 2 MiB pages the whole dataset
//! fits in the TLB. The request is a hint (`madvise(MADV_HUGEPAGE)` on
//! Linux, honoured when transparent huge pages are set to `madvise` or
//! `always`): the values are the same either way, only where they sit.

/// An empty vector with room for `len` values, whose memory (the whole
/// 2 MiB pages inside it) is marked for huge pages before anything is
/// written to it.
pub(crate) fn with_capacity<T>(len: usize) -> Vec<T> {
    let v = Vec::with_capacity(len);
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_ptr() as usize;
        let end = start + len * std::mem::size_of::<T>();
        let (lo, hi) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if hi > lo {
            // SAFETY: the range lies inside the vector's own allocation, and
            // MADV_HUGEPAGE changes only how it is backed, never its contents.
            // A refusal (old kernel, huge pages off) leaves it as it was.
            unsafe {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_huge_page_vector_holds_what_is_pushed() {
        let mut v: Vec<u8> = super::with_capacity(5 << 20);
        assert!(v.capacity() >= 5 << 20 && v.is_empty());
        v.extend((0..5usize << 20).map(|i| i as u8));
        assert!(v.iter().enumerate().all(|(i, &b)| b == i as u8));
    }
}
