//! Prints what this machine lets autopin count and what counting costs here:
//! probe results, the rate of a busy thread, the per-switch cost of per-thread counting,
//! energy availability and the heartbeat read cost. Used by bench/perf.sh.

use autopin_objective::{EventSpec, Sysfs};
use autopin_perf::{
    measure_counting_cost, open_energy, probe, CounterSource, HeartbeatChannel, HeartbeatWriter,
    PerfCounterSource, Target,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

fn busy_rate(event: &str) -> Result<f64, String> {
    let spec = EventSpec::parse(event).map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let _ = tx.send(rustix::thread::gettid().as_raw_pid());
        let mut x = 1u64;
        while !s.load(Ordering::Relaxed) {
            for i in 0..1000u64 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
        }
    });
    let tid = rx.recv().map_err(|e| e.to_string())?;
    let mut src =
        PerfCounterSource::new(vec![spec], Default::default()).map_err(|e| e.to_string())?;
    let r = (|| {
        src.open(Target::Thread(tid))?;
        let a = src.read(Target::Thread(tid))?[0];
        let t = Instant::now();
        std::thread::sleep(Duration::from_millis(500));
        let b = src.read(Target::Thread(tid))?[0];
        Ok::<f64, autopin_objective::PerfError>(
            b.delta_since(&a).unwrap_or(f64::NAN) / t.elapsed().as_secs_f64(),
        )
    })();
    stop.store(true, Ordering::Relaxed);
    let _ = h.join();
    r.map_err(|e| e.to_string())
}

fn main() {
    let avail = probe();
    println!("== probe");
    for l in avail.summary_lines() {
        println!("  {l}");
    }
    println!("== busy user-space thread, 0.5 s");
    for ev in ["instructions:u", "cycles:u", "task-clock"] {
        match busy_rate(ev) {
            Ok(r) => println!("  {ev:16} {r:.4e} /s"),
            Err(e) => println!("  {ev:16} unavailable: {e}"),
        }
    }
    println!("== cost of per-thread counting per context switch (pipe ping-pong on one CPU, 5 plain + 5 counted runs)");
    for ev in [
        "task-clock",
        "instructions:u",
        "instructions:u,cycles:u,branches:u,branch-misses:u",
    ] {
        let specs: Result<Vec<EventSpec>, _> = ev.split(',').map(EventSpec::parse).collect();
        let specs = match specs {
            Ok(s) => s,
            Err(e) => {
                println!("  {ev}: {e}");
                continue;
            }
        };
        let mut costs = vec![];
        for _ in 0..3 {
            match measure_counting_cost(&specs, Duration::from_millis(300)) {
                Ok(c) => costs.push(c),
                Err(e) => {
                    println!("  {ev}: unavailable: {e}");
                    break;
                }
            }
        }
        for c in &costs {
            println!(
                "  {ev}: round trip {:.0} ns plain vs {:.0} ns counted (ratio {:.3}), {:.2} switches/trip, {:+.0} ns per counted switch (noise {:.0} ns, {}); at 20k switches/s on 2 CPUs: {:.2}% slowdown",
                c.round_trip_ns_plain,
                c.round_trip_ns_counted,
                c.round_trip_ns_counted / c.round_trip_ns_plain,
                c.switches_per_round_trip,
                c.per_switch_ns,
                c.noise_ns,
                if c.is_significant() { "significant" } else { "within noise" },
                100.0 * c.estimated_slowdown(20_000.0, 2)
            );
        }
    }
    println!("== energy");
    match open_energy(&Sysfs::system()) {
        Ok(mut e) => {
            let a = e.read_joules().unwrap_or(f64::NAN);
            std::thread::sleep(Duration::from_millis(500));
            let b = e.read_joules().unwrap_or(f64::NAN);
            println!("  {}: {:.2} W over 0.5 s", e.describe(), (b - a) / 0.5);
        }
        Err(e) => println!("  {e}"),
    }
    println!("== heartbeat channel");
    let dir = std::env::temp_dir();
    match HeartbeatChannel::create(&dir) {
        Ok((ch, path)) => {
            let w = HeartbeatWriter::open(&path).expect("open own channel");
            let n = 1_000_000u64;
            let t = Instant::now();
            for _ in 0..n {
                w.beat(1);
            }
            let beat_ns = t.elapsed().as_nanos() as f64 / n as f64;
            let t = Instant::now();
            let mut last = 0;
            for _ in 0..n {
                last = ch.read().beats;
            }
            let read_ns = t.elapsed().as_nanos() as f64 / n as f64;
            println!("  beat {beat_ns:.1} ns, read {read_ns:.1} ns (beats {last})");
        }
        Err(e) => println!("  {e}"),
    }
}
