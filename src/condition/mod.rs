//! Argo Rollouts' `successCondition` / `failureCondition` language.
//!
//! Conditions are expr-lang/expr expressions evaluated the way the Argo Rollouts controller
//! (v1.7–v1.10, `utils/evaluate`) evaluates them: `result` is the metric's value, Argo adds
//! `asInt`, `asFloat`, `isNaN`, `isInf`, `isNil` and `default`, and the output must be a bool.
//! A condition is compiled once into a tree and evaluated many times without re-parsing.
//!
//! Where Go's behaviour is undefined or would crash (float-to-int of NaN, unbounded ranges,
//! deep nesting) this evaluator returns an error instead.
//!
//! ```
//! use rollgate::condition::{evaluate_result, Condition, Value};
//! use rollgate::measurement::Phase;
//!
//! let success = Condition::compile("result[0] < 0.01").unwrap();
//! let phase = evaluate_result(&Value::from(vec![0.005]), Some(&success), None).unwrap();
//! assert_eq!(phase, Phase::Successful);
//! ```

mod ast;
mod check;
mod error;
mod eval;
mod fold;
mod functions;
mod go_float;
mod lexer;
mod parser;
mod promql;
mod regex;
mod value;

use std::fmt;

pub use error::{ConditionError, Position};
pub use go_float::parse_go_float;
pub use promql::{Filter, Untranslatable};
/// Go's `%v` of a float64, for the values other backends format as their Argo provider does.
pub(crate) use value::go_float;
pub use value::Value;

use crate::measurement::Phase;

/// A compiled condition; keeps its source text for messages.
#[derive(Clone)]
pub struct Condition {
    source: String,
    /// The tree as parsed: what expr's type check sees.
    parsed: ast::Node,
    /// The tree after expr's optimizer folded constants (`x || true` is `true`): what runs.
    root: ast::Node,
    /// The type check against the two types a Prometheus result has and the one of a JSON
    /// object (`compare`, `fleet`), done once.
    scalar_check: Result<(), ConditionError>,
    vector_check: Result<(), ConditionError>,
    object_check: Result<(), ConditionError>,
}

impl fmt::Debug for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Condition").field(&self.source).finish()
    }
}

impl Condition {
    /// Parses and checks `source`: syntax, names, function arity, literal regexes, size.
    ///
    /// expr's type check needs the type of `result`, which Argo only knows when it evaluates;
    /// it is done here for Prometheus' two (`float64`, `[]float64`) and JSON objects, and at
    /// evaluation for others.
    pub fn compile(source: &str) -> Result<Condition, ConditionError> {
        let parsed = parser::parse(source)?;
        let root = fold::fold(parsed.clone());
        let check = |t: check::Ty| check::check(&parsed, &t).map(|_| ());
        Ok(Condition {
            source: source.to_owned(),
            scalar_check: check(check::Ty::Float),
            vector_check: check(check::Ty::Slice(Box::new(check::Ty::Float))),
            object_check: check(check::Ty::Map(Box::new(check::Ty::Any))),
            parsed,
            root,
        })
    }

    /// expr's compile-time type check for this `result`.
    fn type_check(&self, result: &Value) -> Result<(), ConditionError> {
        match result {
            Value::Float(_) => self.scalar_check.clone(),
            Value::Array(items) if items.iter().all(|i| matches!(i, Value::Float(_))) => {
                self.vector_check.clone()
            }
            Value::Map(_) => self.object_check.clone(),
            other => check::check(&self.parsed, &check::Ty::of_result(other)).map(|_| ()),
        }
    }

    /// Evaluates against `result`; anything but a boolean outcome is an error.
    pub fn evaluate(&self, result: &Value) -> Result<bool, ConditionError> {
        self.type_check(result)?;
        eval::evaluate_bool(&self.root, result)
    }

    /// Evaluates against `result` and returns whatever value the expression gives
    /// (for dry runs that show intermediate values).
    pub fn evaluate_value(&self, result: &Value) -> Result<Value, ConditionError> {
        self.type_check(result)?;
        eval::evaluate_value(&self.root, result)
    }

    /// The text the condition was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// Which of a metric's two conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Which {
    /// `successCondition`.
    Success,
    /// `failureCondition`.
    Failure,
}

impl Which {
    /// The metric field's name, as written in an AnalysisTemplate.
    pub fn field_name(self) -> &'static str {
        match self {
            Which::Success => "successCondition",
            Which::Failure => "failureCondition",
        }
    }
}

impl fmt::Display for Which {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field_name())
    }
}

/// A condition that could not be compiled or evaluated, with what is needed to explain it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionFailure {
    /// Which condition failed.
    pub which: Which,
    /// Its text.
    pub source: String,
    /// Why it failed.
    pub error: ConditionError,
    /// The value was nil or an empty array: the query returned nothing to judge.
    pub no_data: bool,
}

impl ConditionFailure {
    /// A failure to compile `source` (no value was involved).
    pub fn compile(which: Which, source: &str, error: ConditionError) -> Self {
        ConditionFailure {
            which,
            source: source.to_owned(),
            error,
            no_data: false,
        }
    }

    fn evaluation(
        which: Which,
        condition: &Condition,
        error: ConditionError,
        result: &Value,
    ) -> Self {
        ConditionFailure {
            which,
            source: condition.source.clone(),
            error,
            no_data: result.is_nil_or_empty(),
        }
    }
}

impl fmt::Display for ConditionFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.error.is_compile_error() {
            write!(
                f,
                "{} `{}` is not a valid condition: {}",
                self.which, self.source, self.error
            )
        } else {
            write!(
                f,
                "{} `{}` could not be evaluated: {}",
                self.which, self.source, self.error
            )?;
            if self.no_data {
                f.write_str("; the query returned no data")?;
            }
            Ok(())
        }
    }
}

impl std::error::Error for ConditionFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Argo's `EvaluateResult`: the phase a measurement gets from its two optional conditions.
///
/// Neither given: Successful. A true failure condition wins. With only a success condition,
/// false means Failed; with only a failure condition, false means Successful; with both,
/// neither true means Inconclusive. The success condition is evaluated first and an error in
/// either stops evaluation.
pub fn evaluate_result(
    result: &Value,
    success: Option<&Condition>,
    failure: Option<&Condition>,
) -> Result<Phase, ConditionFailure> {
    let run =
        |which: Which, condition: Option<&Condition>| -> Result<Option<bool>, ConditionFailure> {
            condition
                .map(|c| {
                    c.evaluate(result)
                        .map_err(|e| ConditionFailure::evaluation(which, c, e, result))
                })
                .transpose()
        };
    let succeeded = run(Which::Success, success)?;
    let failed = run(Which::Failure, failure)?;
    let (succeeded, failed) = match (succeeded, failed) {
        (None, None) => return Ok(Phase::Successful),
        (Some(s), None) => (s, !s),
        (None, Some(f)) => (!f, f),
        (Some(s), Some(f)) => (s, f),
    };
    Ok(if failed {
        Phase::Failed
    } else if succeeded {
        Phase::Successful
    } else {
        Phase::Inconclusive
    })
}

#[cfg(test)]
mod tests;
