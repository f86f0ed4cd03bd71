//! The promotion keys of a `fleet:` block: `cohorts`, `cohort`, `holdFor`,
//! `retention`, `completion`, `startedAt`, and `version.supported`. Validation only; what they
//! mean at measurement time is in `engine::fleet::promotion` and docs/fleet.md.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use regex::Regex;
use serde_json::Value;

use super::super::duration::format_duration;
use super::super::error::SpecError;
use super::super::reader::{invalid, ObjectReader};
use super::{name_list, ExpectedTargets, ExpectedVersion, VersionRegex};

/// Default `retention`: Prometheus' default `--storage.tsdb.retention.time`.
pub(crate) const DEFAULT_RETENTION: Duration = Duration::from_secs(15 * 24 * 3600);

/// One named cohort of `fleet.cohorts`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cohort {
    /// Its name (`cohort: <name>` promotes it).
    pub name: String,
    /// Which targets it holds.
    pub targets: CohortTargets,
    /// At most this many of its targets mid-change at once.
    pub max_concurrent: Option<u64>,
}

/// `targets: [...]` or `targetRegex: '...'` (a matcher on the `groupBy` label).
#[derive(Debug, Clone, PartialEq)]
pub enum CohortTargets {
    /// Named targets (sorted, without duplicates).
    List(Vec<String>),
    /// Every inventory target whose name the (anchored) regex matches.
    Regex(VersionRegex),
}

impl CohortTargets {
    /// Whether `target` belongs to the cohort (for a list: is listed).
    pub fn selects(&self, target: &str) -> bool {
        match self {
            CohortTargets::List(l) => l.binary_search_by(|t| t.as_str().cmp(target)).is_ok(),
            CohortTargets::Regex(r) => r.is_match(target),
        }
    }
}

/// One tier of `fleet.completion`: `share` of the inventory done within `within`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionTier {
    /// Share of expected targets (0 < share <= 1) on the expected version.
    pub share: f64,
    /// Deadline, from the rollout's start.
    pub within: Duration,
    /// `within` as written (`48h` stays `48h` in messages).
    pub within_text: String,
}

/// The promotion part of a fleet spec.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Promotion {
    /// Ordered cohorts (empty: none).
    pub cohorts: Vec<Cohort>,
    /// The cohort being promoted (index into `cohorts`); none with cohorts: all of them.
    pub cohort: Option<usize>,
    /// A target counts as current only when it has been so for this long.
    pub hold_for: Option<Duration>,
    /// `holdFor` as written, for messages.
    pub hold_for_text: Option<String>,
    /// How much history Prometheus keeps (a hint that bounds `holdFor`).
    pub retention: Duration,
    /// Completion SLO tiers, by deadline.
    pub completion: Vec<CompletionTier>,
    /// The rollout's start; none: found by a query (first sample of the expected version).
    pub started_at: Option<DateTime<Utc>>,
}

/// Reads the promotion keys of `f`, checked against the inventory where it is a list.
pub(crate) fn read_promotion(
    f: &mut ObjectReader<'_>,
    inventory: &ExpectedTargets,
) -> Result<Promotion, SpecError> {
    let cohorts = read_cohorts(f, inventory)?;
    let cohort_path = f.path_of("cohort");
    let cohort = match f.string("cohort")? {
        None => None,
        Some(name) if cohorts.is_empty() => {
            return Err(SpecError::Conflict {
                path: cohort_path,
                message: format!("names cohort {name:?}, but fleet.cohorts lists none"),
            })
        }
        Some(name) => {
            let name = name.trim().to_string();
            match cohorts.iter().position(|c| c.name == name) {
                Some(i) => Some(i),
                None => {
                    return Err(SpecError::Conflict {
                        path: cohort_path,
                        message: format!(
                            "{name:?} is not one of the cohorts ({})",
                            cohorts
                                .iter()
                                .map(|c| c.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    })
                }
            }
        }
    };
    let retention = f.duration("retention")?.unwrap_or(DEFAULT_RETENTION);
    let hold_for = f.duration("holdFor")?;
    let hold_for_text = hold_for.and(
        f.get("holdFor")
            .and_then(Value::as_str)
            .map(|t| t.trim().to_string()),
    );
    if let Some(h) = hold_for {
        if h < Duration::from_secs(60) {
            return Err(SpecError::Invalid {
                path: f.path_of("holdFor"),
                expected: "a duration of at least 1m".into(),
                got: format_duration(h),
            });
        }
        if h > retention {
            return Err(SpecError::Conflict {
                path: f.path_of("holdFor"),
                message: format!(
                    "{} is longer than the data retention ({}, fleet.retention): the window would reach past the oldest sample",
                    format_duration(h),
                    format_duration(retention)
                ),
            });
        }
    }
    let completion = read_tiers(f)?;
    let started_path = f.path_of("startedAt");
    let started_at = match f.get("startedAt") {
        None => None,
        // An unset `{{args.startedAt}}` (an empty default) means "find it by a query".
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) => Some(
            DateTime::parse_from_rfc3339(s.trim())
                .map_err(|_| {
                    invalid(
                        &started_path,
                        "an RFC 3339 time like 2026-12-01T08:00:00Z",
                        &Value::String(s.clone()),
                    )
                })?
                .with_timezone(&Utc),
        ),
        Some(other) => {
            return Err(invalid(
                &started_path,
                "an RFC 3339 time like 2026-12-01T08:00:00Z",
                other,
            ))
        }
    };
    Ok(Promotion {
        cohorts,
        cohort,
        hold_for,
        hold_for_text,
        retention,
        completion,
        started_at,
    })
}

fn read_cohorts(
    f: &mut ObjectReader<'_>,
    inventory: &ExpectedTargets,
) -> Result<Vec<Cohort>, SpecError> {
    let path = f.path_of("cohorts");
    let items = match f.get("cohorts") {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(other) => {
            return Err(invalid(
                &path,
                "a non-empty list of {name, targets | targetRegex, maxConcurrent}",
                other,
            ))
        }
    };
    let listed = match inventory {
        ExpectedTargets::List(l) => Some(l),
        _ => None,
    };
    let mut cohorts: Vec<Cohort> = Vec::with_capacity(items.len());
    // Target -> the cohort that took it, for the overlap check.
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let mut c = ObjectReader::new(&at, item)?;
        let name = c
            .required_string("name", "the cohort's name, as `cohort:` names it")?
            .trim()
            .to_string();
        if name.is_empty() {
            return Err(invalid(
                &c.path_of("name"),
                "a non-empty name",
                &Value::String(name),
            ));
        }
        if cohorts.iter().any(|o| o.name == name) {
            return Err(SpecError::Conflict {
                path: c.path_of("name"),
                message: format!("cohort {name:?} is named twice"),
            });
        }
        let list_path = c.path_of("targets");
        let regex_path = c.path_of("targetRegex");
        let targets = match (c.get("targets"), c.string("targetRegex")?) {
            (Some(_), Some(_)) => {
                return Err(SpecError::Conflict {
                    path: at.clone(),
                    message: "targets and targetRegex exclude each other".into(),
                })
            }
            (None, None) => {
                return Err(SpecError::Missing {
                    path: list_path,
                    hint: "the cohort's targets: a list of names, or targetRegex".into(),
                })
            }
            (Some(Value::Array(list)), None) if !list.is_empty() => {
                let names = name_list(&list_path, list, "a target name (a non-empty string)")?;
                if let Some(inv) = listed {
                    if let Some(bad) = names.iter().find(|t| inv.binary_search(t).is_err()) {
                        let k = list
                            .iter()
                            .position(|v| v.as_str().map(str::trim) == Some(bad))
                            .unwrap_or(0);
                        return Err(SpecError::Conflict {
                            path: format!("{list_path}[{k}]"),
                            message: format!("{bad} is not in fleet.expectedTargets"),
                        });
                    }
                }
                CohortTargets::List(names)
            }
            (Some(other), None) => {
                return Err(invalid(
                    &list_path,
                    "a non-empty list of target names",
                    other,
                ))
            }
            (None, Some(r)) => {
                let anchored =
                    Regex::new(&format!("^(?:{r})$")).map_err(|e| SpecError::Invalid {
                        path: regex_path.clone(),
                        expected: "a regular expression (RE2 syntax) on the target name".into(),
                        got: format!("{r:?} ({})", e.to_string().lines().last().unwrap_or("")),
                    })?;
                let regex = VersionRegex {
                    source: r.clone(),
                    anchored,
                };
                if let Some(inv) = listed {
                    if !inv.iter().any(|t| regex.is_match(t)) {
                        return Err(SpecError::Conflict {
                            path: regex_path,
                            message: format!(
                                "{r:?} matches none of the {} targets of fleet.expectedTargets",
                                inv.len()
                            ),
                        });
                    }
                }
                CohortTargets::Regex(regex)
            }
        };
        let max_concurrent = c.integer("maxConcurrent", 1, u32::MAX as u64)?;
        c.finish()?;
        // Overlaps: listed names always; regex cohorts over a listed inventory (over a query
        // inventory the engine checks the live one).
        let members: Vec<String> = match (&targets, listed) {
            (CohortTargets::List(l), _) => l.clone(),
            (CohortTargets::Regex(r), Some(inv)) => {
                inv.iter().filter(|t| r.is_match(t)).cloned().collect()
            }
            (CohortTargets::Regex(_), None) => Vec::new(),
        };
        for t in &members {
            let earlier = owner.get(t).cloned().or_else(|| {
                cohorts
                    .iter()
                    .find(|o| matches!(o.targets, CohortTargets::Regex(_)) && o.targets.selects(t))
                    .map(|o| o.name.clone())
            });
            if let Some(other) = earlier {
                return Err(SpecError::Conflict {
                    path: at,
                    message: format!(
                        "cohorts overlap: {t} is in cohort {other:?} and in cohort {name:?}"
                    ),
                });
            }
        }
        for t in members {
            owner.insert(t, name.clone());
        }
        cohorts.push(Cohort {
            name,
            targets,
            max_concurrent,
        });
    }
    Ok(cohorts)
}

fn read_tiers(f: &mut ObjectReader<'_>) -> Result<Vec<CompletionTier>, SpecError> {
    let path = f.path_of("completion");
    let items = match f.get("completion") {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(other) => return Err(invalid(&path, "a non-empty list of {share, within}", other)),
    };
    let mut tiers: Vec<CompletionTier> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut t = ObjectReader::new(&format!("{path}[{i}]"), item)?;
        let share_path = t.path_of("share");
        let share = match t.number("share", 0.0, 1.0)? {
            Some(s) if s > 0.0 => s,
            Some(s) => {
                return Err(invalid(
                    &share_path,
                    "a share above 0 and at most 1",
                    &serde_json::json!(s),
                ))
            }
            None => {
                return Err(SpecError::Missing {
                    path: share_path,
                    hint: "the share of the inventory done by the deadline (0.95)".into(),
                })
            }
        };
        let within_path = t.path_of("within");
        let within_text = t
            .get("within")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string();
        let Some(within) = t.duration("within")? else {
            return Err(SpecError::Missing {
                path: within_path,
                hint: "the deadline from the rollout's start (48h)".into(),
            });
        };
        t.finish()?;
        if let Some(prev) = tiers.last() {
            if within <= prev.within {
                return Err(SpecError::Conflict {
                    path: within_path,
                    message: format!(
                        "tiers must be in order of deadline: {} is not after {path}[{}].within ({})",
                        format_duration(within),
                        i - 1,
                        format_duration(prev.within)
                    ),
                });
            }
            if share < prev.share {
                return Err(SpecError::Conflict {
                    path: share_path,
                    message: format!(
                        "a later tier cannot ask for less: {share} is below {path}[{}].share ({})",
                        i - 1,
                        prev.share
                    ),
                });
            }
        }
        tiers.push(CompletionTier {
            share,
            within,
            within_text,
        });
    }
    Ok(tiers)
}

/// `version.supported`: a list of versions (exact, a bare digest as in `expected`) or one
/// regular expression (a string), the older versions still allowed to run.
pub(crate) fn read_supported(v: &mut ObjectReader<'_>) -> Result<Vec<ExpectedVersion>, SpecError> {
    let path = v.path_of("supported");
    match v.get("supported") {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) if !items.is_empty() => {
            Ok(name_list(&path, items, "a version (a non-empty string)")?
                .into_iter()
                .map(ExpectedVersion::Exact)
                .collect())
        }
        Some(Value::String(r)) if !r.trim().is_empty() => {
            let anchored = Regex::new(&format!("^(?:{r})$")).map_err(|e| SpecError::Invalid {
                path: path.clone(),
                expected: "a list of versions, or a regular expression (RE2 syntax)".into(),
                got: format!("{r:?} ({})", e.to_string().lines().last().unwrap_or("")),
            })?;
            Ok(vec![ExpectedVersion::Regex(VersionRegex {
                source: r.clone(),
                anchored,
            })])
        }
        Some(other) => Err(invalid(
            &path,
            "a non-empty list of versions, or a regular expression",
            other,
        )),
    }
}
