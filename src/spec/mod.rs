//! The metric spec and Argo templates: parsing and validation, with errors that name their key.
//!
//! Everything a surface receives (plugin JSON, webhook YAML, template files) becomes a
//! [`Metric`] here, so the engine only ever sees validated input.

mod args;
mod compare;
pub mod duration;
mod error;
mod fleet;
pub mod lint;
mod metric;
mod promql;
pub(crate) mod reader;
pub mod run_clock;
mod template;
mod trust;
mod yaml;

pub use args::{check_declared, placeholder_names, substitute, substitute_str, ArgValues};
pub use compare::{CompareForm, CompareSpec, RatioQueries};
pub use error::SpecError;
pub(crate) use fleet::{
    is_bare_digest, is_digest_reference, normal_version, INIT_CONTAINER_INFO, POD_STATUS_PHASE,
};
pub use fleet::{
    Cohort, CohortTargets, CompletionTier, ExpectedTargets, ExpectedVersion, FleetException,
    FleetSpec, InitContainers, LabelMatcher, MatchKind, Promotion, SeriesSelector, VersionRegex,
    VersionSpec,
};
pub(crate) use metric::{aws_name, check_address};
pub use metric::{Guard, MetricKind, MetricSpec, NoDataPolicy, OnInsufficient, QuerySpec};
pub(crate) use promql::parse_promql;
pub use promql::{check_promql, QueryLanguage};
pub use template::{Metric, Provider, RunLimits, Template};
pub use trust::template_problems;
pub use yaml::{parse_request_yaml, RequestYamlError};
