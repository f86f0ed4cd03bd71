//! Shared by the fuzz targets: a counting global allocator, so that a target can assert that
//! decoding an input never holds more memory than a bound proportional to that input.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting live bytes and the peak since the last [`reset_peak`].
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

fn grew(n: usize) {
    let live = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

/// libfuzzer-sys makes every panic abort, even one the code under test catches on purpose
/// (rollgate turns a panic of the PromQL parser into an invalid-query error). This restores
/// the default hook: a panic that escapes the target still aborts (libfuzzer-sys catches it
/// and aborts), a caught one is only printed.
pub fn caught_panics_are_not_crashes() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| drop(std::panic::take_hook()));
}

/// Starts a measurement: the peak becomes the bytes live now.
pub fn reset_peak() -> usize {
    let live = LIVE.load(Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    live
}

/// Bytes allocated at the peak since `base` (what [`reset_peak`] returned).
pub fn peak_since(base: usize) -> usize {
    PEAK.load(Ordering::Relaxed).saturating_sub(base)
}

/// Asserts that `f` never had more than `per_byte * input + slack` bytes live at once.
pub fn assert_bounded<R>(input: usize, per_byte: usize, slack: usize, f: impl FnOnce() -> R) -> R {
    let base = reset_peak();
    let r = f();
    let peak = peak_since(base);
    let bound = input.saturating_mul(per_byte).saturating_add(slack);
    assert!(
        peak <= bound,
        "decoding {input} input bytes peaked at {peak} allocated bytes (bound {bound})"
    );
    r
}
