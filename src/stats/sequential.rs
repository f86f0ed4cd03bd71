//! Error spending across the repeated checks of one run.
//!
//! A metric measured every minute is tested again and again on growing (or sliding) windows. If
//! every check used the full error level `alpha = 1 - confidence`, a healthy canary would be failed
//! far more often than `alpha` over the run. Each check instead gets its own slice `alpha_k` of the
//! budget, with `sum_k alpha_k <= alpha`; by the union bound the probability that *any* check
//! fails a canary that is within tolerance is then at most `alpha`, whatever the correlation
//! between checks (cumulative counts, sliding windows, overlapping samples alike). The caller
//! only passes the check's index and, when known, the planned count: no state is kept.
//!
//! - Planned count `N` known (Argo's `count`): cumulative spend `alpha * (k / N)^2` (union
//!   bound) or `alpha * (k / N)^3` (group-sequential boundaries). Either keeps most of the
//!   budget for the later checks, which see the most data, while an early check can still fail
//!   a canary that is plainly broken.
//! - Planned count unknown (an open-ended run): cumulative spend `alpha * (1 - 1/sqrt(k + 1))`,
//!   which never exceeds `alpha` however many checks follow.

use serde::Serialize;

use super::error::StatsError;
use super::group_sequential::{cached_levels, MAX_LOOKS};

/// Which check of a run this is: the 1-based `index`, when known the `planned` count, and how
/// the checks' windows relate (which decides how the budget can be spent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Look {
    /// 1-based index of this check within the run.
    pub index: u32,
    /// Number of checks the run will make, when known (Argo's `count`).
    pub planned: Option<u32>,
    /// How this check's level is derived from the budget.
    pub design: Design,
}

/// How the error budget is spent across the checks of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Design {
    /// Each check's level is its slice of the budget; the union bound holds for any windows
    /// (sliding, overlapping, cumulative) but wastes most of the budget on correlated checks.
    #[default]
    UnionBound,
    /// Group-sequential boundaries for checks on cumulative data (each window starts at the
    /// run's start): the levels account for the correlation `sqrt(j/k)` of the looks, so the
    /// crossing probabilities add up to the whole budget.
    GroupSequential,
}

impl Look {
    /// A one-off check (a dry run): the whole error budget goes to it.
    pub fn single() -> Look {
        Look {
            index: 1,
            planned: Some(1),
            design: Design::UnionBound,
        }
    }

    /// Check `index` of a run of `planned` checks.
    pub fn of(index: u32, planned: u32) -> Look {
        Look {
            index,
            planned: Some(planned),
            design: Design::UnionBound,
        }
    }

    /// Check `index` of a run whose length is not known.
    pub fn open_ended(index: u32) -> Look {
        Look {
            index,
            planned: None,
            design: Design::UnionBound,
        }
    }

    /// The same check, with levels from `design`.
    pub fn with_design(self, design: Design) -> Look {
        Look { design, ..self }
    }

    fn validate(self) -> Result<(), StatsError> {
        if self.index == 0 {
            return Err(StatsError::LookIndexZero);
        }
        match self.planned {
            Some(0) => Err(StatsError::PlannedZero),
            Some(planned) if self.index > planned => Err(StatsError::LookBeyondPlan {
                index: self.index,
                planned,
            }),
            _ => Ok(()),
        }
    }
}

/// The error level spent by checks `1..=index` together, out of `alpha`.
pub fn spent_alpha(alpha: f64, look: Look) -> Result<f64, StatsError> {
    look.validate()?;
    Ok(cumulative(alpha, look.index, look.planned, look.design))
}

/// The error level of this one check, for a p-value to be compared with: under the union
/// bound the slice `spent(index) - spent(index - 1)`; under group-sequential boundaries the
/// nominal level at which the check's crossing probability (given no earlier crossing) is that
/// slice, which is larger because cumulative looks are correlated.
pub fn look_alpha(alpha: f64, look: Look) -> Result<f64, StatsError> {
    look.validate()?;
    let slice = |k: u32| {
        (cumulative(alpha, k, look.planned, look.design)
            - cumulative(alpha, k - 1, look.planned, look.design))
        .max(0.0)
    };
    let k = look.index as usize;
    if look.design == Design::GroupSequential && k <= MAX_LOOKS {
        let looks = look.planned.map_or(look.index, |n| {
            n.min(u32::try_from(MAX_LOOKS).unwrap_or(u32::MAX))
        });
        let key = (alpha.to_bits(), look.planned.unwrap_or(0), looks);
        let levels = cached_levels(key, || (1..=looks).map(slice).collect());
        if let Some(level) = levels.get(k - 1) {
            return Ok(*level);
        }
    }
    // Beyond the exactly computed looks the slice keeps the total within the budget: the
    // union bound holds for the rest whatever their correlation.
    Ok(slice(look.index))
}

fn cumulative(alpha: f64, index: u32, planned: Option<u32>, design: Design) -> f64 {
    if index == 0 {
        return 0.0;
    }
    let k = f64::from(index);
    match planned {
        Some(n) => {
            let t = (k / f64::from(n)).min(1.0);
            alpha * t.powi(spending_power(design))
        }
        None => alpha * (1.0 - 1.0 / (k + 1.0).sqrt()),
    }
}

/// The exponent `ρ` of the planned-count spending `alpha (k/N)^ρ`. Group-sequential
/// boundaries spend cubically: with the unconditional exact test every check uses its level
/// fully, so the quadratic spending let 5.02 % of identical canaries fail under zero tolerance
/// (and `ρ = 4` 5.27 %), while `ρ = 3` kept every healthy scenario within 4.9 % and moves more
/// of the budget to the last checks, which see the most data (docs/statistics.md).
fn spending_power(design: Design) -> i32 {
    match design {
        Design::UnionBound => 2,
        Design::GroupSequential => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planned_slices_add_up_to_alpha() {
        let total: f64 = (1..=10)
            .map(|k| look_alpha(0.05, Look::of(k, 10)).unwrap())
            .sum();
        assert!((total - 0.05).abs() < 1e-15);
        assert!((look_alpha(0.05, Look::of(1, 10)).unwrap() - 0.0005).abs() < 1e-15);
        assert!((look_alpha(0.05, Look::of(10, 10)).unwrap() - 0.0095).abs() < 1e-15);
        assert_eq!(look_alpha(0.05, Look::single()).unwrap(), 0.05);
    }

    #[test]
    fn open_ended_never_exceeds_alpha() {
        let total: f64 = (1..=100_000)
            .map(|k| look_alpha(0.05, Look::open_ended(k)).unwrap())
            .sum();
        assert!(total < 0.05 && total > 0.049);
        let first = look_alpha(0.05, Look::open_ended(1)).unwrap();
        assert!((first - 0.05 * (1.0 - 1.0 / 2f64.sqrt())).abs() < 1e-15);
    }

    #[test]
    fn group_sequential_levels_use_the_correlation() {
        let look = |k| Look::of(k, 10).with_design(Design::GroupSequential);
        let gs = |k| look_alpha(0.05, look(k));
        let ub = |k| look_alpha(0.05, Look::of(k, 10));
        // Group-sequential boundaries spend `α (k/N)^3`; each level is at least its own slice.
        let slice = |k: u32| {
            spent_alpha(0.05, look(k)).unwrap() - spent_alpha(0.05, look(k - 1)).unwrap_or(0.0)
        };
        assert!((spent_alpha(0.05, look(10)).unwrap() - 0.05).abs() < 1e-15);
        assert!((spent_alpha(0.05, look(1)).unwrap() - 0.05e-3).abs() < 1e-15);
        for k in 1..=10 {
            let g = gs(k).unwrap();
            assert!(g >= slice(k) - 1e-12 && g < 0.05, "look {k}: {g}");
        }
        // The first look has no earlier one to share with; the last gains the most.
        assert!((gs(1).unwrap() - slice(1)).abs() < 1e-9);
        assert!(gs(10).unwrap() > 2.0 * slice(10));
        assert!(gs(10).unwrap() > 3.0 * ub(10).unwrap());
        // Open-ended runs get boundaries too, and beyond the computed looks the slice.
        let open = |k| {
            look_alpha(
                0.05,
                Look::open_ended(k).with_design(Design::GroupSequential),
            )
        };
        assert!(open(5).unwrap() > look_alpha(0.05, Look::open_ended(5)).unwrap());
        assert_eq!(
            open(500).unwrap(),
            look_alpha(0.05, Look::open_ended(500)).unwrap()
        );
    }

    #[test]
    fn rejects_bad_looks() {
        assert_eq!(
            look_alpha(0.05, Look::of(0, 10)),
            Err(StatsError::LookIndexZero)
        );
        assert_eq!(
            look_alpha(0.05, Look::of(1, 0)),
            Err(StatsError::PlannedZero)
        );
        assert_eq!(
            look_alpha(0.05, Look::of(11, 10)),
            Err(StatsError::LookBeyondPlan {
                index: 11,
                planned: 10
            })
        );
    }
}
