//! What several benches share: a heap-counting allocator and the figures' helpers. Each bench
//! includes it with `#[path = "common/mod.rs"] mod common;` and uses what it needs.
#![allow(dead_code)]

use std::time::Duration;

pub mod alloc {
    //! A global allocator that forwards to the system's and counts live heap bytes and their
    //! peak. A bench installs it with
    //! `#[global_allocator] static ALLOC: common::alloc::Counting = common::alloc::Counting;`.

    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The counting allocator.
    pub struct Counting;

    static LIVE: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);

    // SAFETY: forwards to the system allocator unchanged; only counts bytes.
    #[allow(unsafe_code)] // the lint table denies it; a counting allocator cannot do without
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
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
                if new_size >= layout.size() {
                    let grow = new_size - layout.size();
                    let now = LIVE.fetch_add(grow, Ordering::Relaxed) + grow;
                    PEAK.fetch_max(now, Ordering::Relaxed);
                } else {
                    LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
                }
            }
            p
        }
    }

    /// Starts a peak measurement: the peak is reset to the live bytes, which are returned.
    pub fn start() -> usize {
        let live = LIVE.load(Ordering::SeqCst);
        PEAK.store(live, Ordering::SeqCst);
        live
    }

    /// The peak heap above `start` (from [`start`]) since then, in bytes.
    pub fn peak_above(start: usize) -> usize {
        PEAK.load(Ordering::SeqCst).saturating_sub(start)
    }
}

/// The median of durations (the upper one of an even count).
pub fn median_duration(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// The median (the mean of the middle two of an even count; NaN for none).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// How a figure compares with its floor, as the benches print it.
pub fn verdict(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "MISSED"
    }
}
