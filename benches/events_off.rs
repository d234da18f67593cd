//! What an emission point of the core costs when nobody observes: one relaxed
//! atomic load (`events::observed`), beside the round trip of the lock step
//! it sits in.
//!
//!     cargo bench --no-default-features --bench events_off
//!
//! Times 200 million checks, in 5 runs, and prints the fastest run's time per
//! check. An acquire + release meets at most four such points (the acquire's
//! end, a wake-up, the release; a renewal or loss once per ttl/3), while its
//! two round trips to Redis take tens of microseconds.

use std::hint::black_box;
use std::time::Instant;

use ferrolock::events;

fn main() {
    const CHECKS: u32 = 200_000_000;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        let mut seen = 0u32;
        for _ in 0..CHECKS {
            seen += u32::from(black_box(events::observed()));
        }
        black_box(seen);
        best = best.min(start.elapsed().as_secs_f64() / f64::from(CHECKS));
    }
    println!("one emission point with nobody observing: {:.2} ns", best * 1e9);
    println!("four per acquire + release: {:.1} ns", 4.0 * best * 1e9);
}
