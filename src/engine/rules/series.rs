//! How many series a query can return: `result[0]` is exact only for one.

use promql_parser::parser::value::ValueType;
use promql_parser::parser::{Expr, LabelModifier};

use crate::spec::parse_promql;

/// The shape of a query's result, as far as an alert over it can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// An instant vector of at most one series: `result[0]` is that series.
    OneSeries,
    /// An instant vector that may hold several series: `result[0]` is whichever Prometheus
    /// lists first, while an alert judges each series.
    ManySeries,
    /// A scalar (Argo's `result` is a number) or a matrix (a flattened list).
    NotVector,
}

/// The shape of `query` (an invalid query is `NotVector`: its rules cannot be exact).
pub fn shape(query: &str) -> Shape {
    parse_promql("query", query, |expr| {
        if expr.value_type() != ValueType::Vector {
            Shape::NotVector
        } else if one_series(&expr) {
            Shape::OneSeries
        } else {
            Shape::ManySeries
        }
    })
    .unwrap_or(Shape::NotVector)
}

/// True when `expr` returns at most one series whatever the data.
fn one_series(expr: &Expr) -> bool {
    match expr {
        Expr::Aggregate(a) => {
            let single = matches!(
                a.op.to_string().as_str(),
                "sum"
                    | "min"
                    | "max"
                    | "avg"
                    | "count"
                    | "stddev"
                    | "stdvar"
                    | "group"
                    | "quantile"
            );
            single && grouped_by(&a.modifier, &[])
        }
        Expr::Paren(p) => one_series(&p.expr),
        Expr::Unary(u) => one_series(&u.expr),
        Expr::Binary(b) => {
            let (l, r) = (b.lhs.value_type(), b.rhs.value_type());
            if b.op.is_set_operator() {
                // `and`/`unless` keep a subset of the left side; `or` adds the right's series.
                return match b.op.to_string().as_str() {
                    "or" => false,
                    _ => one_series(&b.lhs),
                };
            }
            match (l, r) {
                (ValueType::Scalar, _) => one_series(&b.rhs),
                (_, ValueType::Scalar) => one_series(&b.lhs),
                // One-to-one matching pairs each left series with at most one right series.
                _ => {
                    let one_to_one = b.modifier.as_ref().is_none_or(|m| {
                        matches!(
                            m.card,
                            promql_parser::parser::VectorMatchCardinality::OneToOne
                        )
                    });
                    one_to_one && (one_series(&b.lhs) || one_series(&b.rhs))
                }
            }
        }
        Expr::Call(c) => match c.func.name {
            "vector" | "absent" | "absent_over_time" => true,
            // One series per group of the non-`le` labels: one when aggregated by `le` only.
            "histogram_quantile" => c.args.args.get(1).is_some_and(|a| by_le_only(a)),
            "abs" | "ceil" | "floor" | "round" | "exp" | "ln" | "log2" | "log10" | "sqrt"
            | "clamp" | "clamp_min" | "clamp_max" | "sgn" | "label_replace" | "label_join"
            | "timestamp" => c
                .args
                .args
                .iter()
                .find(|a| a.value_type() == ValueType::Vector)
                .is_some_and(|a| one_series(a)),
            _ => false,
        },
        _ => false,
    }
}

fn by_le_only(expr: &Expr) -> bool {
    match expr {
        Expr::Paren(p) => by_le_only(&p.expr),
        Expr::Aggregate(a) => a.op.to_string() == "sum" && grouped_by(&a.modifier, &["le"]),
        _ => false,
    }
}

/// The aggregation groups by exactly `labels` (none: `sum(x)` or `sum by () (x)`).
fn grouped_by(modifier: &Option<LabelModifier>, labels: &[&str]) -> bool {
    match modifier {
        None => labels.is_empty(),
        Some(LabelModifier::Include(l)) => {
            l.labels.len() == labels.len() && l.labels.iter().all(|x| labels.contains(&x.as_str()))
        }
        Some(LabelModifier::Exclude(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        for (q, want) in [
            ("sum(rate(a[5m])) / sum(rate(b[5m]))", Shape::OneSeries),
            ("sum by (le) (rate(a[5m]))", Shape::ManySeries),
            (
                "histogram_quantile(0.99, sum by (le) (rate(a_bucket[1m])))",
                Shape::OneSeries,
            ),
            ("sum by (pod) (rate(a[5m]))", Shape::ManySeries),
            ("rate(a[5m])", Shape::ManySeries),
            ("scalar(sum(a))", Shape::NotVector),
            ("a[5m]", Shape::NotVector),
            ("clamp_min(sum(a), 1) * 100", Shape::OneSeries),
            ("sum(a) or sum(b)", Shape::ManySeries),
        ] {
            assert_eq!(shape(q), want, "{q}");
        }
    }
}
