//! Generated, deterministic data for a real Prometheus (see `prom.rs`).
//!
//! Every scenario is written relative to a time `base`, a whole minute (`base_now()`): samples run
//! from `base + FROM` to `base + TO`, so queries at `base` give the exact figures documented on each
//! scenario, and queries at the wall-clock "now" (some minutes after `base`) find data too.
//!
//! Counters grow at exact rational rates (`Rate`): a counter holds `floor(count * elapsed /
//! per_secs)`, so `increase()` over a window that ends on a sample (any whole minute, `base`
//! included) is exact whenever the documented count is a whole number, and `rate()` is that count
//! divided by the window. At other times (e.g. "now") Prometheus extrapolates and the figures are
//! only close (each counter within about one event, scaled by the extrapolation).
//!
//! Scenarios of `standard_dataset` (figures at base; details on each constant):
//!
//! | name | series | figures |
//! |---|---|---|
//! | `HEALTHY` | service="healthy" | 100 req/s, 0.1 % 5xx; 5 m: 30000 / 30 |
//! | `DOUBLE` | service="double" | 100 req/s, 0.2 % 5xx; 5 m: 30000 / 60 |
//! | `BAD` | service="bad" | 100 req/s, 5 % 5xx; 5 m: 30000 / 1500 |
//! | `LOWTRAFFIC` | service="lowtraffic" | 15 requests per 5 m, 0 errors (ratio 0) |
//! | `IDLE` | service="idle" | flat counters: 0 requests, ratio NaN |
//! | `STALE` | service="stale" | healthy until base-10m, then nothing |
//! | `ABSENT_SERVICE` | service="absent" | no series |
//! | `CMP_*` | service="cmp-healthy", "cmp-bad", "cmp-6x", "cmp-nocanary", "cmp-low" | 10 m counts per track |
//! | `LAT_*` | service="lat-shift", "lat-same" | latency histograms, canary +40 % / equal |
//! | `OVERFLOW_*` | service="overflow" | 5 % of requests above the largest finite bucket |
//! | `SPECIAL_METRIC` | rollgate_test_value{case} | +Inf, -Inf, NaN, 0, 1 |
//! | `standard_fleet()` | kube-state-metrics, namespace="monitoring" | 400 clusters, 12 stragglers, ... |
//! | `clean_fleet()` | kube-state-metrics, namespace="logging" | 400 clusters, all current |
//!
//! Request counters: `http_requests_total{service, track, code}` with `code="200"` and
//! `code="500"`. Single-service scenarios use `track="canary"`; compare pairs use
//! `track="canary"` and `track="stable"`. Latency: `http_request_duration_seconds_bucket{service,
//! track, le}` (+ `_sum`, `_count`). Fleet: kube-state-metrics series, see `FleetParams`.

use std::collections::HashMap;
use std::fmt::Write as _;

/// Sample step of the request and latency scenarios, in seconds (a typical scrape interval).
pub const STEP: i64 = 15;
/// First sample of the standard scenarios, in seconds relative to `base` (3 h of history).
pub const FROM: i64 = -3 * 3600;
/// Last sample of the standard scenarios, in seconds relative to `base` (1 h into the future, so
/// a test suite that runs for a while still queries inside the data).
pub const TO: i64 = 3600;

/// `base` for data generated now: the current Unix time in seconds, rounded down to the minute.
pub fn base_now() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    now - now.rem_euclid(60)
}

// ---------------------------------------------------------------------------------------------
// OpenMetrics writer
// ---------------------------------------------------------------------------------------------

/// OpenMetrics text under construction. Lines are kept in one buffer per metric family, so a
/// family's lines stay together (as OpenMetrics requires) whichever scenarios add to it; each
/// series must be written in increasing time order (promtool rejects out-of-order samples).
#[derive(Default)]
pub struct Dataset {
    families: Vec<(String, &'static str, String)>,
    index: HashMap<String, usize>,
}

impl Dataset {
    /// An empty data set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The buffer of family `name` of OpenMetrics type `kind` (`counter`, `gauge`, `histogram`);
    /// write its samples with `push_sample`.
    pub fn family(&mut self, name: &str, kind: &'static str) -> &mut String {
        let i = match self.index.get(name) {
            Some(&i) => i,
            None => {
                self.families.push((name.to_string(), kind, String::new()));
                self.index.insert(name.to_string(), self.families.len() - 1);
                self.families.len() - 1
            }
        };
        &mut self.families[i].2
    }

    /// The OpenMetrics text: every family with its `# TYPE` line, then `# EOF`.
    pub fn finish(self) -> String {
        let len: usize = self
            .families
            .iter()
            .map(|f| f.0.len() + f.2.len() + 32)
            .sum();
        let mut out = String::with_capacity(len + 8);
        for (name, kind, text) in self.families {
            let _ = writeln!(out, "# TYPE {name} {kind}");
            out.push_str(&text);
        }
        out.push_str("# EOF\n");
        out
    }
}

/// Appends one sample line `name{labels} value ts` to `buf` (labels escaped, value in
/// OpenMetrics spelling: `NaN`, `+Inf`, `-Inf`).
pub fn push_sample(buf: &mut String, name: &str, labels: &[(&str, &str)], value: f64, ts: i64) {
    buf.push_str(name);
    if !labels.is_empty() {
        buf.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                buf.push(',');
            }
            buf.push_str(k);
            buf.push_str("=\"");
            for c in v.chars() {
                match c {
                    '\\' => buf.push_str("\\\\"),
                    '"' => buf.push_str("\\\""),
                    '\n' => buf.push_str("\\n"),
                    c => buf.push(c),
                }
            }
            buf.push('"');
        }
        buf.push('}');
    }
    buf.push(' ');
    if value.is_nan() {
        buf.push_str("NaN");
    } else if value.is_infinite() {
        buf.push_str(if value > 0.0 { "+Inf" } else { "-Inf" });
    } else if value.fract() == 0.0 && value.abs() < 1e15 {
        let _ = write!(buf, "{}", value as i64);
    } else {
        let _ = write!(buf, "{value}");
    }
    let _ = writeln!(buf, " {ts}");
}

/// Sample times `base+from, base+from+step, ...` up to and including `base+to`.
pub fn times(base: i64, from: i64, to: i64, step: i64) -> impl Iterator<Item = i64> {
    (0..)
        .map(move |k| base + from + k * step)
        .take_while(move |t| *t <= base + to)
}

/// Deterministic 64-bit mixing (splitmix64): the only source of "noise" in the data.
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A deterministic value in [-1, 1] for (seed, i).
fn jitter(seed: u64, i: i64) -> f64 {
    let v = mix(seed ^ mix(i as u64)) >> 11; // 53 bits
    (v as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

// ---------------------------------------------------------------------------------------------
// Request counters
// ---------------------------------------------------------------------------------------------

/// A constant rate: `count` events every `per_secs` seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// Events per `per_secs`.
    pub count: u64,
    /// The period of `count`, in seconds (> 0).
    pub per_secs: u64,
}

impl Rate {
    /// No events (a flat counter).
    pub const ZERO: Rate = Rate::new(0, 1);

    /// `count` events every `per_secs` seconds.
    pub const fn new(count: u64, per_secs: u64) -> Rate {
        Rate { count, per_secs }
    }

    /// Events per second.
    pub fn per_second(self) -> f64 {
        self.count as f64 / self.per_secs as f64
    }

    /// Events in a window of `secs` seconds ending on a whole minute (exact when whole).
    pub fn increase(self, secs: u64) -> f64 {
        (self.count * secs) as f64 / self.per_secs as f64
    }

    /// The counter value `elapsed` seconds after the series starts.
    fn counter(self, elapsed: i64) -> f64 {
        ((self.count * elapsed as u64) / self.per_secs) as f64
    }
}

/// One service/track of `http_requests_total`: `code="200"` at `ok`, `code="500"` at `errors`,
/// sampled every `STEP` from `FROM` to `TO` (or to `stop`).
#[derive(Clone, Copy, Debug)]
pub struct Traffic {
    /// `service` label.
    pub service: &'static str,
    /// `track` label.
    pub track: &'static str,
    /// Rate of `code="200"` requests.
    pub ok: Rate,
    /// Rate of `code="500"` requests; `None`: no 5xx series is written at all.
    pub errors: Option<Rate>,
    /// The last sample is at `base + stop` (None: `TO`).
    pub stop: Option<i64>,
}

impl Traffic {
    /// `{service="..",track=".."}` selector text (without braces).
    pub fn matchers(&self) -> String {
        format!("service=\"{}\",track=\"{}\"", self.service, self.track)
    }

    /// Requests of all codes per second.
    pub fn rps(&self) -> f64 {
        self.ok.per_second() + self.errors.map_or(0.0, |e| e.per_second())
    }

    /// All requests in a window of `secs` ending on a whole minute.
    pub fn requests(&self, secs: u64) -> f64 {
        self.ok.increase(secs) + self.errors.map_or(0.0, |e| e.increase(secs))
    }

    /// 5xx requests in a window of `secs` ending on a whole minute.
    pub fn errors_in(&self, secs: u64) -> f64 {
        self.errors.map_or(0.0, |e| e.increase(secs))
    }

    /// 5xx / all (NaN for 0/0, as PromQL gives it).
    pub fn error_ratio(&self) -> f64 {
        let e = self.errors.map_or(0.0, |e| e.per_second());
        e / self.rps()
    }

    /// `sum(rate(5xx[w])) / sum(rate(all[w]))` for this service/track.
    pub fn ratio_query(&self, window: &str) -> String {
        let m = self.matchers();
        format!(
            "sum(rate(http_requests_total{{{m},code=~\"5..\"}}[{window}])) / sum(rate(http_requests_total{{{m}}}[{window}]))"
        )
    }

    /// `sum(increase(all[w]))`: the request-count guard query.
    pub fn total_query(&self, window: &str) -> String {
        format!(
            "sum(increase(http_requests_total{{{}}}[{window}]))",
            self.matchers()
        )
    }

    /// `sum(increase(5xx[w]))`: bad events for the compare ratio form.
    pub fn bad_query(&self, window: &str) -> String {
        format!(
            "sum(increase(http_requests_total{{{},code=~\"5..\"}}[{window}]))",
            self.matchers()
        )
    }

    pub fn write(&self, ds: &mut Dataset, base: i64) {
        let to = self.stop.unwrap_or(TO);
        let buf = ds.family("http_requests", "counter");
        let mut codes = vec![("200", self.ok)];
        if let Some(e) = self.errors {
            codes.push(("500", e));
        }
        for (code, rate) in codes {
            let labels = [
                ("service", self.service),
                ("track", self.track),
                ("code", code),
            ];
            for t in times(base, FROM, to, STEP) {
                let v = rate.counter(t - (base + FROM));
                push_sample(buf, "http_requests_total", &labels, v, t);
            }
        }
    }
}

/// service="healthy": 100 req/s, 0.1 % 5xx (99.9/s 200 + 0.1/s 500).
/// At base: 5 m → 30000 requests, 30 errors; error ratio 0.001.
pub const HEALTHY: Traffic = Traffic {
    service: "healthy",
    track: "canary",
    ok: Rate::new(999, 10),
    errors: Some(Rate::new(1, 10)),
    stop: None,
};

/// service="double": 100 req/s, 0.2 % 5xx (twice healthy's error rate).
/// At base: 5 m → 30000 requests, 60 errors; error ratio 0.002.
pub const DOUBLE: Traffic = Traffic {
    service: "double",
    track: "canary",
    ok: Rate::new(998, 10),
    errors: Some(Rate::new(2, 10)),
    stop: None,
};

/// service="bad": 100 req/s, 5 % 5xx (95/s + 5/s).
/// At base: 5 m → 30000 requests, 1500 errors; error ratio 0.05.
pub const BAD: Traffic = Traffic {
    service: "bad",
    track: "canary",
    ok: Rate::new(95, 1),
    errors: Some(Rate::new(5, 1)),
    stop: None,
};

/// service="lowtraffic": one request every 20 s, no errors (a flat `code="500"` series exists).
/// At base: 5 m → 15 requests (below a guard of 300), 0 errors; error ratio 0.
pub const LOWTRAFFIC: Traffic = Traffic {
    service: "lowtraffic",
    track: "canary",
    ok: Rate::new(1, 20),
    errors: Some(Rate::ZERO),
    stop: None,
};

/// service="idle": both series exist but stay flat. At base: 5 m → 0 requests; the error ratio
/// is 0/0 = NaN.
pub const IDLE: Traffic = Traffic {
    service: "idle",
    track: "canary",
    ok: Rate::ZERO,
    errors: Some(Rate::ZERO),
    stop: None,
};

/// service="stale": like healthy (100 req/s, 0.1 %) but the series stop 10 min before base, so an
/// instant query at base (5 m lookback) finds nothing while `last_over_time(...[1h])` does.
pub const STALE: Traffic = Traffic {
    service: "stale",
    track: "canary",
    ok: Rate::new(999, 10),
    errors: Some(Rate::new(1, 10)),
    stop: Some(-600),
};

/// service="absent": no series at all are written; every query gives an empty vector.
pub const ABSENT_SERVICE: &str = "absent";

/// Window of the compare scenarios' documented counts, in seconds (10 m).
pub const COMPARE_WINDOW: u64 = 600;

/// service="cmp-healthy", track="canary": 40 req/s, 0.5 % 5xx. 10 m at base: 24000 / 120.
pub const CMP_HEALTHY_CANARY: Traffic = Traffic {
    service: "cmp-healthy",
    track: "canary",
    ok: Rate::new(199, 5),
    errors: Some(Rate::new(1, 5)),
    stop: None,
};
/// service="cmp-healthy", track="stable": 44 req/s, 0.5 % 5xx. 10 m at base: 26400 / 132.
pub const CMP_HEALTHY_STABLE: Traffic = Traffic {
    service: "cmp-healthy",
    track: "stable",
    ok: Rate::new(2189, 50),
    errors: Some(Rate::new(11, 50)),
    stop: None,
};
/// service="cmp-bad", track="canary": 40 req/s, 3 % 5xx. 10 m at base: 24000 / 720.
pub const CMP_BAD_CANARY: Traffic = Traffic {
    service: "cmp-bad",
    track: "canary",
    ok: Rate::new(194, 5),
    errors: Some(Rate::new(6, 5)),
    stop: None,
};
/// service="cmp-bad", track="stable": 44 req/s, 0.5 % 5xx. 10 m at base: 26400 / 132.
pub const CMP_BAD_STABLE: Traffic = Traffic {
    service: "cmp-bad",
    ..CMP_HEALTHY_STABLE
};
/// service="cmp-6x", track="canary": 40 req/s, 0.6 % 5xx (6x stable). 10 m at base: 24000 / 144.
pub const CMP_6X_CANARY: Traffic = Traffic {
    service: "cmp-6x",
    track: "canary",
    ok: Rate::new(994, 25),
    errors: Some(Rate::new(6, 25)),
    stop: None,
};
/// service="cmp-6x", track="stable": 40 req/s, 0.1 % 5xx. 10 m at base: 24000 / 24.
pub const CMP_6X_STABLE: Traffic = Traffic {
    service: "cmp-6x",
    track: "stable",
    ok: Rate::new(999, 25),
    errors: Some(Rate::new(1, 25)),
    stop: None,
};
/// service="cmp-nocanary", track="stable": 40 req/s, 0.5 % 5xx; there is no canary series.
/// 10 m at base: 24000 / 120.
pub const CMP_NOCANARY_STABLE: Traffic = Traffic {
    service: "cmp-nocanary",
    ..STABLE_40
};
/// service="cmp-low", track="canary": 20 requests per 10 m, 1 of them a 5xx (a naive 5 %).
/// 10 m at base: 20 / 1.
pub const CMP_LOW_CANARY: Traffic = Traffic {
    service: "cmp-low",
    track: "canary",
    ok: Rate::new(19, 600),
    errors: Some(Rate::new(1, 600)),
    stop: None,
};
/// service="cmp-low", track="stable": 40 req/s, 0.5 % 5xx. 10 m at base: 24000 / 120.
pub const CMP_LOW_STABLE: Traffic = Traffic {
    service: "cmp-low",
    ..STABLE_40
};

/// 40 req/s at 0.5 % on the stable track (template for the stable side of some pairs).
const STABLE_40: Traffic = Traffic {
    service: "",
    track: "stable",
    ok: Rate::new(199, 5),
    errors: Some(Rate::new(1, 5)),
    stop: None,
};

/// Every request-counter scenario of the standard data set.
pub const TRAFFIC: &[Traffic] = &[
    HEALTHY,
    DOUBLE,
    BAD,
    LOWTRAFFIC,
    IDLE,
    STALE,
    CMP_HEALTHY_CANARY,
    CMP_HEALTHY_STABLE,
    CMP_BAD_CANARY,
    CMP_BAD_STABLE,
    CMP_6X_CANARY,
    CMP_6X_STABLE,
    CMP_NOCANARY_STABLE,
    CMP_LOW_CANARY,
    CMP_LOW_STABLE,
];

// ---------------------------------------------------------------------------------------------
// Latency histograms
// ---------------------------------------------------------------------------------------------

/// Finite `le` bounds of the latency scenarios' histograms, in seconds (then `+Inf`).
pub const LATENCY_BUCKETS: &[f64] = &[
    0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
];

/// A latency histogram `http_request_duration_seconds{service, track}`: `rps` requests per
/// second whose latencies are exponential with mean `mean_ms` milliseconds, the mean of each
/// 15 s step scaled by a deterministic factor in `1 ± noise_pct/100` (seeded by `seed`), so
/// per-minute quantiles vary from step to step.
#[derive(Clone, Copy, Debug)]
pub struct Latency {
    /// `service` label.
    pub service: &'static str,
    /// `track` label.
    pub track: &'static str,
    /// Requests per second.
    pub rps: u64,
    /// Mean latency (exponential scale), in milliseconds.
    pub mean_ms: u64,
    /// Amplitude of the per-step jitter of the mean, in percent.
    pub noise_pct: u64,
    /// Seed of the jitter.
    pub seed: u64,
}

impl Latency {
    /// The true q-quantile of the undisturbed distribution, in seconds: `mean * -ln(1-q)`.
    pub fn true_quantile(&self, q: f64) -> f64 {
        self.mean_ms as f64 / 1000.0 * -(1.0 - q).ln()
    }

    /// `histogram_quantile(q, sum by (le) (rate(...[w])))` for this service/track.
    pub fn quantile_query(&self, q: f64, window: &str) -> String {
        format!(
            "histogram_quantile({q}, sum by (le) (rate(http_request_duration_seconds_bucket{{service=\"{}\",track=\"{}\"}}[{window}])))",
            self.service, self.track
        )
    }

    fn write(&self, ds: &mut Dataset, base: i64) {
        let per_step = (self.rps * STEP as u64) as f64;
        let steps: Vec<i64> = times(base, FROM, TO, STEP).collect();
        // Per-step scale, then cumulative bucket counts per step.
        let scales: Vec<f64> = steps
            .iter()
            .map(|t| {
                let j = jitter(self.seed, (t - base) / STEP);
                self.mean_ms as f64 / 1000.0 * (1.0 + j * self.noise_pct as f64 / 100.0)
            })
            .collect();
        let buf = ds.family("http_request_duration_seconds", "histogram");
        let mut les: Vec<(String, Option<f64>)> = LATENCY_BUCKETS
            .iter()
            .map(|b| (b.to_string(), Some(*b)))
            .collect();
        les.push(("+Inf".to_string(), None));
        for (le, bound) in &les {
            let labels = [
                ("service", self.service),
                ("track", self.track),
                ("le", le.as_str()),
            ];
            let mut total = 0.0;
            for (i, t) in steps.iter().enumerate() {
                if i > 0 {
                    total += match bound {
                        Some(b) => (per_step * (1.0 - (-b / scales[i]).exp())).round(),
                        None => per_step,
                    };
                }
                push_sample(
                    buf,
                    "http_request_duration_seconds_bucket",
                    &labels,
                    total,
                    *t,
                );
            }
        }
        let labels = [("service", self.service), ("track", self.track)];
        for (i, t) in steps.iter().enumerate() {
            let count = per_step * i as f64;
            push_sample(
                buf,
                "http_request_duration_seconds_count",
                &labels,
                count,
                *t,
            );
        }
        let mut sum = 0.0;
        for (i, t) in steps.iter().enumerate() {
            if i > 0 {
                sum += per_step * scales[i];
            }
            let rounded = (sum * 1000.0).round() / 1000.0;
            push_sample(
                buf,
                "http_request_duration_seconds_sum",
                &labels,
                rounded,
                *t,
            );
        }
    }
}

/// service="lat-shift", track="stable": 40 req/s, exponential latency with mean 50 ms (true
/// p99 0.230 s), ±15 % jitter per step.
pub const LAT_SHIFT_STABLE: Latency = Latency {
    service: "lat-shift",
    track: "stable",
    rps: 40,
    mean_ms: 50,
    noise_pct: 15,
    seed: 1,
};
/// service="lat-shift", track="canary": as stable but 40 % slower: mean 70 ms (true p99 0.322 s).
/// Per-minute `histogram_quantile(0.99, sum by (le) (rate(...[1m])))` over the 30 m before base
/// (31 samples per side): medians 0.344 s (canary) and 0.236 s (stable), ratio ≈ 1.46 (the
/// quantile interpolates linearly inside buckets, so not exactly 1.4).
pub const LAT_SHIFT_CANARY: Latency = Latency {
    service: "lat-shift",
    track: "canary",
    mean_ms: 70,
    seed: 2,
    ..LAT_SHIFT_STABLE
};
/// service="lat-same", track="stable": same distribution as lat-shift's stable side (seed 3).
pub const LAT_SAME_STABLE: Latency = Latency {
    service: "lat-same",
    seed: 3,
    ..LAT_SHIFT_STABLE
};
/// service="lat-same", track="canary": the same distribution as its stable side, other jitter
/// (seed 4). Per-minute p99 medians over the 30 m before base: 0.238 s (canary) and 0.240 s
/// (stable), ratio ≈ 0.99.
pub const LAT_SAME_CANARY: Latency = Latency {
    service: "lat-same",
    track: "canary",
    seed: 4,
    ..LAT_SHIFT_STABLE
};

/// Every latency scenario of the standard data set.
pub const LATENCY: &[Latency] = &[
    LAT_SHIFT_STABLE,
    LAT_SHIFT_CANARY,
    LAT_SAME_STABLE,
    LAT_SAME_CANARY,
];

// ---------------------------------------------------------------------------------------------
// Overflow and special values
// ---------------------------------------------------------------------------------------------

/// service="overflow", track="canary": `http_request_duration_seconds` with Prometheus' default
/// buckets (`OVERFLOW_BUCKETS`, then `+Inf`), 20 req/s of which 5 % take longer than the largest
/// finite bucket (10 s). Cumulative share per bucket: `OVERFLOW_SHARES`.
///
/// Figures at base (any window): `histogram_quantile(0.5, ...)` = 0.0875;
/// `histogram_quantile(0.99, ...)` = 10: Prometheus returns the largest finite bound when the
/// quantile falls into the `+Inf` bucket (it never returns +Inf for a classic histogram).
/// The recorded-quantile gauge `http_request_duration_p99_seconds{service="overflow",
/// track="canary"}` holds `+Inf` — the value an overflowing p99 takes in a recording rule or a
/// native histogram — so ±Inf reaching the conditions can be tested.
pub const OVERFLOW_SERVICE: &str = "overflow";
/// Finite `le` bounds of the overflow histogram (Prometheus' default buckets).
pub const OVERFLOW_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Cumulative share of requests at or below each of `OVERFLOW_BUCKETS`.
pub const OVERFLOW_SHARES: &[f64] = &[0.0, 0.0, 0.05, 0.2, 0.6, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95];
/// `histogram_quantile(0.5, ...)` of the overflow histogram.
pub const OVERFLOW_P50: f64 = 0.0875;
/// `histogram_quantile(0.99, ...)` of the overflow histogram (the largest finite bound).
pub const OVERFLOW_P99: f64 = 10.0;
/// Gauge holding the overflow scenario's recorded p99: `+Inf`.
pub const P99_GAUGE: &str = "http_request_duration_p99_seconds";

fn write_overflow(ds: &mut Dataset, base: i64) {
    let per_step = 20.0 * STEP as f64;
    let buf = ds.family("http_request_duration_seconds", "histogram");
    let mut les: Vec<(String, f64)> = OVERFLOW_BUCKETS
        .iter()
        .zip(OVERFLOW_SHARES)
        .map(|(b, s)| (b.to_string(), *s))
        .collect();
    les.push(("+Inf".to_string(), 1.0));
    let steps: Vec<i64> = times(base, FROM, TO, STEP).collect();
    for (le, share) in &les {
        let labels = [
            ("service", OVERFLOW_SERVICE),
            ("track", "canary"),
            ("le", le.as_str()),
        ];
        for (i, t) in steps.iter().enumerate() {
            push_sample(
                buf,
                "http_request_duration_seconds_bucket",
                &labels,
                (per_step * share).round() * i as f64,
                *t,
            );
        }
    }
    let labels = [("service", OVERFLOW_SERVICE), ("track", "canary")];
    for (i, t) in steps.iter().enumerate() {
        push_sample(
            buf,
            "http_request_duration_seconds_count",
            &labels,
            per_step * i as f64,
            *t,
        );
    }
    // 95 % around 0.08 s, 5 % around 30 s.
    let sum_per_step = per_step * (0.95 * 0.08 + 0.05 * 30.0);
    for (i, t) in steps.iter().enumerate() {
        push_sample(
            buf,
            "http_request_duration_seconds_sum",
            &labels,
            sum_per_step * i as f64,
            *t,
        );
    }
    let buf = ds.family(P99_GAUGE, "gauge");
    for t in times(base, FROM, TO, 60) {
        push_sample(buf, P99_GAUGE, &labels, f64::INFINITY, t);
    }
}

/// Gauge `rollgate_test_value{case}` with special sample values, every 60 s over the whole span:
/// see `SPECIAL_CASES`.
pub const SPECIAL_METRIC: &str = "rollgate_test_value";
/// `case` label values of `SPECIAL_METRIC` and the value each series holds.
pub const SPECIAL_CASES: &[(&str, f64)] = &[
    ("pos_inf", f64::INFINITY),
    ("neg_inf", f64::NEG_INFINITY),
    ("nan", f64::NAN),
    ("zero", 0.0),
    ("one", 1.0),
];

fn write_special(ds: &mut Dataset, base: i64) {
    let buf = ds.family(SPECIAL_METRIC, "gauge");
    for (case, v) in SPECIAL_CASES {
        for t in times(base, FROM, TO, 60) {
            push_sample(buf, SPECIAL_METRIC, &[("case", case)], *v, t);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Fleet (kube-state-metrics)
// ---------------------------------------------------------------------------------------------

/// Which image a container runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// The image being replaced.
    Old,
    /// The image being rolled out (the expected version).
    New,
}

/// A container image: `repo:tag`, and the digest the node resolved it to.
#[derive(Clone, Copy, Debug)]
pub struct Image {
    /// Repository, e.g. `docker.io/acme/node-agent`.
    pub repo: &'static str,
    /// Tag, e.g. `1.5.0`.
    pub tag: &'static str,
    /// 64 hex digits of the sha256 digest.
    pub digest: &'static str,
}

impl Image {
    /// `image` / `image_spec` label value: `repo:tag`.
    pub fn image(&self) -> String {
        format!("{}:{}", self.repo, self.tag)
    }

    /// `image_id` label value: `repo@sha256:<digest>`.
    pub fn image_id(&self) -> String {
        format!("{}@sha256:{}", self.repo, self.digest)
    }
}

/// node-agent 1.4.2, the old version of the standard fleet.
pub const NODE_AGENT_OLD: Image = Image {
    repo: "docker.io/acme/node-agent",
    tag: "1.4.2",
    digest: "513e5258ccf337657a74bcf99c6689575996caa51a1c92392ca920cc72be477a",
};
/// node-agent 1.5.0, the new (expected) version of the standard fleet.
pub const NODE_AGENT_NEW: Image = Image {
    repo: "docker.io/acme/node-agent",
    tag: "1.5.0",
    digest: "35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814",
};
/// log-shipper 2.0.1, the old version of the clean fleet (no container runs it).
pub const LOG_SHIPPER_OLD: Image = Image {
    repo: "docker.io/acme/log-shipper",
    tag: "2.0.1",
    digest: "6d5c14f55fdfc176e46afadfed7af2fcb835f405d1d856f82adb8c77078d0a2f",
};
/// log-shipper 2.1.0, the version every clean-fleet container runs.
pub const LOG_SHIPPER_NEW: Image = Image {
    repo: "docker.io/acme/log-shipper",
    tag: "2.1.0",
    digest: "9375e83c1d07ce0547026065177309cddcaf29df2b84b913ef5278587b3b41e4",
};

/// Parameters of a generated fleet of clusters running one DaemonSet, as kube-state-metrics
/// reports it (every series carries a `cluster` label). Indices refer to inventory clusters
/// `0..clusters`, named `prefix` + the index zero-padded to `width` digits.
///
/// Series written (value 1 unless said):
/// - `kube_pod_container_info{cluster,namespace,pod,container,image,image_id,image_spec}` per pod;
/// - `kube_pod_init_container_info{...same...}` per pod when `init_container` is set;
/// - `kube_daemonset_status_desired_number_scheduled` / `_updated_number_scheduled` /
///   `_number_ready{cluster,namespace,daemonset}`;
/// - with `deployment`: `kube_deployment_spec_replicas` (2), `kube_deployment_status_replicas_updated`,
///   `kube_deployment_metadata_generation`, `kube_deployment_status_observed_generation`;
/// - with `statefulset`: `kube_statefulset_status_current_revision` /
///   `kube_statefulset_status_update_revision{cluster,namespace,statefulset,revision}`,
///   `kube_statefulset_replicas` (3) and `kube_statefulset_status_replicas_updated`
///   `{cluster,namespace,statefulset}` (kube-state-metrics v2 `internal/store/statefulset.go`).
///
/// Reporting clusters are sampled every `step` from `from` to `to` (relative to base). Silent
/// clusters report for one hour, ending `silent_for` seconds before base, on the old version.
#[derive(Clone, Debug)]
pub struct FleetParams {
    /// Number of inventory clusters.
    pub clusters: usize,
    /// Cluster name prefix (`edge-`).
    pub prefix: String,
    /// Digits of the zero-padded cluster index.
    pub width: usize,
    /// `namespace` label.
    pub namespace: String,
    /// Main container name (also the DaemonSet and pod-name prefix).
    pub container: String,
    /// Init container name; None: no `kube_pod_init_container_info` series.
    pub init_container: Option<String>,
    /// Deployment name; None: no deployment series.
    pub deployment: Option<String>,
    /// StatefulSet name; None: no statefulset series.
    pub statefulset: Option<String>,
    /// The image being replaced.
    pub old: Image,
    /// The image being rolled out.
    pub new: Image,
    /// Pods of the DaemonSet per cluster.
    pub pods: usize,
    /// (cluster index, number of pods still on the old image).
    pub stragglers: Vec<(usize, usize)>,
    /// Clusters that stopped reporting `silent_for` seconds before base.
    pub silent: Vec<usize>,
    /// How long the silent clusters have been silent, in seconds.
    pub silent_for: i64,
    /// A cluster whose DaemonSet is stalled: desired `pods`, updated 1, ready `pods - 1`; its
    /// pod 0 runs the new image and the others the old one (so it is a straggler too).
    pub stalled_daemonset: Option<usize>,
    /// A cluster whose Deployment is stalled: spec 2, updated 1, generation 7, observed 6.
    pub stalled_deployment: Option<usize>,
    /// A cluster whose StatefulSet is stalled: current revision != update revision and
    /// 1 of 3 replicas updated.
    pub stalled_statefulset: Option<usize>,
    /// A cluster whose StatefulSet has `updateStrategy: OnDelete` and is done: its current
    /// revision never advances (kubernetes#73492), but all 3 replicas are updated. Not stalled.
    pub ondelete_statefulset: Option<usize>,
    /// Reporting clusters outside the inventory, with the version all their pods run.
    pub unexpected: Vec<(String, Version)>,
    /// A cluster whose pod 0 has its init container on the old image (main containers new).
    pub init_old: Option<usize>,
    /// A cluster whose pod 0's main-container series has no `image_id` label (the other labels
    /// name the new image).
    pub missing_version: Option<usize>,
    /// First sample of reporting clusters, seconds relative to base.
    pub from: i64,
    /// Last sample of reporting clusters, seconds relative to base.
    pub to: i64,
    /// Sample step, seconds (at most 300: Prometheus' 5 m lookback always finds a sample).
    pub step: i64,
    /// Also write `kube_pod_status_phase{cluster,namespace,pod,phase}` for every pod, as
    /// kube-state-metrics does (five series, Running 1, the others 0); off in the standard
    /// fleet, whose pods thereby have no phase data.
    pub phases: bool,
}

/// A straggler: a reporting cluster with containers on the old image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Straggler {
    /// Cluster name.
    pub cluster: String,
    /// Pods whose main container runs the old image.
    pub old_pods: usize,
    /// Pods of the DaemonSet in the cluster.
    pub pods: usize,
}

/// A stalled workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Cluster name.
    pub cluster: String,
    /// Namespace.
    pub namespace: String,
    /// `DaemonSet`, `Deployment` or `StatefulSet`.
    pub kind: &'static str,
    /// Workload name.
    pub name: String,
}

/// What a generated fleet looks like at base: the exact sets tests assert against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetExpect {
    /// Every inventory cluster name, in order.
    pub inventory: Vec<String>,
    /// Inventory clusters reporting with every main container on the new image (init containers
    /// not considered; the `missing_version` cluster is not included).
    pub current: Vec<String>,
    /// Reporting inventory clusters with main containers on the old image.
    pub stragglers: Vec<Straggler>,
    /// Clusters in `current` whose init containers include the old image: stragglers only when
    /// init containers are included.
    pub init_stragglers: Vec<String>,
    /// Inventory clusters with no sample within the last `silent_for` (absent at base).
    pub silent: Vec<String>,
    /// Reporting clusters outside the inventory and their version.
    pub unexpected: Vec<(String, Version)>,
    /// (cluster, pod) whose main-container series lacks the version label `image_id`; its
    /// cluster is in neither `current` nor `stragglers` (the engine decides).
    pub missing_version: Vec<(String, String)>,
    /// Stalled workloads (DaemonSets first, then Deployments, then StatefulSets).
    pub stalled: Vec<Workload>,
    /// Main-container series at base with `image_id` of the new image.
    pub pods_new: usize,
    /// Main-container series at base with `image_id` of the old image.
    pub pods_old: usize,
    /// Main-container series at base without `image_id`.
    pub pods_unlabelled: usize,
    /// Init-container series at base on the new image.
    pub init_new: usize,
    /// Init-container series at base on the old image.
    pub init_old: usize,
}

impl FleetExpect {
    /// Names of the inventory stragglers; with `include_init`, also the init-only stragglers.
    pub fn straggler_names(&self, include_init: bool) -> Vec<String> {
        let mut v: Vec<String> = self.stragglers.iter().map(|s| s.cluster.clone()).collect();
        if include_init {
            v.extend(self.init_stragglers.iter().cloned());
        }
        v.sort();
        v
    }

    /// Current clusters; with `include_init`, without the init-only stragglers.
    pub fn current_names(&self, include_init: bool) -> Vec<String> {
        self.current
            .iter()
            .filter(|c| !include_init || !self.init_stragglers.contains(c))
            .cloned()
            .collect()
    }
}

/// The standard fleet: 400 clusters `edge-000`..`edge-399`, node-agent DaemonSet with 3 pods per
/// cluster in namespace `monitoring` (init container `node-agent-init`, Deployment
/// `agent-gateway`, StatefulSet `agent-store`), rolling 1.4.2 → 1.5.0 (`NODE_AGENT_*`):
/// - 12 stragglers: edge-017 (3 old pods), edge-042 (1), edge-073 (2), edge-101 (3),
///   edge-138 (1), edge-166 (2), edge-203 (2, its DaemonSet stalled: desired 3, updated 1,
///   ready 2), edge-241 (3), edge-277 (1), edge-305 (2), edge-342 (3), edge-389 (1);
/// - silent for 2 h: edge-058, edge-311 (last seen on the old image);
/// - stalled workloads: DaemonSet node-agent in edge-203, Deployment agent-gateway in edge-150
///   (spec 2, updated 1, generation 7 vs observed 6), StatefulSet agent-store in edge-330
///   (revisions differ, 1 of 3 replicas updated);
/// - not stalled: StatefulSet agent-store in edge-331, `OnDelete`, revisions differ but all 3
///   replicas updated (the kubernetes-mixin's KubeStatefulSetUpdateNotRolledOut does not fire);
/// - outside the inventory: edge-lab-01, 3 pods on the old image;
/// - init container on the old image: edge-120 pod 0 (its main containers are new);
/// - no `image_id` label: edge-250 pod 0.
///
/// So at base: 385 current (384 with init containers), 12 stragglers (24 old pods) + 3 old pods
/// in edge-lab-01 = 27 old series, 1 unlabelled, 1169 new; init containers: 1171 new, 28 old. Data every 4 m from base-3h to base+1h.
pub fn standard_fleet() -> FleetParams {
    FleetParams {
        clusters: 400,
        prefix: "edge-".into(),
        width: 3,
        namespace: "monitoring".into(),
        container: "node-agent".into(),
        init_container: Some("node-agent-init".into()),
        deployment: Some("agent-gateway".into()),
        statefulset: Some("agent-store".into()),
        old: NODE_AGENT_OLD,
        new: NODE_AGENT_NEW,
        pods: 3,
        stragglers: vec![
            (17, 3),
            (42, 1),
            (73, 2),
            (101, 3),
            (138, 1),
            (166, 2),
            (241, 3),
            (277, 1),
            (305, 2),
            (342, 3),
            (389, 1),
        ],
        silent: vec![58, 311],
        silent_for: 2 * 3600,
        stalled_daemonset: Some(203),
        stalled_deployment: Some(150),
        stalled_statefulset: Some(330),
        ondelete_statefulset: Some(331),
        unexpected: vec![("edge-lab-01".into(), Version::Old)],
        init_old: Some(120),
        missing_version: Some(250),
        from: FROM,
        to: TO,
        step: 240,
        phases: false,
    }
}

/// A clean fleet next to the standard one: 400 clusters `edge-000`..`edge-399`, DaemonSet
/// `log-shipper` (container `log-shipper`, 3 pods each) in namespace `logging`, every pod on
/// log-shipper 2.1.0 (`LOG_SHIPPER_NEW`), nothing stalled, silent or unexpected: 1200 new
/// series, a fleet gate over it passes. Data every 4 m from base-3h to base+1h.
pub fn clean_fleet() -> FleetParams {
    FleetParams {
        clusters: 400,
        prefix: "edge-".into(),
        width: 3,
        namespace: "logging".into(),
        container: "log-shipper".into(),
        init_container: None,
        deployment: None,
        statefulset: None,
        old: LOG_SHIPPER_OLD,
        new: LOG_SHIPPER_NEW,
        pods: 3,
        stragglers: vec![],
        silent: vec![],
        silent_for: 2 * 3600,
        stalled_daemonset: None,
        stalled_deployment: None,
        stalled_statefulset: None,
        ondelete_statefulset: None,
        unexpected: vec![],
        init_old: None,
        missing_version: None,
        from: FROM,
        to: TO,
        step: 240,
        phases: false,
    }
}

/// The seed scenario: 400 clusters in namespace `edge-system`, 12 came back from being offline
/// pinned to the old version, 2 stopped reporting; sampled every minute up to `base`.
pub fn seed_fleet() -> FleetParams {
    FleetParams {
        namespace: "edge-system".into(),
        init_container: None,
        deployment: None,
        statefulset: None,
        stragglers: [7, 31, 64, 99, 123, 150, 188, 222, 256, 301, 333, 377]
            .iter()
            .map(|c| (*c, 1 + c % 3))
            .collect(),
        silent: vec![5, 250],
        stalled_daemonset: None,
        stalled_deployment: None,
        stalled_statefulset: None,
        unexpected: vec![],
        init_old: None,
        missing_version: None,
        from: -3 * 3600,
        to: 0,
        step: 60,
        ..standard_fleet()
    }
}

/// `seed_fleet()` written twice into one data set: before convergence (up to `base`) and after
/// (from `base + 10m`, stragglers updated, the silent clusters back, up to
/// `base + converged_after + 1h`); query the second at `base + converged_after`.
pub fn seed_dataset(base: i64, converged_after: i64) -> String {
    let before = seed_fleet();
    let after = FleetParams {
        stragglers: vec![],
        silent: vec![],
        from: 600 - converged_after,
        to: 3600,
        ..before.clone()
    };
    let mut ds = Dataset::new();
    before.write(&mut ds, base);
    after.write(&mut ds, base + converged_after);
    ds.finish()
}

/// A large fleet for benchmarks: `clusters` clusters `edge-00000`.. of `pods` node-agent pods
/// (10,000 x 30 = 300k pod series), a straggler every 97th cluster (index 13 mod 97, with
/// `1 + index % pods` old pods), a silent cluster every 1009th (index 500 mod 1009), one stalled
/// DaemonSet/Deployment/StatefulSet, one unexpected cluster, one missing version label; no init
/// containers. To keep backfill fast the data is sparse: every 5 m from base-5m to base+20m, so
/// instant queries find it until base+25m.
pub fn big_fleet(clusters: usize, pods: usize) -> FleetParams {
    let stragglers: Vec<(usize, usize)> = (0..clusters)
        .filter(|c| c % 97 == 13)
        .map(|c| (c, 1 + c % pods.max(1)))
        .collect();
    let silent: Vec<usize> = (0..clusters).filter(|c| c % 1009 == 500).collect();
    // Clusters with no other role, for the single special cases.
    let mut free = (0..clusters).filter(|c| c % 97 != 13 && c % 1009 != 500);
    let mut next = |skip: usize| free.nth(skip);
    FleetParams {
        clusters,
        prefix: "edge-".into(),
        width: 5,
        pods,
        stragglers,
        silent,
        init_container: None,
        init_old: None,
        stalled_daemonset: next(clusters / 10),
        stalled_deployment: next(clusters / 10),
        stalled_statefulset: next(clusters / 10),
        ondelete_statefulset: None,
        missing_version: next(clusters / 10),
        unexpected: vec![("edge-lab-01".into(), Version::Old)],
        from: -300,
        to: 1200,
        step: 300,
        ..standard_fleet()
    }
}

/// The fleet alone as OpenMetrics text (for the big benchmark fleet).
pub fn fleet_dataset(p: &FleetParams, base: i64) -> String {
    let mut ds = Dataset::new();
    p.write(&mut ds, base);
    ds.finish()
}

/// One cluster as the generator sees it.
struct ClusterPlan {
    name: String,
    silent: bool,
    /// Main-container version per pod.
    pods: Vec<Version>,
    /// Init-container version per pod.
    init: Vec<Version>,
    /// Index of a pod without `image_id`.
    unlabelled: Option<usize>,
    stalled_ds: bool,
    stalled_deploy: bool,
    stalled_sts: bool,
    ondelete_sts: bool,
}

impl FleetParams {
    /// Name of inventory cluster `i`.
    pub fn cluster_name(&self, i: usize) -> String {
        format!("{}{:0w$}", self.prefix, i, w = self.width)
    }

    /// Name of pod `p` of the DaemonSet in cluster `cluster` (deterministic 5-character suffix).
    pub fn pod_name(&self, cluster: &str, p: usize) -> String {
        let mut h = mix(p as u64 ^ 0x5bd1_e995);
        for b in cluster.bytes().chain(self.container.bytes()) {
            h = mix(h ^ b as u64);
        }
        let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
        let suffix: String = (0..5)
            .map(|i| alphabet[((h >> (i * 8)) % alphabet.len() as u64) as usize] as char)
            .collect();
        format!("{}-{}", self.container, suffix)
    }

    fn check(&self) {
        let mut special: Vec<usize> = self.stragglers.iter().map(|s| s.0).collect();
        special.extend(&self.silent);
        special.extend(self.stalled_daemonset);
        special.extend(self.init_old);
        special.extend(self.missing_version);
        let n = special.len();
        special.sort_unstable();
        special.dedup();
        assert_eq!(n, special.len(), "fleet: a cluster has two roles");
        assert!(special.iter().all(|c| *c < self.clusters));
        assert!(self.step > 0 && self.step <= 300 && self.pods > 0);
        for c in [
            self.stalled_deployment,
            self.stalled_statefulset,
            self.ondelete_statefulset,
        ]
        .into_iter()
        .flatten()
        {
            assert!(c < self.clusters && !self.silent.contains(&c));
        }
    }

    fn plans(&self) -> Vec<ClusterPlan> {
        self.check();
        let mut out = Vec::with_capacity(self.clusters + self.unexpected.len());
        for i in 0..self.clusters {
            let silent = self.silent.contains(&i);
            let mut pods = vec![Version::New; self.pods];
            if silent {
                pods = vec![Version::Old; self.pods];
            } else if let Some(&(_, n)) = self.stragglers.iter().find(|s| s.0 == i) {
                for p in pods.iter_mut().take(n) {
                    *p = Version::Old;
                }
            } else if self.stalled_daemonset == Some(i) {
                for p in pods.iter_mut().skip(1) {
                    *p = Version::Old;
                }
            }
            let mut init = pods.clone();
            if self.init_old == Some(i) {
                init[0] = Version::Old;
            }
            out.push(ClusterPlan {
                name: self.cluster_name(i),
                silent,
                pods,
                init,
                unlabelled: (self.missing_version == Some(i)).then_some(0),
                stalled_ds: self.stalled_daemonset == Some(i),
                stalled_deploy: self.stalled_deployment == Some(i),
                stalled_sts: self.stalled_statefulset == Some(i),
                ondelete_sts: self.ondelete_statefulset == Some(i),
            });
        }
        for (name, v) in &self.unexpected {
            out.push(ClusterPlan {
                name: name.clone(),
                silent: false,
                pods: vec![*v; self.pods],
                init: vec![*v; self.pods],
                unlabelled: None,
                stalled_ds: false,
                stalled_deploy: false,
                stalled_sts: false,
                ondelete_sts: false,
            });
        }
        out
    }

    /// The exact sets and counts this fleet shows at base.
    pub fn expect(&self) -> FleetExpect {
        let plans = self.plans();
        let mut e = FleetExpect {
            inventory: (0..self.clusters).map(|i| self.cluster_name(i)).collect(),
            current: vec![],
            stragglers: vec![],
            init_stragglers: vec![],
            silent: vec![],
            unexpected: self.unexpected.clone(),
            missing_version: vec![],
            stalled: vec![],
            pods_new: 0,
            pods_old: 0,
            pods_unlabelled: 0,
            init_new: 0,
            init_old: 0,
        };
        let mut deploys = vec![];
        let mut sts = vec![];
        for (i, c) in plans.iter().enumerate() {
            let inventory = i < self.clusters;
            if c.silent {
                e.silent.push(c.name.clone());
                continue;
            }
            let old = c.pods.iter().filter(|v| **v == Version::Old).count();
            for (p, v) in c.pods.iter().enumerate() {
                if c.unlabelled == Some(p) {
                    e.pods_unlabelled += 1;
                } else if *v == Version::Old {
                    e.pods_old += 1;
                } else {
                    e.pods_new += 1;
                }
            }
            if self.init_container.is_some() {
                for v in &c.init {
                    match v {
                        Version::Old => e.init_old += 1,
                        Version::New => e.init_new += 1,
                    }
                }
            }
            if let Some(p) = c.unlabelled {
                e.missing_version
                    .push((c.name.clone(), self.pod_name(&c.name, p)));
            }
            if inventory {
                if old > 0 {
                    e.stragglers.push(Straggler {
                        cluster: c.name.clone(),
                        old_pods: old,
                        pods: self.pods,
                    });
                } else if c.unlabelled.is_none() {
                    e.current.push(c.name.clone());
                    if c.init.contains(&Version::Old) {
                        e.init_stragglers.push(c.name.clone());
                    }
                }
            }
            let workload = |kind, name: &str| Workload {
                cluster: c.name.clone(),
                namespace: self.namespace.clone(),
                kind,
                name: name.to_string(),
            };
            if c.stalled_ds {
                e.stalled.push(workload("DaemonSet", &self.container));
            }
            if let (true, Some(d)) = (c.stalled_deploy, &self.deployment) {
                deploys.push(workload("Deployment", d));
            }
            if let (true, Some(s)) = (c.stalled_sts, &self.statefulset) {
                sts.push(workload("StatefulSet", s));
            }
        }
        e.stalled.extend(deploys);
        e.stalled.extend(sts);
        e
    }

    /// Writes the fleet's series into `ds` for data based at `base`.
    pub fn write(&self, ds: &mut Dataset, base: i64) {
        let plans = self.plans();
        let live: Vec<i64> = times(base, self.from, self.to, self.step).collect();
        let silent_to = -self.silent_for;
        let gone: Vec<i64> = times(base, silent_to - 3600, silent_to, self.step).collect();
        let ts = |c: &ClusterPlan| if c.silent { &gone } else { &live };
        let ns = self.namespace.as_str();
        let (old_image, new_image) = (self.old.image(), self.new.image());
        let (old_id, new_id) = (self.old.image_id(), self.new.image_id());
        let pick = |v: Version| match v {
            Version::Old => (old_image.as_str(), old_id.as_str()),
            Version::New => (new_image.as_str(), new_id.as_str()),
        };
        let init_name = self.init_container.clone().unwrap_or_default();
        let mut families = vec![("kube_pod_container_info", self.container.as_str(), false)];
        if self.init_container.is_some() {
            families.push(("kube_pod_init_container_info", init_name.as_str(), true));
        }
        if self.phases {
            let buf = ds.family("kube_pod_status_phase", "gauge");
            for c in &plans {
                for p in 0..c.pods.len() {
                    let pod = self.pod_name(&c.name, p);
                    for phase in ["Pending", "Succeeded", "Failed", "Unknown", "Running"] {
                        let labels = [
                            ("cluster", c.name.as_str()),
                            ("namespace", ns),
                            ("pod", pod.as_str()),
                            ("phase", phase),
                        ];
                        let v = if phase == "Running" { 1.0 } else { 0.0 };
                        for t in ts(c) {
                            push_sample(buf, "kube_pod_status_phase", &labels, v, *t);
                        }
                    }
                }
            }
        }
        for (family, container, init) in families {
            let buf = ds.family(family, "gauge");
            for c in &plans {
                let versions = if init { &c.init } else { &c.pods };
                for (p, v) in versions.iter().enumerate() {
                    let pod = self.pod_name(&c.name, p);
                    let (image, id) = pick(*v);
                    let mut labels = vec![
                        ("cluster", c.name.as_str()),
                        ("namespace", ns),
                        ("pod", pod.as_str()),
                        ("container", container),
                        ("image", image),
                        ("image_id", id),
                        ("image_spec", image),
                    ];
                    if !init && c.unlabelled == Some(p) {
                        labels.retain(|l| l.0 != "image_id");
                    }
                    for t in ts(c) {
                        push_sample(buf, family, &labels, 1.0, *t);
                    }
                }
            }
        }
        let n = self.pods as f64;
        // (metric, value when stalled, value otherwise)
        let daemonset = [
            ("kube_daemonset_status_desired_number_scheduled", n, n),
            ("kube_daemonset_status_updated_number_scheduled", 1.0, n),
            ("kube_daemonset_status_number_ready", n - 1.0, n),
        ];
        for (name, stalled, normal) in daemonset {
            let buf = ds.family(name, "gauge");
            for c in &plans {
                let labels = [
                    ("cluster", c.name.as_str()),
                    ("namespace", ns),
                    ("daemonset", self.container.as_str()),
                ];
                let v = if c.stalled_ds { stalled } else { normal };
                for t in ts(c) {
                    push_sample(buf, name, &labels, v, *t);
                }
            }
        }
        if let Some(d) = &self.deployment {
            let deployment = [
                ("kube_deployment_spec_replicas", 2.0, 2.0),
                ("kube_deployment_status_replicas_updated", 1.0, 2.0),
                ("kube_deployment_metadata_generation", 7.0, 7.0),
                ("kube_deployment_status_observed_generation", 6.0, 7.0),
            ];
            for (name, stalled, normal) in deployment {
                let buf = ds.family(name, "gauge");
                for c in &plans {
                    let labels = [
                        ("cluster", c.name.as_str()),
                        ("namespace", ns),
                        ("deployment", d.as_str()),
                    ];
                    let v = if c.stalled_deploy { stalled } else { normal };
                    for t in ts(c) {
                        push_sample(buf, name, &labels, v, *t);
                    }
                }
            }
        }
        if let Some(s) = &self.statefulset {
            let (old_rev, new_rev) = (format!("{s}-7d9f6c5b8"), format!("{s}-5c8b9f7d6"));
            for (name, update) in [
                ("kube_statefulset_status_current_revision", false),
                ("kube_statefulset_status_update_revision", true),
            ] {
                let buf = ds.family(name, "gauge");
                for c in &plans {
                    let behind = c.stalled_sts || c.ondelete_sts;
                    let rev = if update || !behind {
                        &new_rev
                    } else {
                        &old_rev
                    };
                    let labels = [
                        ("cluster", c.name.as_str()),
                        ("namespace", ns),
                        ("statefulset", s.as_str()),
                        ("revision", rev.as_str()),
                    ];
                    for t in ts(c) {
                        push_sample(buf, name, &labels, 1.0, *t);
                    }
                }
            }
            // (metric, value when stalled, value otherwise)
            let replicas = [
                ("kube_statefulset_replicas", 3.0, 3.0),
                ("kube_statefulset_status_replicas_updated", 1.0, 3.0),
            ];
            for (name, stalled, normal) in replicas {
                let buf = ds.family(name, "gauge");
                for c in &plans {
                    let labels = [
                        ("cluster", c.name.as_str()),
                        ("namespace", ns),
                        ("statefulset", s.as_str()),
                    ];
                    let v = if c.stalled_sts { stalled } else { normal };
                    for t in ts(c) {
                        push_sample(buf, name, &labels, v, *t);
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The standard data set
// ---------------------------------------------------------------------------------------------

/// Every standard scenario as one OpenMetrics text based at `base`: `TRAFFIC`, `LATENCY`, the
/// overflow histogram, `SPECIAL_METRIC`, `standard_fleet()` and `clean_fleet()`.
pub fn standard_dataset(base: i64) -> String {
    let mut ds = Dataset::new();
    for t in TRAFFIC {
        t.write(&mut ds, base);
    }
    for l in LATENCY {
        l.write(&mut ds, base);
    }
    write_overflow(&mut ds, base);
    write_special(&mut ds, base);
    standard_fleet().write(&mut ds, base);
    clean_fleet().write(&mut ds, base);
    ds.finish()
}

// ---------------------------------------------------------------------------------------------
// Other backends
// ---------------------------------------------------------------------------------------------

/// The same samples as `openmetrics` (the output of `Dataset::finish`) in the Prometheus text
/// format that VictoriaMetrics' `/api/v1/import/prometheus` takes: comments (`# TYPE`, `# EOF`)
/// dropped and timestamps in integer milliseconds instead of seconds.
pub fn to_prometheus_import(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len() + openmetrics.len() / 8);
    for line in openmetrics.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // `push_sample` ends every line with " <seconds>"; label values may hold spaces.
        let (sample, ts) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no timestamp on line {line:?}"));
        let secs: i64 = ts
            .parse()
            .unwrap_or_else(|_| panic!("timestamp {ts:?} is not whole seconds"));
        let _ = writeln!(out, "{sample} {}", secs * 1000);
    }
    out
}
