//! expr v1.15.5's constant folding (`optimizer/fold.go`) where it changes an outcome.
//!
//! expr folds `x || true` to `true` and `x && false` to `false` after the type check, so `x`
//! is never evaluated: `result[5] > 1 || true` is true on a one-element result in Argo, not an
//! index error. The folds that lead there are applied too: `not` of a boolean literal and `==`
//! of two integer, string or boolean literals. Arithmetic folds give the values evaluation
//! gives anyway and are left out.

use super::ast::{BinaryOp, Node, UnaryOp};
use super::value::Value;

/// The tree with expr's boolean folds applied.
pub(crate) fn fold(node: Node) -> Node {
    match node {
        Node::Unary(UnaryOp::Not, inner) => match fold(*inner) {
            Node::Literal(Value::Bool(b)) => Node::Literal(Value::Bool(!b)),
            other => Node::Unary(UnaryOp::Not, Box::new(other)),
        },
        Node::Unary(op, inner) => Node::Unary(op, Box::new(fold(*inner))),
        Node::Binary(op, l, r) => {
            let (l, r) = (fold(*l), fold(*r));
            if op == BinaryOp::Eq {
                if let (Node::Literal(a), Node::Literal(b)) = (&l, &r) {
                    let folded = match (a, b) {
                        (Value::Int(x), Value::Int(y)) => Some(x == y),
                        (Value::String(x), Value::String(y)) => Some(x == y),
                        (Value::Bool(x), Value::Bool(y)) => Some(x == y),
                        _ => None,
                    };
                    if let Some(b) = folded {
                        return Node::Literal(Value::Bool(b));
                    }
                }
            }
            Node::Binary(op, Box::new(l), Box::new(r))
        }
        Node::And(items) => chain(items, false),
        Node::Or(items) => chain(items, true),
        Node::Matches(l, r, re) => Node::Matches(Box::new(fold(*l)), Box::new(fold(*r)), re),
        Node::Coalesce(l, r) => Node::Coalesce(Box::new(fold(*l)), Box::new(fold(*r))),
        Node::Conditional(c, a, b) => {
            Node::Conditional(Box::new(fold(*c)), Box::new(fold(*a)), Box::new(fold(*b)))
        }
        Node::Member {
            object,
            property,
            optional,
        } => Node::Member {
            object: Box::new(fold(*object)),
            property: Box::new(fold(*property)),
            optional,
        },
        Node::Slice { object, from, to } => Node::Slice {
            object: Box::new(fold(*object)),
            from: from.map(|n| Box::new(fold(*n))),
            to: to.map(|n| Box::new(fold(*n))),
        },
        Node::Chain(inner) => Node::Chain(Box::new(fold(*inner))),
        Node::Array(items) => Node::Array(items.into_iter().map(fold).collect()),
        Node::Map(pairs) => Node::Map(pairs.into_iter().map(|(k, v)| (fold(k), fold(v))).collect()),
        Node::Call(f, args) => Node::Call(f, args.into_iter().map(fold).collect()),
        Node::Predicate(body) => Node::Predicate(Box::new(fold(*body))),
        Node::Let { name, value, body } => Node::Let {
            name,
            value: Box::new(fold(*value)),
            body: Box::new(fold(*body)),
        },
        leaf => leaf,
    }
}

/// A flattened `&&` (`absorbing` false) or `||` (`absorbing` true) chain. expr folds the
/// left-nested binary form until nothing changes: a literal equal to the absorbing value makes
/// the whole chain that literal, wherever it stands; the other literal drops out.
fn chain(items: Vec<Node>, absorbing: bool) -> Node {
    let mut kept = Vec::with_capacity(items.len());
    for item in items.into_iter().map(fold) {
        match item {
            Node::Literal(Value::Bool(b)) if b == absorbing => {
                return Node::Literal(Value::Bool(absorbing))
            }
            Node::Literal(Value::Bool(_)) => {}
            other => kept.push(other),
        }
    }
    match kept.len() {
        0 => Node::Literal(Value::Bool(!absorbing)),
        1 => kept.pop().unwrap_or(Node::Literal(Value::Bool(!absorbing))),
        _ if absorbing => Node::Or(kept),
        _ => Node::And(kept),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::parser::parse;

    fn folded(src: &str) -> Node {
        fold(parse(src).unwrap())
    }

    #[test]
    fn absorbing_literals_fold_the_whole_chain() {
        assert!(matches!(
            folded("result[5] > 1 || true"),
            Node::Literal(Value::Bool(true))
        ));
        assert!(matches!(
            folded("false && result[5] > 1"),
            Node::Literal(Value::Bool(false))
        ));
        assert!(matches!(
            folded("result[0] > 1 && 1 == 2"),
            Node::Literal(Value::Bool(false))
        ));
        assert!(matches!(
            folded("result[0] > 1 || not true"),
            Node::Binary(BinaryOp::Gt, _, _)
        ));
        assert!(matches!(
            folded("result[0] > 1 || result[1] > 1"),
            Node::Or(_)
        ));
    }
}
