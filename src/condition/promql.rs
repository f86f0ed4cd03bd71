//! A condition as a PromQL filter, for alert rules that page on the gate's own definition.
//!
//! Only the forms with an exact PromQL equivalent are translated: comparisons of `result[0]`
//! with a number, `&&`, `||`, `!` of such, `true`/`false`, and `len(result)` against a number.
//! The filter is what Argo would say for a result that *has data* (one non-NaN value): empty
//! and NaN results never reach the conditions in rollgate (the no-data rule decides them), so
//! `len(result) == 0` is false there, and `isNaN(result[0])` too.

use std::fmt;

use super::ast::{BinaryOp, Node, UnaryOp};
use super::functions::Function;
use super::value::Value;
use super::Condition;

/// The series of the vector `v` for which a condition holds, as PromQL.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Holds for every value.
    All,
    /// Holds for no value.
    Nothing,
    /// Holds for the series this expression returns (a subset of `v`'s).
    Expr(String),
}

impl Filter {
    /// The series for which the condition does not hold.
    pub fn negate(self, v: &str) -> Filter {
        match self {
            Filter::All => Filter::Nothing,
            Filter::Nothing => Filter::All,
            Filter::Expr(e) => Filter::Expr(format!("{v} unless ({e})")),
        }
    }

    /// The PromQL of the selected series (`v` itself for `All`, `None` for `Nothing`).
    pub fn promql(&self, v: &str) -> Option<String> {
        match self {
            Filter::All => Some(v.to_string()),
            Filter::Nothing => None,
            Filter::Expr(e) => Some(e.clone()),
        }
    }
}

/// Why a condition has no PromQL equivalent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untranslatable(pub String);

impl fmt::Display for Untranslatable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Condition {
    /// The filter over `v` (a PromQL vector whose first series is `result[0]`) selecting the
    /// series for which this condition holds, or why there is none.
    pub fn as_promql_filter(&self, v: &str) -> Result<Filter, Untranslatable> {
        translate(&self.parsed, v)
    }
}

impl Condition {
    /// The numbers `result[0]` is compared with, in order of appearance (a dashboard draws
    /// them as thresholds).
    pub fn thresholds(&self) -> Vec<f64> {
        let mut out = Vec::new();
        collect_thresholds(&self.parsed, &mut out);
        out
    }
}

fn collect_thresholds(node: &Node, out: &mut Vec<f64>) {
    match node {
        Node::Binary(_, lhs, rhs) => {
            match (number(lhs), number(rhs)) {
                (Some(x), None) if is_first(rhs) => out.push(x),
                (None, Some(x)) if is_first(lhs) => out.push(x),
                _ => {}
            }
            collect_thresholds(lhs, out);
            collect_thresholds(rhs, out);
        }
        Node::And(items) | Node::Or(items) => {
            for item in items {
                collect_thresholds(item, out);
            }
        }
        Node::Unary(_, inner) => collect_thresholds(inner, out),
        _ => {}
    }
}

fn translate(node: &Node, v: &str) -> Result<Filter, Untranslatable> {
    match node {
        Node::Literal(Value::Bool(b)) => Ok(if *b { Filter::All } else { Filter::Nothing }),
        Node::And(items) => {
            let mut parts = Vec::new();
            for item in items {
                match translate(item, v)? {
                    Filter::Nothing => return Ok(Filter::Nothing),
                    Filter::All => {}
                    Filter::Expr(e) => parts.push(format!("({e})")),
                }
            }
            Ok(join(parts, " and "))
        }
        Node::Or(items) => {
            let mut parts = Vec::new();
            for item in items {
                match translate(item, v)? {
                    Filter::All => return Ok(Filter::All),
                    Filter::Nothing => {}
                    Filter::Expr(e) => parts.push(format!("({e})")),
                }
            }
            if parts.is_empty() {
                return Ok(Filter::Nothing);
            }
            Ok(join(parts, " or "))
        }
        Node::Unary(UnaryOp::Not, inner) => Ok(translate(inner, v)?.negate(v)),
        Node::Binary(op, lhs, rhs) => comparison(*op, lhs, rhs, v),
        Node::Call(Function::IsNaN, args) if args.len() == 1 && is_first(&args[0]) => {
            // A NaN value is no data: the conditions never see it.
            Ok(Filter::Nothing)
        }
        other => Err(Untranslatable(format!(
            "{} has no PromQL equivalent (translated: comparisons of result[0] or len(result) with a number, joined by &&, || and !)",
            describe(other)
        ))),
    }
}

fn join(parts: Vec<String>, op: &str) -> Filter {
    match parts.len() {
        0 => Filter::All,
        1 => Filter::Expr(strip_parens(&parts[0])),
        _ => Filter::Expr(parts.join(op)),
    }
}

fn strip_parens(s: &str) -> String {
    s.strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or(s)
        .to_string()
}

/// `result[0] op X`, `X op result[0]`, `len(result) op X`.
fn comparison(op: BinaryOp, lhs: &Node, rhs: &Node, v: &str) -> Result<Filter, Untranslatable> {
    let Some(symbol) = promql_comparison(op) else {
        return Err(Untranslatable(format!(
            "operator `{}` has no PromQL equivalent in a filter",
            op.symbol()
        )));
    };
    let (op, value, side) = match (number(lhs), number(rhs)) {
        (None, Some(x)) => (op, x, lhs),
        (Some(x), None) => (flip(op), x, rhs),
        _ => {
            return Err(Untranslatable(format!(
                "`{}` between two values: only comparisons with a number literal are translated",
                op.symbol()
            )))
        }
    };
    if is_first(side) {
        let symbol = promql_comparison(op).unwrap_or(symbol);
        return Ok(Filter::Expr(format!("{v} {symbol} {}", literal(value))));
    }
    if is_len_of_result(side) {
        // With data the result has one value (exact) or more (the caller says so).
        return Ok(if compare(op, 1.0, value) {
            Filter::All
        } else {
            Filter::Nothing
        });
    }
    Err(Untranslatable(format!(
        "{} is compared; only result[0] and len(result) are translated",
        describe(side)
    )))
}

fn promql_comparison(op: BinaryOp) -> Option<&'static str> {
    Some(match op {
        BinaryOp::Lt => "<",
        BinaryOp::Gt => ">",
        BinaryOp::Le => "<=",
        BinaryOp::Ge => ">=",
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        _ => return None,
    })
}

fn flip(op: BinaryOp) -> BinaryOp {
    match op {
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::Le => BinaryOp::Ge,
        BinaryOp::Ge => BinaryOp::Le,
        other => other,
    }
}

fn compare(op: BinaryOp, a: f64, b: f64) -> bool {
    match op {
        BinaryOp::Lt => a < b,
        BinaryOp::Gt => a > b,
        BinaryOp::Le => a <= b,
        BinaryOp::Ge => a >= b,
        BinaryOp::Eq => a == b,
        _ => a != b,
    }
}

/// A number literal, with a sign.
fn number(node: &Node) -> Option<f64> {
    match node {
        Node::Literal(Value::Int(i)) => Some(*i as f64),
        Node::Literal(Value::Float(f)) if f.is_finite() => Some(*f),
        Node::Unary(UnaryOp::Neg, inner) => number(inner).map(|x| -x),
        Node::Unary(UnaryOp::Plus, inner) => number(inner),
        _ => None,
    }
}

/// PromQL's spelling of a finite number (Rust's shortest round-trip form).
fn literal(x: f64) -> String {
    let text = format!("{x:?}");
    text.strip_suffix(".0").map(str::to_string).unwrap_or(text)
}

/// `result[0]` (also `asFloat(result[0])`).
fn is_first(node: &Node) -> bool {
    match node {
        Node::Member {
            object, property, ..
        } => {
            matches!(object.as_ref(), Node::Result)
                && matches!(property.as_ref(), Node::Literal(Value::Int(0)))
        }
        Node::Chain(inner) => is_first(inner),
        Node::Call(Function::AsFloat, args) => args.len() == 1 && is_first(&args[0]),
        _ => false,
    }
}

fn is_len_of_result(node: &Node) -> bool {
    matches!(node, Node::Call(Function::Len, args) if args.len() == 1 && matches!(args[0], Node::Result))
}

/// A short description of a node for messages.
fn describe(node: &Node) -> String {
    match node {
        Node::Member { .. } | Node::Chain(_) => "an element other than result[0]".into(),
        Node::Result => "`result` itself".into(),
        Node::Call(f, _) => format!("a call of {f:?}"),
        Node::Binary(op, _, _) => format!("operator `{}`", op.symbol()),
        Node::Let { .. } => "`let`".into(),
        Node::Conditional(..) => "`?:`".into(),
        Node::Coalesce(..) => "`??`".into(),
        Node::Matches(..) => "`matches`".into(),
        Node::Literal(_) => "a literal that is not a boolean".into(),
        _ => "this expression".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tr(source: &str) -> Result<Filter, Untranslatable> {
        Condition::compile(source).unwrap().as_promql_filter("v")
    }

    #[test]
    fn comparisons_and_their_combinations() {
        assert_eq!(tr("result[0] < 0.01"), Ok(Filter::Expr("v < 0.01".into())));
        assert_eq!(tr("0.5 <= result[0]"), Ok(Filter::Expr("v >= 0.5".into())));
        assert_eq!(tr("result[0] > -2"), Ok(Filter::Expr("v > -2".into())));
        assert_eq!(
            tr("len(result) == 0 || result[0] < 0.01"),
            Ok(Filter::Expr("v < 0.01".into()))
        );
        assert_eq!(
            tr("result[0] > 0.1 && result[0] < 0.9"),
            Ok(Filter::Expr("(v > 0.1) and (v < 0.9)".into()))
        );
        assert_eq!(
            tr("result[0] < 0.1 || result[0] > 0.9"),
            Ok(Filter::Expr("(v < 0.1) or (v > 0.9)".into()))
        );
        assert_eq!(
            tr("!(result[0] >= 1e-3)"),
            Ok(Filter::Expr("v unless (v >= 0.001)".into()))
        );
        assert_eq!(tr("len(result) > 0"), Ok(Filter::All));
        assert_eq!(tr("isNaN(result[0])"), Ok(Filter::Nothing));
        let c = Condition::compile("len(result) == 0 || (0.5 < result[0] && result[0] < 2)");
        assert_eq!(c.unwrap().thresholds(), vec![0.5, 2.0]);
    }

    #[test]
    fn other_forms_say_why() {
        for source in [
            "all(result, # < 0.01)",
            "result[1] < 0.01",
            "result[0] * 100 < 1",
            "result[0] < result[1]",
        ] {
            let err = tr(source).unwrap_err();
            assert!(
                err.0.contains("PromQL") || err.0.contains("only"),
                "{source}: {err}"
            );
        }
    }
}
