//! expr v1.15.5's compile-time type check (`checker/checker.go`), run against the type that
//! `result` has, as Argo Rollouts v1.9.1 does: it compiles every condition with
//! `expr.Env({"result": <the value>, ...})`, so `result == 10` on a vector (`[]float64`) is a
//! compile error there, not a false comparison.
//!
//! The rules below follow expr v1.15.5 node by node; only what rollgate's tree can hold is
//! covered (no structs, methods, time or duration values).

use std::fmt;

use super::ast::{BinaryOp, Node, UnaryOp};
use super::error::ConditionError;
use super::functions::Function;
use super::value::Value;

/// A Go type as expr's checker sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ty {
    /// Go's untyped nil (`reflect.TypeOf(nil)`): the type of `nil` and of a nil `result`.
    Nil,
    /// `interface {}`: anything, checked at run time.
    Any,
    Bool,
    Int,
    Float,
    String,
    Slice(Box<Ty>),
    /// `map[string]T`.
    Map(Box<Ty>),
    /// A closure (`func(interface {}) T`) or a function named without a call.
    Func(Box<Ty>),
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Nil => f.write_str("<nil>"),
            Ty::Any => f.write_str("interface {}"),
            Ty::Bool => f.write_str("bool"),
            Ty::Int => f.write_str("int"),
            Ty::Float => f.write_str("float64"),
            Ty::String => f.write_str("string"),
            Ty::Slice(e) => write!(f, "[]{e}"),
            Ty::Map(e) => write!(f, "map[string]{e}"),
            Ty::Func(out) => write!(f, "func(interface {{}}) {out}"),
        }
    }
}

impl Ty {
    /// The Go type Argo's providers give `result` for this value: a Prometheus scalar is
    /// `float64`, a vector or matrix `[]float64`, a JSON object `map[string]interface {}`.
    pub(crate) fn of_result(v: &Value) -> Ty {
        match v {
            Value::Nil => Ty::Nil,
            Value::Bool(_) => Ty::Bool,
            // Argo's results are decoded JSON or Prometheus samples: numbers are float64.
            Value::Int(_) | Value::Float(_) => Ty::Float,
            Value::String(_) => Ty::String,
            Value::Array(items) if items.iter().all(|i| matches!(i, Value::Float(_))) => {
                Ty::Slice(Box::new(Ty::Float))
            }
            Value::Array(_) => Ty::Slice(Box::new(Ty::Any)),
            Value::Map(_) => Ty::Map(Box::new(Ty::Any)),
        }
    }

    fn of_literal(v: &Value) -> (Ty, Option<Ty>) {
        match v {
            Value::Array(items) => (
                Ty::Slice(Box::new(Ty::Any)),
                same_kind(items.iter().map(|i| Ty::of_literal(i).0)),
            ),
            Value::Map(_) => (Ty::Map(Box::new(Ty::Any)), None),
            Value::Int(_) => (Ty::Int, None),
            other => (Ty::of_result(other), None),
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Ty::Nil => 0,
            Ty::Any => 1,
            Ty::Bool => 2,
            Ty::Int => 3,
            Ty::Float => 4,
            Ty::String => 5,
            Ty::Slice(_) => 6,
            Ty::Map(_) => 7,
            Ty::Func(_) => 8,
        }
    }

    fn elem(&self) -> Ty {
        match self {
            Ty::Slice(e) | Ty::Map(e) => (**e).clone(),
            _ => Ty::Any,
        }
    }
}

/// The element type of an array literal when all elements share a kind (expr's `info.elem`).
fn same_kind(mut types: impl Iterator<Item = Ty>) -> Option<Ty> {
    let first = types.next()?;
    if first == Ty::Nil {
        return None;
    }
    let mut last = first;
    for t in types {
        if t == Ty::Nil || t.kind() != last.kind() {
            return None;
        }
        last = t;
    }
    Some(last)
}

fn is_any(t: &Ty) -> bool {
    *t == Ty::Any
}
fn is_int(t: &Ty) -> bool {
    *t == Ty::Int
}
fn is_float(t: &Ty) -> bool {
    *t == Ty::Float
}
fn is_number(t: &Ty) -> bool {
    is_int(t) || is_float(t)
}
fn is_bool(t: &Ty) -> bool {
    *t == Ty::Bool
}
fn is_string(t: &Ty) -> bool {
    *t == Ty::String
}
fn is_array(t: &Ty) -> bool {
    matches!(t, Ty::Slice(_))
}
fn is_map(t: &Ty) -> bool {
    matches!(t, Ty::Map(_))
}

/// expr's `or(l, r, fns...)`: one side is `interface {}` and the other passes a test.
fn either_any(l: &Ty, r: &Ty, tests: &[fn(&Ty) -> bool]) -> bool {
    (is_any(l) && is_any(r))
        || (is_any(l) && tests.iter().any(|t| t(r)))
        || (is_any(r) && tests.iter().any(|t| t(l)))
}

/// expr's `isComparable`.
fn comparable(l: &Ty, r: &Ty) -> bool {
    *l == Ty::Nil
        || *r == Ty::Nil
        || l.kind() == r.kind()
        || (is_number(l) && is_number(r))
        || is_any(l)
        || is_any(r)
}

/// Go's `AssignableTo` for the types here: identical, or into `interface {}`.
fn assignable(from: &Ty, to: &Ty) -> bool {
    from == to || is_any(to)
}

/// expr's `combined`: the type of arithmetic on two numbers.
fn combined(l: &Ty, r: &Ty) -> Ty {
    if l.kind() == r.kind() {
        l.clone()
    } else if is_float(l) || is_float(r) {
        Ty::Float
    } else {
        Ty::Int
    }
}

type Checked = Result<(Ty, Option<Ty>), ConditionError>;

fn fail<T>(message: String) -> Result<T, ConditionError> {
    Err(ConditionError::Type { message })
}

/// Checks `root` with `result` of type `result`; the error is expr's compile error.
pub(crate) fn check(root: &Node, result: &Ty) -> Result<Ty, ConditionError> {
    let mut c = Checker {
        result,
        scopes: Vec::new(),
        vars: Vec::new(),
    };
    c.visit(root).map(|(t, _)| t)
}

struct Checker<'a> {
    result: &'a Ty,
    /// Predicate scopes: the collection's type and whether `#index` is defined (only `map`).
    scopes: Vec<(Ty, bool)>,
    vars: Vec<(String, Ty, Option<Ty>)>,
}

impl Checker<'_> {
    fn ty(&mut self, node: &Node) -> Result<Ty, ConditionError> {
        self.visit(node).map(|(t, _)| t)
    }

    fn visit(&mut self, node: &Node) -> Checked {
        let t = match node {
            Node::Literal(v) => return Ok(Ty::of_literal(v)),
            Node::Result => self.result.clone(),
            Node::Variable(name) => {
                return match self.vars.iter().rev().find(|(n, _, _)| n == name) {
                    Some((_, t, elem)) => Ok((t.clone(), elem.clone())),
                    None => fail(format!("unknown name {name}")),
                }
            }
            Node::Pointer => match self.scopes.last() {
                Some((Ty::Any, _)) => Ty::Any,
                Some((Ty::Slice(e), _)) => (**e).clone(),
                Some((t, _)) => return fail(format!("cannot use {t} as array")),
                None => return fail("cannot use pointer accessor outside closure".into()),
            },
            Node::PointerIndex => match self.scopes.last() {
                Some((_, true)) => Ty::Int,
                _ => return fail("unknown pointer #index".into()),
            },
            Node::Unary(op, operand) => {
                let t = self.ty(operand)?;
                match op {
                    UnaryOp::Not if is_bool(&t) || is_any(&t) => Ty::Bool,
                    UnaryOp::Neg | UnaryOp::Plus if is_number(&t) => t,
                    UnaryOp::Neg | UnaryOp::Plus if is_any(&t) => Ty::Any,
                    _ => {
                        let sym = match op {
                            UnaryOp::Not => "not",
                            UnaryOp::Neg => "-",
                            UnaryOp::Plus => "+",
                        };
                        return fail(format!("invalid operation: {sym} (mismatched type {t})"));
                    }
                }
            }
            Node::Binary(op, l, r) => self.binary(*op, l, r)?,
            Node::Matches(l, r, _) => {
                let (l, r) = (self.ty(l)?, self.ty(r)?);
                if (is_string(&l) && is_string(&r)) || either_any(&l, &r, &[is_string]) {
                    Ty::Bool
                } else {
                    return mismatch("matches", &l, &r);
                }
            }
            Node::And(items) | Node::Or(items) => {
                let sym = if matches!(node, Node::And(_)) {
                    "&&"
                } else {
                    "||"
                };
                let mut acc: Option<Ty> = None;
                for item in items {
                    let t = self.ty(item)?;
                    if let Some(l) = &acc {
                        if !((is_bool(l) && is_bool(&t)) || either_any(l, &t, &[is_bool])) {
                            return mismatch(sym, l, &t);
                        }
                        acc = Some(Ty::Bool);
                    } else {
                        acc = Some(t);
                    }
                }
                Ty::Bool
            }
            Node::Coalesce(l, r) => {
                let (l, r) = (self.ty(l)?, self.ty(r)?);
                match (&l, &r) {
                    (Ty::Nil, Ty::Nil) => Ty::Nil,
                    (Ty::Nil, _) => r,
                    (_, Ty::Nil) => l,
                    _ if assignable(&r, &l) => l,
                    _ => Ty::Any,
                }
            }
            Node::Conditional(c, a, b) => {
                let ct = self.ty(c)?;
                if !is_bool(&ct) && !is_any(&ct) {
                    return fail(format!("non-bool expression (type {ct}) used as condition"));
                }
                let (t1, t2) = (self.ty(a)?, self.ty(b)?);
                match (&t1, &t2) {
                    (Ty::Nil, Ty::Nil) => Ty::Nil,
                    (Ty::Nil, _) => t2,
                    (_, Ty::Nil) => t1,
                    _ if assignable(&t1, &t2) => t1,
                    _ => Ty::Any,
                }
            }
            Node::Member {
                object, property, ..
            } => self.member(object, property)?,
            Node::Slice { object, from, to } => {
                let t = self.ty(object)?;
                if !matches!(t, Ty::Any | Ty::String | Ty::Slice(_)) {
                    return fail(format!("cannot slice {t}"));
                }
                for bound in [from, to].into_iter().flatten() {
                    let b = self.ty(bound)?;
                    if !is_int(&b) && !is_any(&b) {
                        return fail(format!("non-integer slice index {b}"));
                    }
                }
                t
            }
            Node::Chain(inner) => return self.visit(inner),
            Node::Array(items) => {
                let mut types = Vec::with_capacity(items.len());
                for i in items {
                    types.push(self.ty(i)?);
                }
                return Ok((Ty::Slice(Box::new(Ty::Any)), same_kind(types.into_iter())));
            }
            Node::Map(pairs) => {
                for (k, v) in pairs {
                    self.ty(k)?;
                    self.ty(v)?;
                }
                Ty::Map(Box::new(Ty::Any))
            }
            Node::Call(f, args) => self.call(*f, args)?,
            Node::Predicate(body) => {
                let t = self.ty(body)?;
                if t == Ty::Nil {
                    return fail("closure cannot be nil".into());
                }
                Ty::Func(Box::new(t))
            }
            Node::Let { name, value, body } => {
                if self.vars.iter().any(|(n, _, _)| n == name) {
                    return fail(format!("cannot redeclare variable {name}"));
                }
                let (t, elem) = self.visit(value)?;
                self.vars.push((name.clone(), t, elem));
                let out = self.visit(body);
                self.vars.pop();
                return out;
            }
        };
        Ok((t, None))
    }

    fn binary(&mut self, op: BinaryOp, l: &Node, r: &Node) -> Result<Ty, ConditionError> {
        let l = self.ty(l)?;
        let (r, r_elem) = self.visit(r)?;
        let ok = |t: Ty| Ok(t);
        match op {
            BinaryOp::Eq | BinaryOp::Ne if comparable(&l, &r) => ok(Ty::Bool),
            BinaryOp::Lt | BinaryOp::Gt | BinaryOp::Le | BinaryOp::Ge
                if (is_number(&l) && is_number(&r))
                    || (is_string(&l) && is_string(&r))
                    || either_any(&l, &r, &[is_number, is_string]) =>
            {
                ok(Ty::Bool)
            }
            BinaryOp::Sub | BinaryOp::Mul if is_number(&l) && is_number(&r) => ok(combined(&l, &r)),
            BinaryOp::Sub | BinaryOp::Mul if either_any(&l, &r, &[is_number]) => ok(Ty::Any),
            BinaryOp::Div | BinaryOp::Pow
                if (is_number(&l) && is_number(&r)) || either_any(&l, &r, &[is_number]) =>
            {
                ok(Ty::Float)
            }
            BinaryOp::Mod if is_int(&l) && is_int(&r) => ok(Ty::Int),
            BinaryOp::Mod if either_any(&l, &r, &[is_int]) => ok(Ty::Any),
            BinaryOp::Add if is_number(&l) && is_number(&r) => ok(combined(&l, &r)),
            BinaryOp::Add if is_string(&l) && is_string(&r) => ok(Ty::String),
            BinaryOp::Add if either_any(&l, &r, &[is_number, is_string]) => ok(Ty::Any),
            BinaryOp::Contains | BinaryOp::StartsWith | BinaryOp::EndsWith
                if (is_string(&l) && is_string(&r)) || either_any(&l, &r, &[is_string]) =>
            {
                ok(Ty::Bool)
            }
            BinaryOp::Range if (is_int(&l) && is_int(&r)) || either_any(&l, &r, &[is_int]) => {
                ok(Ty::Slice(Box::new(Ty::Int)))
            }
            BinaryOp::In if is_map(&r) => {
                if l != Ty::Nil && !is_any(&l) && !assignable(&l, &Ty::String) {
                    return fail(format!("cannot use {l} as type string in map key"));
                }
                ok(Ty::Bool)
            }
            BinaryOp::In if is_array(&r) => {
                if l == Ty::Nil {
                    return ok(Ty::Bool);
                }
                let elem = r.elem();
                if !comparable(&l, &elem) {
                    return fail(format!("cannot use {l} as type {elem} in array"));
                }
                if let Some(e) = r_elem {
                    if !comparable(&l, &e) {
                        return fail(format!("cannot use {l} as type {e} in array"));
                    }
                }
                ok(Ty::Bool)
            }
            BinaryOp::In if is_any(&l) && (is_string(&r) || is_array(&r) || is_map(&r)) => {
                ok(Ty::Bool)
            }
            BinaryOp::In if is_any(&r) => ok(Ty::Bool),
            _ => mismatch(op.symbol(), &l, &r),
        }
    }

    fn member(&mut self, object: &Node, property: &Node) -> Result<Ty, ConditionError> {
        let base = self.ty(object)?;
        let prop = self.ty(property)?;
        if let (Ty::Nil, Node::Literal(Value::String(name))) = (&base, property) {
            return fail(format!("type <nil> has no field {name}"));
        }
        match &base {
            Ty::Any => Ok(Ty::Any),
            Ty::Map(e) => {
                if prop != Ty::Nil && !assignable(&prop, &Ty::String) && !is_any(&prop) {
                    return fail(format!("cannot use {prop} to get an element from {base}"));
                }
                Ok((**e).clone())
            }
            Ty::Slice(e) => {
                if !is_int(&prop) && !is_any(&prop) {
                    return fail(format!(
                        "array elements can only be selected using an integer (got {prop})"
                    ));
                }
                Ok((**e).clone())
            }
            _ => fail(format!("type {base}[{prop}] is undefined")),
        }
    }

    fn call(&mut self, f: Function, args: &[Node]) -> Result<Ty, ConditionError> {
        use Function as F;
        if f.predicate_args().is_some() {
            return self.predicate_call(f, args);
        }
        let mut types = Vec::with_capacity(args.len());
        for a in args {
            types.push(self.ty(a)?);
        }
        let name = f.name();
        let count = |n: usize| -> Result<(), ConditionError> {
            if types.len() == n {
                Ok(())
            } else {
                fail(format!(
                    "invalid number of arguments (expected {n}, got {})",
                    types.len()
                ))
            }
        };
        let a0 = types.first().cloned().unwrap_or(Ty::Nil);
        let numeric = |t: &Ty| is_number(t) || is_any(t);
        match f {
            F::Len => {
                count(1)?;
                match a0 {
                    Ty::Slice(_) | Ty::Map(_) | Ty::String | Ty::Any => Ok(Ty::Int),
                    t => fail(format!("invalid argument for len (type {t})")),
                }
            }
            F::Abs | F::Ceil | F::Floor | F::Round => {
                count(1)?;
                if !numeric(&a0) {
                    return fail(format!("invalid argument for {name} (type {a0})"));
                }
                Ok(if f == F::Abs { a0 } else { Ty::Float })
            }
            F::Int | F::Float => {
                count(1)?;
                if !numeric(&a0) && !is_string(&a0) {
                    return fail(format!("invalid argument for {name} (type {a0})"));
                }
                Ok(if f == F::Int { Ty::Int } else { Ty::Float })
            }
            F::Type | F::String => {
                typed(name, &types, &[Ty::Any])?;
                Ok(Ty::String)
            }
            F::Max | F::Min => {
                if types.is_empty() {
                    return fail(format!("not enough arguments to call {name}"));
                }
                for t in &types {
                    if is_any(t) {
                        return Ok(Ty::Any);
                    }
                    if !is_number(t) {
                        return fail(format!("invalid argument for {name} (type {t})"));
                    }
                }
                Ok(a0)
            }
            F::Sum | F::Mean | F::Median => {
                count(1)?;
                if !matches!(a0, Ty::Any | Ty::Slice(_)) {
                    let verb = match f {
                        F::Sum => "sum",
                        F::Mean => "avg",
                        _ => "median",
                    };
                    return fail(format!("cannot {verb} {a0}"));
                }
                Ok(if f == F::Sum { Ty::Any } else { Ty::Float })
            }
            F::First | F::Last => {
                count(1)?;
                match a0 {
                    Ty::Any => Ok(Ty::Any),
                    Ty::Slice(e) => Ok(*e),
                    t => {
                        let which = if f == F::First { "first" } else { "last" };
                        fail(format!("cannot get {which} element from {t}"))
                    }
                }
            }
            F::Get => {
                count(2)?;
                let p = types.get(1).cloned().unwrap_or(Ty::Nil);
                match &a0 {
                    Ty::Any => Ok(Ty::Any),
                    Ty::Slice(e) => {
                        if p == Ty::Nil {
                            return fail("cannot use nil as slice index".into());
                        }
                        if !is_int(&p) && !is_any(&p) {
                            return fail(format!("non-integer slice index {p}"));
                        }
                        Ok((**e).clone())
                    }
                    Ty::Map(e) => {
                        if p == Ty::Nil {
                            return fail("cannot use nil as map index".into());
                        }
                        if !assignable(&p, &Ty::String) && !is_any(&p) {
                            return fail(format!("cannot use {p} to get an element from {a0}"));
                        }
                        Ok((**e).clone())
                    }
                    t => fail(format!("type {t} does not support indexing")),
                }
            }
            F::Take => {
                count(2)?;
                if !matches!(a0, Ty::Any | Ty::Slice(_)) {
                    return fail(format!("cannot take from {a0}"));
                }
                let n = types.get(1).cloned().unwrap_or(Ty::Nil);
                if !is_int(&n) && !is_any(&n) {
                    return fail(format!("cannot take {n} elements"));
                }
                Ok(a0)
            }
            F::Keys | F::Values => {
                count(1)?;
                if !matches!(a0, Ty::Any | Ty::Map(_)) {
                    return fail(format!("cannot get {name} from {a0}"));
                }
                Ok(Ty::Slice(Box::new(Ty::Any)))
            }
            F::Sort => {
                if types.len() != 1 && types.len() != 2 {
                    return fail(format!(
                        "invalid number of arguments (expected 1 or 2, got {})",
                        types.len()
                    ));
                }
                if !matches!(a0, Ty::Any | Ty::Slice(_)) {
                    return fail(format!("cannot sort {a0}"));
                }
                if let Some(order) = types.get(1) {
                    if !is_string(order) && !is_any(order) {
                        return fail(format!(
                            "invalid argument for sort (expected string, got {order})"
                        ));
                    }
                }
                Ok(Ty::Slice(Box::new(Ty::Any)))
            }
            F::Trim | F::TrimPrefix | F::TrimSuffix => {
                overloads(name, &types, &[&[Ty::String], &[Ty::String, Ty::String]])?;
                Ok(Ty::String)
            }
            F::Upper | F::Lower => {
                typed(name, &types, &[Ty::String])?;
                Ok(Ty::String)
            }
            F::Split => {
                overloads(
                    name,
                    &types,
                    &[
                        &[Ty::String, Ty::String],
                        &[Ty::String, Ty::String, Ty::Int],
                    ],
                )?;
                Ok(Ty::Slice(Box::new(Ty::String)))
            }
            F::Replace => {
                overloads(
                    name,
                    &types,
                    &[
                        &[Ty::String, Ty::String, Ty::String, Ty::Int],
                        &[Ty::String, Ty::String, Ty::String],
                    ],
                )?;
                Ok(Ty::String)
            }
            F::Join => {
                let strings = Ty::Slice(Box::new(Ty::String));
                let anys = Ty::Slice(Box::new(Ty::Any));
                overloads(
                    name,
                    &types,
                    &[
                        &[strings.clone(), Ty::String],
                        &[anys.clone(), Ty::String],
                        &[anys],
                        &[strings],
                    ],
                )?;
                Ok(Ty::String)
            }
            F::Repeat => {
                typed(name, &types, &[Ty::String, Ty::Int])?;
                Ok(Ty::String)
            }
            F::IndexOf | F::LastIndexOf => {
                typed(name, &types, &[Ty::String, Ty::String])?;
                Ok(Ty::Int)
            }
            F::HasPrefix | F::HasSuffix => {
                typed(name, &types, &[Ty::String, Ty::String])?;
                Ok(Ty::Bool)
            }
            // Argo's environment: asInt(any) int64, asFloat(any) float64, isNaN/isInf(float64)
            // bool, isNil(any) bool, default(any, any) any.
            F::AsInt => typed(name, &types, &[Ty::Any]).map(|_| Ty::Int),
            F::AsFloat => typed(name, &types, &[Ty::Any]).map(|_| Ty::Float),
            F::IsNaN | F::IsInf => {
                typed(name, &types, &[Ty::Float])?;
                // expr converts an integer literal to float64; any other int reaches Go's
                // reflect call as an int, which fails when the condition runs.
                match args.first() {
                    Some(a) if is_int(&a0) && !integer_literal(a) => fail(format!(
                        "reflect: Call using int as type float64 (in {name})"
                    )),
                    _ => Ok(Ty::Bool),
                }
            }
            F::IsNil => typed(name, &types, &[Ty::Any]).map(|_| Ty::Bool),
            F::Default => typed(name, &types, &[Ty::Any, Ty::Any]).map(|_| Ty::Any),
            // Builtins of later expr versions, which Argo v1.9.1 does not know.
            F::Concat | F::Reverse => fail(format!("unknown name {name}")),
            _ => fail(format!("unknown builtin {name}")),
        }
    }

    fn predicate_call(&mut self, f: Function, args: &[Node]) -> Result<Ty, ConditionError> {
        use Function as F;
        let name = f.name();
        // In v1.15.5 `sum` is a plain builtin of one array and `count` needs a predicate.
        if f == F::Sum {
            let [list] = args else {
                return fail(format!(
                    "invalid number of arguments (expected 1, got {})",
                    args.len()
                ));
            };
            let t = self.ty(list)?;
            if !matches!(t, Ty::Any | Ty::Slice(_)) {
                return fail(format!("cannot sum {t}"));
            }
            return Ok(Ty::Any);
        }
        let (Some(list), Some(pred)) = (args.first(), args.get(1)) else {
            return fail(format!(
                "{name}() needs a predicate, e.g. {name}(result, {{# > 0}})"
            ));
        };
        let collection = self.ty(list)?;
        if !is_array(&collection) && !is_any(&collection) {
            return fail(format!(
                "builtin {name} takes only array (got {collection})"
            ));
        }
        self.scopes.push((collection.clone(), f == F::Map));
        let closure = self.ty(pred);
        self.scopes.pop();
        let out = match closure? {
            Ty::Func(out) => *out,
            _ => return fail("predicate should has one input and one output param".into()),
        };
        if f != F::Map && !is_bool(&out) && !is_any(&out) {
            return fail(format!("predicate should return boolean (got {out})"));
        }
        Ok(match f {
            F::All | F::Any | F::None | F::One => Ty::Bool,
            F::Filter if is_any(&collection) => Ty::Slice(Box::new(Ty::Any)),
            F::Filter => Ty::Slice(Box::new(collection.elem())),
            F::Map => Ty::Slice(Box::new(out)),
            F::Find | F::FindLast if is_any(&collection) => Ty::Any,
            F::Find | F::FindLast => collection.elem(),
            _ => Ty::Int,
        })
    }
}

/// An integer literal, possibly under signs and `+ - *` (what expr's checker rewrites into a
/// float when it is passed for a float64 parameter).
fn integer_literal(node: &Node) -> bool {
    match node {
        Node::Literal(Value::Int(_)) => true,
        Node::Unary(UnaryOp::Neg | UnaryOp::Plus, inner) => integer_literal(inner),
        Node::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul, l, r) => {
            integer_literal(l) || integer_literal(r)
        }
        _ => false,
    }
}

fn mismatch<T>(op: &str, l: &Ty, r: &Ty) -> Result<T, ConditionError> {
    fail(format!(
        "invalid operation: {op} (mismatched types {l} and {r})"
    ))
}

/// expr's `checkArguments` for a Go function with fixed parameters.
fn typed(name: &str, args: &[Ty], params: &[Ty]) -> Result<(), ConditionError> {
    if args.len() > params.len() {
        return fail(format!("too many arguments to call {name}"));
    }
    if args.len() < params.len() {
        return fail(format!("not enough arguments to call {name}"));
    }
    for (t, p) in args.iter().zip(params) {
        // An integer passed for a float parameter is converted (a literal) or fails when the
        // function is called (anything else); either way it compiles.
        let converts = is_float(p) && is_int(t);
        if converts || *t == Ty::Nil || is_any(t) || assignable(t, p) {
            continue;
        }
        return fail(format!(
            "cannot use {t} as argument (type {p}) to call {name} "
        ));
    }
    Ok(())
}

/// The first overload the arguments fit, else the last one's error (as expr reports).
fn overloads(name: &str, args: &[Ty], candidates: &[&[Ty]]) -> Result<(), ConditionError> {
    let mut last = None;
    for params in candidates {
        match typed(name, args, params) {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::parser::parse;

    fn check_src(src: &str, result: Ty) -> Result<Ty, ConditionError> {
        check(&parse(src).unwrap(), &result)
    }

    fn floats() -> Ty {
        Ty::Slice(Box::new(Ty::Float))
    }

    #[test]
    fn comparisons_need_comparable_types() {
        assert!(check_src("result == 10", floats()).is_err());
        assert!(check_src("result == true", floats()).is_err());
        assert!(check_src("result == [0.5]", floats()).is_ok());
        assert!(check_src("result == nil", floats()).is_ok());
        assert!(check_src("result == 10", Ty::Float).is_ok());
        assert!(check_src("asFloat(result) == \"1.1\"", Ty::Float).is_err());
        assert!(check_src("result < 1", floats()).is_err());
        assert!(check_src("result.a == 10", Ty::Map(Box::new(Ty::Any))).is_ok());
    }

    #[test]
    fn array_builtins_follow_v1_15_5() {
        assert!(check_src("max(result) < 1", floats()).is_err());
        assert!(check_src("max(result[0], 1) == 1", floats()).is_ok());
        assert!(check_src("mean(result) < 1", Ty::Float).is_err());
        assert!(check_src("median(result) < 1", floats()).is_ok());
        assert!(check_src("isNaN(result)", floats()).is_err());
        assert!(check_src("isNaN(result[0])", floats()).is_ok());
        assert!(check_src("isNaN(1) || isInf(-2 * 3)", floats()).is_ok());
        assert!(check_src("isNaN(len(result))", floats()).is_err());
        assert!(check_src("len(result) > 0", Ty::Float).is_err());
        assert!(check_src("sum(result, {# > 0}) > 0", floats()).is_err());
        assert!(check_src("count(result) > 0", floats()).is_err());
        assert!(check_src("all(result, {#index > 0})", floats()).is_err());
        assert!(check_src("all(map(result, {#index}), {# > 0})", floats()).is_ok());
        assert!(check_src("concat(result, result)[0] > 0", floats()).is_err());
    }

    #[test]
    fn logical_operators_need_booleans() {
        assert!(check_src("result[0] || true", floats()).is_err());
        assert!(check_src("result[0] > 1 || true", floats()).is_ok());
        assert!(check_src("1 in result", floats()).is_ok());
        assert!(check_src("'a' in result", floats()).is_err());
        assert!(check_src("'a' in [1, 2]", floats()).is_err());
        assert!(check_src("1 in [1, 'a']", floats()).is_ok());
    }
}
