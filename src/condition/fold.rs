//! expr v1.15.5's constant folding (`optimizer/fold.go`) where it changes an outcome.
//!
//! expr folds `x || true` to `true` and `x && false` to `false` after the type check, so `x`
//! is never evaluated: `result[5] > 1 || true` is true on a one-element result in Argo, not an
//! index error. The folds that lead there are applied too: `not` of a boolean literal and `==`
//! of two integer, string or boolean literals. Arithmetic folds give the values evaluation
//! gives anyway and are left out. One rewrite of expr's checker is done here too: integer
//! literals in the argument of Argo's float64 functions become floats.

use super::ast::{BinaryOp, Node, UnaryOp};
use super::functions::Function;
use super::value::Value;

/// The tree with expr's boolean folds applied.
pub(crate) fn fold(node: Node) -> Node {
    fold_in(node, &mut Vec::new())
}

/// `fold` with the `let` variables in scope and whether each holds an int.
fn fold_in(node: Node, vars: &mut Vec<(String, bool)>) -> Node {
    match node {
        Node::Unary(UnaryOp::Not, inner) => match fold_in(*inner, vars) {
            Node::Literal(Value::Bool(b)) => Node::Literal(Value::Bool(!b)),
            other => Node::Unary(UnaryOp::Not, Box::new(other)),
        },
        Node::Unary(op, inner) => Node::Unary(op, Box::new(fold_in(*inner, vars))),
        Node::Binary(op, l, r) => {
            let (l, r) = (fold_in(*l, vars), fold_in(*r, vars));
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
        Node::And(items) => chain(items, false, vars),
        Node::Or(items) => chain(items, true, vars),
        Node::Matches(l, r, re) => {
            Node::Matches(Box::new(fold_in(*l, vars)), Box::new(fold_in(*r, vars)), re)
        }
        Node::Coalesce(l, r) => {
            Node::Coalesce(Box::new(fold_in(*l, vars)), Box::new(fold_in(*r, vars)))
        }
        Node::Conditional(c, a, b) => Node::Conditional(
            Box::new(fold_in(*c, vars)),
            Box::new(fold_in(*a, vars)),
            Box::new(fold_in(*b, vars)),
        ),
        Node::Member {
            object,
            property,
            optional,
        } => Node::Member {
            object: Box::new(fold_in(*object, vars)),
            property: Box::new(fold_in(*property, vars)),
            optional,
        },
        Node::Slice { object, from, to } => Node::Slice {
            object: Box::new(fold_in(*object, vars)),
            from: from.map(|n| Box::new(fold_in(*n, vars))),
            to: to.map(|n| Box::new(fold_in(*n, vars))),
        },
        Node::Chain(inner) => Node::Chain(Box::new(fold_in(*inner, vars))),
        Node::Array(items) => Node::Array(items.into_iter().map(|n| fold_in(n, vars)).collect()),
        Node::Map(pairs) => Node::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (fold_in(k, vars), fold_in(v, vars)))
                .collect(),
        ),
        Node::Call(f @ (Function::IsNaN | Function::IsInf), args) => {
            let args = args
                .into_iter()
                .map(|a| {
                    let a = fold_in(a, vars);
                    if statically_int(&a, vars) {
                        floats_for_int_literals(a)
                    } else {
                        a
                    }
                })
                .collect();
            Node::Call(f, args)
        }
        Node::Call(f, args) => Node::Call(f, args.into_iter().map(|n| fold_in(n, vars)).collect()),
        Node::Predicate(body) => Node::Predicate(Box::new(fold_in(*body, vars))),
        Node::Let { name, value, body } => {
            let value = fold_in(*value, vars);
            vars.push((name.clone(), statically_int(&value, vars)));
            let body = fold_in(*body, vars);
            vars.pop();
            Node::Let {
                name,
                value: Box::new(value),
                body: Box::new(body),
            }
        }
        leaf => leaf,
    }
}

/// Whether expr's checker types `node` as an integer whatever `result` is: literals, the
/// builtins that return `int`, `#index`, `let` variables holding one, and `+ - * %` and
/// signs of those.
fn statically_int(node: &Node, vars: &[(String, bool)]) -> bool {
    use Function as F;
    match node {
        Node::Literal(Value::Int(_)) | Node::PointerIndex => true,
        Node::Variable(name) => vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .is_some_and(|(_, int)| *int),
        Node::Unary(UnaryOp::Neg | UnaryOp::Plus, inner) => statically_int(inner, vars),
        Node::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Mod, l, r) => {
            statically_int(l, vars) && statically_int(r, vars)
        }
        Node::Call(
            F::Len
            | F::Int
            | F::AsInt
            | F::Count
            | F::IndexOf
            | F::LastIndexOf
            | F::FindIndex
            | F::FindLastIndex,
            _,
        ) => true,
        Node::Call(F::Abs | F::Max | F::Min, args) => {
            !args.is_empty() && args.iter().all(|a| statically_int(a, vars))
        }
        _ => false,
    }
}

/// expr's checker, for an integer argument of a `float64` parameter (Argo's `isNaN`,
/// `isInf`): the integer literals in it, through signs and `+ - *`, become float literals
/// (`checker.go` traverseAndReplaceIntegerNodesWithFloatNodes). `isNaN(len(result) + 1)`
/// then gets a float; `isNaN(len(result))` still gets an int, which Go's call rejects.
fn floats_for_int_literals(node: Node) -> Node {
    match node {
        Node::Literal(Value::Int(i)) => Node::Literal(Value::Float(i as f64)),
        Node::Unary(op, inner) => Node::Unary(op, Box::new(floats_for_int_literals(*inner))),
        Node::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul), l, r) => Node::Binary(
            op,
            Box::new(floats_for_int_literals(*l)),
            Box::new(floats_for_int_literals(*r)),
        ),
        other => other,
    }
}

/// A flattened `&&` (`absorbing` false) or `||` (`absorbing` true) chain. expr folds the
/// left-nested binary form until nothing changes: a literal equal to the absorbing value makes
/// the whole chain that literal, wherever it stands; the other literal drops out.
fn chain(items: Vec<Node>, absorbing: bool, vars: &mut Vec<(String, bool)>) -> Node {
    let mut kept = Vec::with_capacity(items.len());
    for item in items.into_iter().map(|n| fold_in(n, vars)) {
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
