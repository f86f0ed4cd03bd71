//! Evaluates a compiled tree against one `result`, borrowing wherever it can.

use std::borrow::Cow;
use std::cell::Cell;

use super::ast::{BinaryOp, Node, UnaryOp};
use super::error::ConditionError;
use super::functions::{apply, float_to_int, Function};
use super::regex::Regex;
use super::value::{go_equal, int_of_len, preview, weight, Value, NIL};

/// Most array elements, map entries and 16-byte string chunks one evaluation may build
/// (expr's default memory budget is the same number).
pub(crate) const ALLOC_LIMIT: u64 = 1_000_000;
/// Most predicate steps (closure calls) one evaluation may run.
pub(crate) const STEP_LIMIT: u64 = 10_000_000;

/// Per-evaluation limits, so a hostile condition cannot exhaust memory or spin.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    alloc: Cell<u64>,
    steps: Cell<u64>,
}

impl Budget {
    /// Accounts for `n` new elements.
    pub(crate) fn charge(&self, n: usize) -> Result<(), Flow> {
        let total = self.alloc.get().saturating_add(n as u64);
        self.alloc.set(total);
        if total > ALLOC_LIMIT {
            return Err(Flow::from(ConditionError::BudgetExceeded {
                what: "too much data built",
                limit: ALLOC_LIMIT,
            }));
        }
        Ok(())
    }

    /// Accounts for copies of `items`.
    pub(crate) fn charge_copies(&self, items: &[Value]) -> Result<(), Flow> {
        self.charge(items.iter().fold(0, |n, i| n.saturating_add(weight(i))))
    }

    /// Takes ownership of an evaluated value, paying for the copy when it is borrowed.
    fn own(&self, v: Cow<'_, Value>) -> Result<Value, Flow> {
        match v {
            Cow::Owned(v) => Ok(v),
            Cow::Borrowed(v) => {
                self.charge(weight(v))?;
                Ok(v.clone())
            }
        }
    }

    /// Accounts for a new string of `bytes` bytes.
    pub(crate) fn charge_string(&self, bytes: usize) -> Result<(), Flow> {
        self.charge(bytes / 16 + 1)
    }

    fn step(&self) -> Result<(), Flow> {
        let total = self.steps.get() + 1;
        self.steps.set(total);
        if total > STEP_LIMIT {
            return Err(Flow::from(ConditionError::BudgetExceeded {
                what: "too many predicate steps",
                limit: STEP_LIMIT,
            }));
        }
        Ok(())
    }
}

/// Why evaluation stopped early: an error, or a nil met by `?.` (caught by the chain).
#[derive(Debug)]
pub(crate) enum Flow {
    Error(Box<ConditionError>),
    NilChain,
}

impl From<ConditionError> for Flow {
    fn from(e: ConditionError) -> Self {
        Flow::Error(Box::new(e))
    }
}

impl Flow {
    /// The error this flow carries (a stray nil chain cannot happen; it maps to nil upstream).
    pub(crate) fn into_error(self) -> ConditionError {
        match self {
            Flow::Error(e) => *e,
            Flow::NilChain => {
                ConditionError::InvalidOperation("optional chain outside a chain".into())
            }
        }
    }
}

type Eval<'a> = Result<Cow<'a, Value>, Flow>;

static TRUE: Value = Value::Bool(true);
static FALSE: Value = Value::Bool(false);

/// What names mean during one evaluation.
struct Ctx<'a> {
    result: &'a Value,
    /// The element (and its index) of the innermost predicate.
    pointer: Option<(&'a Value, usize)>,
    vars: Option<&'a Var<'a>>,
    budget: &'a Budget,
}

/// One `let` binding, linked to the enclosing ones.
struct Var<'a> {
    name: &'a str,
    value: &'a Value,
    next: Option<&'a Var<'a>>,
}

/// Evaluates `root` with `result` bound and requires a boolean.
pub(crate) fn evaluate_bool(root: &Node, result: &Value) -> Result<bool, ConditionError> {
    let budget = Budget::default();
    let cx = Ctx {
        result,
        pointer: None,
        vars: None,
        budget: &budget,
    };
    let out = eval(root, &cx).map_err(Flow::into_error)?;
    match &*out {
        Value::Bool(b) => Ok(*b),
        other => Err(ConditionError::NotBoolean {
            type_name: other.type_name(),
            value: other.to_string(),
        }),
    }
}

/// Evaluates `root` to whatever value it gives (for tests and tools).
pub(crate) fn evaluate_value(root: &Node, result: &Value) -> Result<Value, ConditionError> {
    let budget = Budget::default();
    let cx = Ctx {
        result,
        pointer: None,
        vars: None,
        budget: &budget,
    };
    eval(root, &cx)
        .map(Cow::into_owned)
        .map_err(Flow::into_error)
}

fn op_error(message: String) -> Flow {
    Flow::from(ConditionError::InvalidOperation(message))
}

fn want_bool(v: &Value, what: &str) -> Result<bool, Flow> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => Err(op_error(format!(
            "{what} needs a boolean, got {} `{}`",
            other.type_name(),
            preview(other)
        ))),
    }
}

/// Dispatches on the node. Every non-trivial case lives in its own function so that this
/// recursive frame stays small (in debug builds each temporary of a big match takes stack).
fn eval<'a>(node: &'a Node, cx: &Ctx<'a>) -> Eval<'a> {
    match node {
        Node::Literal(v) => Ok(Cow::Borrowed(v)),
        Node::Result => Ok(Cow::Borrowed(cx.result)),
        Node::Variable(name) => variable(name, cx),
        Node::Pointer | Node::PointerIndex => pointer(node, cx),
        Node::Unary(op, operand) => unary(*op, operand, cx),
        Node::Binary(op, l, r) => {
            let a = eval(l, cx)?;
            let b = eval(r, cx)?;
            // Comparisons give shared booleans: no value is built on the hot path.
            let truth = match op {
                BinaryOp::Eq => equal(&a, &b, l, r),
                BinaryOp::Ne => !equal(&a, &b, l, r),
                BinaryOp::Lt | BinaryOp::Gt | BinaryOp::Le | BinaryOp::Ge => compare(*op, &a, &b)?,
                _ => return binary(*op, &a, &b, cx.budget).map(Cow::Owned),
            };
            Ok(Cow::Borrowed(if truth { &TRUE } else { &FALSE }))
        }
        Node::Matches(l, r, compiled) => matches(l, r, compiled.as_deref(), cx),
        Node::And(items) => all_true(items, cx),
        Node::Or(items) => any_true(items, cx),
        Node::Coalesce(l, r) => coalesce(l, r, cx),
        Node::Conditional(c, a, b) => conditional(c, a, b, cx),
        Node::Member {
            object,
            property,
            optional,
        } => member(object, property, *optional, cx),
        Node::Slice { object, from, to } => slice_node(object, from.as_deref(), to.as_deref(), cx),
        Node::Chain(inner) => match eval(inner, cx) {
            Err(Flow::NilChain) => Ok(Cow::Borrowed(&NIL)),
            other => other,
        },
        Node::Array(items) => array(items, cx),
        Node::Map(pairs) => map_literal(pairs, cx),
        Node::Call(f, args) => call(*f, args, cx),
        Node::Predicate(_) => Err(op_error(
            "a predicate can only be passed to a builtin".into(),
        )),
        Node::Let { name, value, body } => let_binding(name, value, body, cx),
    }
}

/// The Go slice type an array value has at run time, from the node that made it: Argo's
/// `result` is a `[]float64`, literals, `filter` and `map` build `[]interface {}`, `..` a
/// `[]int`, `split` a `[]string`. `reflect.DeepEqual` never equates slices of different types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SliceType {
    Floats,
    Anys,
    Strings,
    Ints,
    Unknown,
}

fn slice_type(node: &Node) -> SliceType {
    match node {
        Node::Result => SliceType::Floats,
        Node::Slice { object, .. } | Node::Chain(object) => slice_type(object),
        Node::Literal(Value::Array(_)) | Node::Array(_) => SliceType::Anys,
        Node::Call(Function::Filter | Function::Map | Function::Keys | Function::Values, _) => {
            SliceType::Anys
        }
        Node::Call(Function::Take, args) => args.first().map_or(SliceType::Unknown, slice_type),
        Node::Binary(BinaryOp::Range, _, _) => SliceType::Ints,
        // strings.Split gives a []string.
        Node::Call(Function::Split, _) => SliceType::Strings,
        _ => SliceType::Unknown,
    }
}

/// `a == b` with the nodes that gave the values: arrays compare as Go's `reflect.DeepEqual`
/// compares slices (same type, and the very same slice is equal to itself even holding NaN).
fn equal(a: &Value, b: &Value, l: &Node, r: &Node) -> bool {
    let (Value::Array(x), Value::Array(y)) = (a, b) else {
        return go_equal(a, b);
    };
    let (tl, tr) = (slice_type(l), slice_type(r));
    if tl != tr && tl != SliceType::Unknown && tr != SliceType::Unknown {
        return false;
    }
    if tl == SliceType::Floats
        && tr == SliceType::Floats
        && std::ptr::eq(x.as_slice(), y.as_slice())
    {
        return true;
    }
    go_equal(a, b)
}

fn variable<'a>(name: &str, cx: &Ctx<'a>) -> Eval<'a> {
    let mut var = cx.vars;
    while let Some(v) = var {
        if v.name == name {
            return Ok(Cow::Borrowed(v.value));
        }
        var = v.next;
    }
    Err(op_error(format!("unknown variable `{name}`")))
}

fn pointer<'a>(node: &Node, cx: &Ctx<'a>) -> Eval<'a> {
    match (node, cx.pointer) {
        (Node::PointerIndex, Some((_, i))) => Ok(Cow::Owned(Value::Int(int_of_len(i)))),
        (_, Some((item, _))) => Ok(Cow::Borrowed(item)),
        (_, None) => Err(op_error("`#` used outside a predicate".into())),
    }
}

fn unary<'a>(op: UnaryOp, operand: &'a Node, cx: &Ctx<'a>) -> Eval<'a> {
    let v = eval(operand, cx)?;
    let out = match (op, &*v) {
        (UnaryOp::Not, v) => Value::Bool(!want_bool(v, "`not`")?),
        (UnaryOp::Neg, Value::Int(i)) => Value::Int(i.wrapping_neg()),
        (UnaryOp::Neg, Value::Float(x)) => Value::Float(-x),
        (UnaryOp::Plus, Value::Int(_) | Value::Float(_)) => return Ok(v),
        (UnaryOp::Neg | UnaryOp::Plus, other) => {
            let sym = if op == UnaryOp::Neg { "-" } else { "+" };
            return Err(op_error(format!(
                "invalid operation: {sym}{}",
                other.type_name()
            )));
        }
    };
    Ok(Cow::Owned(out))
}

fn matches<'a>(l: &'a Node, r: &'a Node, compiled: Option<&Regex>, cx: &Ctx<'a>) -> Eval<'a> {
    let a = eval(l, cx)?;
    let b = eval(r, cx)?;
    let (Value::String(text), Value::String(pattern)) = (&*a, &*b) else {
        return Err(op_error(format!(
            "invalid operation: {} matches {}",
            a.type_name(),
            b.type_name()
        )));
    };
    let hit = match compiled {
        Some(re) => re.is_match(text),
        None => Regex::new(pattern)
            .map_err(|message| {
                Flow::from(ConditionError::Regex {
                    pattern: pattern.clone(),
                    message,
                })
            })?
            .is_match(text),
    };
    Ok(Cow::Borrowed(if hit { &TRUE } else { &FALSE }))
}

fn all_true<'a>(items: &'a [Node], cx: &Ctx<'a>) -> Eval<'a> {
    for item in items {
        if !want_bool(&*eval(item, cx)?, "`&&`")? {
            return Ok(Cow::Borrowed(&FALSE));
        }
    }
    Ok(Cow::Borrowed(&TRUE))
}

fn any_true<'a>(items: &'a [Node], cx: &Ctx<'a>) -> Eval<'a> {
    for item in items {
        if want_bool(&*eval(item, cx)?, "`||`")? {
            return Ok(Cow::Borrowed(&TRUE));
        }
    }
    Ok(Cow::Borrowed(&FALSE))
}

fn coalesce<'a>(l: &'a Node, r: &'a Node, cx: &Ctx<'a>) -> Eval<'a> {
    let a = eval(l, cx)?;
    if matches!(*a, Value::Nil) {
        eval(r, cx)
    } else {
        Ok(a)
    }
}

fn conditional<'a>(c: &'a Node, yes: &'a Node, no: &'a Node, cx: &Ctx<'a>) -> Eval<'a> {
    if want_bool(&*eval(c, cx)?, "the condition of `?:`")? {
        eval(yes, cx)
    } else {
        eval(no, cx)
    }
}

fn member<'a>(object: &'a Node, property: &'a Node, optional: bool, cx: &Ctx<'a>) -> Eval<'a> {
    let obj = eval(object, cx)?;
    if optional && matches!(*obj, Value::Nil) {
        return Err(Flow::NilChain);
    }
    let key = eval(property, cx)?;
    match obj {
        Cow::Borrowed(o) => fetch(o, &key),
        Cow::Owned(o) => fetch(&o, &key).map(|v| Cow::Owned(v.into_owned())),
    }
}

fn slice_node<'a>(
    object: &'a Node,
    from: Option<&'a Node>,
    to: Option<&'a Node>,
    cx: &Ctx<'a>,
) -> Eval<'a> {
    let obj = eval(object, cx)?;
    let from = from.map(|n| eval(n, cx)).transpose()?;
    let to = to.map(|n| eval(n, cx)).transpose()?;
    slice(&obj, from.as_deref(), to.as_deref(), cx.budget).map(Cow::Owned)
}

fn array<'a>(items: &'a [Node], cx: &Ctx<'a>) -> Eval<'a> {
    cx.budget.charge(items.len())?;
    let values = items
        .iter()
        .map(|n| cx.budget.own(eval(n, cx)?))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Cow::Owned(Value::Array(values)))
}

fn map_literal<'a>(pairs: &'a [(Node, Node)], cx: &Ctx<'a>) -> Eval<'a> {
    cx.budget.charge(pairs.len())?;
    let mut map = std::collections::BTreeMap::new();
    for (k, v) in pairs {
        let key = match cx.budget.own(eval(k, cx)?)? {
            Value::String(s) => s,
            other => {
                return Err(op_error(format!(
                    "map keys must be strings, got {}",
                    other.type_name()
                )))
            }
        };
        let value = cx.budget.own(eval(v, cx)?)?;
        // expr's OpMap pops the pairs last to first, so a repeated key keeps its first value.
        map.entry(key).or_insert(value);
    }
    Ok(Cow::Owned(Value::Map(map)))
}

fn call<'a>(f: Function, args: &'a [Node], cx: &Ctx<'a>) -> Eval<'a> {
    if f.predicate_args().is_some() {
        return predicate_call(f, args, cx);
    }
    match args {
        [] => apply(f, &[], cx.result, cx.budget),
        [a] => {
            let a = eval(a, cx)?;
            apply(f, std::slice::from_ref(&a), cx.result, cx.budget)
        }
        [a, b] => {
            let pair = [eval(a, cx)?, eval(b, cx)?];
            apply(f, &pair, cx.result, cx.budget)
        }
        many => {
            let values = many
                .iter()
                .map(|n| eval(n, cx))
                .collect::<Result<Vec<_>, _>>()?;
            apply(f, &values, cx.result, cx.budget)
        }
    }
}

fn let_binding<'a>(name: &'a str, value: &'a Node, body: &'a Node, cx: &Ctx<'a>) -> Eval<'a> {
    let v = eval(value, cx)?;
    let var = Var {
        name,
        value: &v,
        next: cx.vars,
    };
    let inner = Ctx {
        result: cx.result,
        pointer: cx.pointer,
        vars: Some(&var),
        budget: cx.budget,
    };
    let out = cx.budget.own(eval(body, &inner)?)?;
    Ok(Cow::Owned(out))
}

/// An index as an i64: ints as they are, floats truncated (as Go's `ToInt`).
fn index_of(v: &Value) -> Result<i64, Flow> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::Float(x) => float_to_int("index", *x).map_err(Flow::from),
        other => Err(op_error(format!(
            "cannot use {} as an index",
            other.type_name()
        ))),
    }
}

/// Resolves a possibly negative index against `len`.
fn resolve(index: i64, len: usize) -> Result<usize, Flow> {
    let at = if index < 0 {
        index.checked_add(int_of_len(len))
    } else {
        Some(index)
    };
    at.and_then(|i| usize::try_from(i).ok())
        .filter(|i| *i < len)
        .ok_or_else(|| Flow::from(ConditionError::IndexOutOfRange { index, length: len }))
}

/// `obj[key]` / `obj.key`, as expr's `Fetch`.
fn fetch<'v>(obj: &'v Value, key: &Value) -> Eval<'v> {
    match obj {
        Value::Array(items) => {
            let i = resolve(index_of(key)?, items.len())?;
            items
                .get(i)
                .map(Cow::Borrowed)
                .ok_or_else(|| op_error("index out of range".into()))
        }
        Value::String(s) => {
            // Go indexes strings by byte and yields the byte's value.
            let i = resolve(index_of(key)?, s.len())?;
            let byte = s.as_bytes().get(i).copied().unwrap_or(0);
            Ok(Cow::Owned(Value::Int(i64::from(byte))))
        }
        Value::Map(map) => match key {
            Value::String(k) => Ok(Cow::Borrowed(map.get(k).unwrap_or(&NIL))),
            other => Err(op_error(format!(
                "cannot use {} as a map key",
                other.type_name()
            ))),
        },
        other => Err(op_error(format!(
            "cannot fetch {} from {}",
            preview(key),
            other.type_name()
        ))),
    }
}

/// `obj[from:to]` with Go's clamping of out-of-range bounds.
fn slice(
    obj: &Value,
    from: Option<&Value>,
    to: Option<&Value>,
    budget: &Budget,
) -> Result<Value, Flow> {
    let len = match obj {
        Value::Array(a) => a.len(),
        Value::String(s) => s.len(),
        other => return Err(op_error(format!("cannot slice {}", other.type_name()))),
    };
    let bound = |v: Option<&Value>, default: usize| -> Result<usize, Flow> {
        let Some(v) = v else { return Ok(default) };
        let mut i = index_of(v)?;
        if i < 0 {
            i = i.saturating_add(int_of_len(len));
        }
        Ok(usize::try_from(i.max(0)).unwrap_or(0).min(len))
    };
    let b = bound(to, len)?;
    let a = bound(from, 0)?.min(b);
    match obj {
        Value::Array(items) => {
            let part = items.get(a..b).unwrap_or_default();
            budget.charge_copies(part)?;
            Ok(Value::Array(part.to_vec()))
        }
        Value::String(s) => {
            let bytes = s.as_bytes().get(a..b).unwrap_or_default();
            budget.charge_string(bytes.len())?;
            Ok(Value::String(String::from_utf8_lossy(bytes).into_owned()))
        }
        _ => Ok(Value::Nil),
    }
}

/// Numeric comparison across int and float; NaN compares false.
fn compare(op: BinaryOp, a: &Value, b: &Value) -> Result<bool, Flow> {
    use std::cmp::Ordering::*;
    let ord = match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => x.partial_cmp(&y),
            _ => {
                return Err(op_error(format!(
                    "invalid operation: {} {} {}",
                    a.type_name(),
                    op.symbol(),
                    b.type_name()
                )))
            }
        },
    };
    let Some(ord) = ord else { return Ok(false) };
    Ok(match op {
        BinaryOp::Lt => ord == Less,
        BinaryOp::Gt => ord == Greater,
        BinaryOp::Le => ord != Greater,
        _ => ord != Less,
    })
}

fn binary(op: BinaryOp, a: &Value, b: &Value, budget: &Budget) -> Result<Value, Flow> {
    let mismatch = || {
        op_error(format!(
            "invalid operation: {} {} {}",
            a.type_name(),
            op.symbol(),
            b.type_name()
        ))
    };
    Ok(match op {
        BinaryOp::Eq => Value::Bool(go_equal(a, b)),
        BinaryOp::Ne => Value::Bool(!go_equal(a, b)),
        BinaryOp::Lt | BinaryOp::Gt | BinaryOp::Le | BinaryOp::Ge => {
            Value::Bool(compare(op, a, b)?)
        }
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => match (a, b) {
            (Value::Int(x), Value::Int(y)) => Value::Int(match op {
                BinaryOp::Add => x.wrapping_add(*y),
                BinaryOp::Sub => x.wrapping_sub(*y),
                _ => x.wrapping_mul(*y),
            }),
            (Value::String(x), Value::String(y)) if op == BinaryOp::Add => {
                budget.charge_string(x.len() + y.len())?;
                Value::String(format!("{x}{y}"))
            }
            _ => {
                let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) else {
                    return Err(mismatch());
                };
                Value::Float(match op {
                    BinaryOp::Add => x + y,
                    BinaryOp::Sub => x - y,
                    _ => x * y,
                })
            }
        },
        BinaryOp::Div => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => Value::Float(x / y),
            _ => return Err(mismatch()),
        },
        BinaryOp::Pow => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => Value::Float(x.powf(y)),
            _ => return Err(mismatch()),
        },
        BinaryOp::Mod => match (a, b) {
            (Value::Int(_), Value::Int(0)) => {
                return Err(Flow::from(ConditionError::DivisionByZero))
            }
            (Value::Int(x), Value::Int(y)) => Value::Int(x.wrapping_rem(*y)),
            _ => return Err(mismatch()),
        },
        BinaryOp::Range => match (a, b) {
            (Value::Int(lo), Value::Int(hi)) => {
                let size = (i128::from(*hi) - i128::from(*lo) + 1).max(0);
                let size = usize::try_from(size).unwrap_or(usize::MAX);
                budget.charge(size)?;
                Value::Array((*lo..=*hi).map(Value::Int).collect())
            }
            _ => return Err(mismatch()),
        },
        BinaryOp::In => Value::Bool(match b {
            Value::Array(items) => items.iter().any(|x| go_equal(x, a)),
            Value::Map(m) => match a {
                Value::String(k) => m.contains_key(k),
                // Go looks a nil needle up as the key type's zero value.
                Value::Nil => m.contains_key(""),
                other => {
                    return Err(op_error(format!(
                        "cannot use {} as a map key",
                        other.type_name()
                    )))
                }
            },
            Value::Nil => false,
            other => {
                return Err(op_error(format!(
                    "operator `in` not defined on {}",
                    other.type_name()
                )))
            }
        }),
        BinaryOp::Contains | BinaryOp::StartsWith | BinaryOp::EndsWith => match (a, b) {
            (Value::String(x), Value::String(y)) => Value::Bool(match op {
                BinaryOp::Contains => x.contains(y.as_str()),
                BinaryOp::StartsWith => x.starts_with(y.as_str()),
                _ => x.ends_with(y.as_str()),
            }),
            _ => return Err(mismatch()),
        },
    })
}

/// The predicate builtins: `all`, `any`, `filter`, `map`, `count`, `sum`, `find`, ...
fn predicate_call<'a>(f: Function, args: &'a [Node], cx: &Ctx<'a>) -> Eval<'a> {
    let (list, pred) = match args {
        [list] => (list, None),
        [list, Node::Predicate(p)] => (list, Some(&**p)),
        _ => {
            return Err(op_error(format!(
                "{}() called with a bad argument list",
                f.name()
            )))
        }
    };
    let list = eval(list, cx)?;
    let Value::Array(items) = &*list else {
        return Err(Flow::from(ConditionError::Function {
            function: f.name(),
            message: format!("expected an array, got {}", list.type_name()),
        }));
    };
    // Runs the predicate on one element (or takes the element itself for `count`/`sum`
    // without a predicate) and hands the outcome to `f` without copying it.
    let with_outcome =
        |i: usize, item: &Value, f: &mut dyn FnMut(Cow<'_, Value>) -> Result<(), Flow>| {
            let Some(pred) = pred else {
                return f(Cow::Borrowed(item));
            };
            cx.budget.step()?;
            let inner = Ctx {
                result: cx.result,
                pointer: Some((item, i)),
                vars: cx.vars,
                budget: cx.budget,
            };
            f(eval(pred, &inner)?)
        };
    let test = |i: usize, item: &Value| -> Result<bool, Flow> {
        let mut outcome = false;
        with_outcome(i, item, &mut |v| match &*v {
            Value::Bool(b) => {
                outcome = *b;
                Ok(())
            }
            other => Err(Flow::from(ConditionError::Function {
                function: f.name(),
                message: format!(
                    "the predicate must give a boolean, got {} `{}`",
                    other.type_name(),
                    preview(other)
                ),
            })),
        })?;
        Ok(outcome)
    };
    let run = |i: usize, item: &Value| -> Result<Value, Flow> {
        let mut out = Value::Nil;
        with_outcome(i, item, &mut |v| {
            out = cx.budget.own(v)?;
            Ok(())
        })?;
        Ok(out)
    };
    let out = match f {
        Function::All | Function::Any | Function::None => {
            let stop_on = f != Function::All;
            let mut hit = false;
            for (i, item) in items.iter().enumerate() {
                if test(i, item)? == stop_on {
                    hit = true;
                    break;
                }
            }
            Value::Bool(match f {
                Function::All => !hit,
                Function::Any => hit,
                _ => !hit,
            })
        }
        Function::One => {
            let mut n = 0;
            for (i, item) in items.iter().enumerate() {
                if test(i, item)? {
                    n += 1;
                    if n > 1 {
                        break;
                    }
                }
            }
            Value::Bool(n == 1)
        }
        Function::Count => {
            let mut n = 0i64;
            for (i, item) in items.iter().enumerate() {
                if test(i, item)? {
                    n += 1;
                }
            }
            Value::Int(n)
        }
        Function::Filter => {
            let mut kept = Vec::new();
            for (i, item) in items.iter().enumerate() {
                if test(i, item)? {
                    cx.budget.charge(weight(item))?;
                    kept.push(item.clone());
                }
            }
            Value::Array(kept)
        }
        Function::Map => {
            let mapped = items
                .iter()
                .enumerate()
                .map(|(i, item)| run(i, item))
                .collect::<Result<Vec<_>, _>>()?;
            Value::Array(mapped)
        }
        Function::Sum => {
            let mut int_total = 0i64;
            let mut float_total = 0.0f64;
            let mut is_float = false;
            for (i, item) in items.iter().enumerate() {
                match run(i, item)? {
                    Value::Int(x) => int_total = int_total.wrapping_add(x),
                    Value::Float(x) => {
                        is_float = true;
                        float_total += x;
                    }
                    other => {
                        return Err(Flow::from(ConditionError::Function {
                            function: "sum",
                            message: format!("cannot add {}", other.type_name()),
                        }))
                    }
                }
            }
            if is_float {
                Value::Float(float_total + int_total as f64)
            } else {
                Value::Int(int_total)
            }
        }
        Function::Find | Function::FindIndex => {
            let mut found = None;
            for (i, item) in items.iter().enumerate() {
                if test(i, item)? {
                    found = Some((i, item));
                    break;
                }
            }
            found_value(f == Function::FindIndex, found)
        }
        Function::FindLast | Function::FindLastIndex => {
            let mut found = None;
            for (i, item) in items.iter().enumerate().rev() {
                if test(i, item)? {
                    found = Some((i, item));
                    break;
                }
            }
            found_value(f == Function::FindLastIndex, found)
        }
        _ => {
            return Err(op_error(format!(
                "{}() is not a predicate builtin",
                f.name()
            )))
        }
    };
    Ok(Cow::Owned(out))
}

/// `find` gives the element or nil, `findIndex` the index or -1.
fn found_value(index: bool, found: Option<(usize, &Value)>) -> Value {
    match (index, found) {
        (true, Some((i, _))) => Value::Int(int_of_len(i)),
        (true, None) => Value::Int(-1),
        (false, Some((_, v))) => v.clone(),
        (false, None) => Value::Nil,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_allows_exactly_the_limit() {
        let b = Budget::default();
        assert!(b.charge(ALLOC_LIMIT as usize).is_ok());
        assert!(b.charge(1).is_err());
        let b = Budget::default();
        assert!(b.charge(usize::MAX).is_err());
    }

    #[test]
    fn owning_a_borrowed_value_is_charged_by_size() {
        let b = Budget::default();
        let big = Value::from(vec![1.0; 1000]);
        assert_eq!(b.own(Cow::Borrowed(&big)).unwrap(), big);
        assert_eq!(b.alloc.get(), 1001);
        b.own(Cow::Owned(big)).unwrap();
        assert_eq!(b.alloc.get(), 1001, "moving an owned value is free");
    }

    #[test]
    fn negative_indexes_count_from_the_end() {
        assert_eq!(resolve(-1, 3).unwrap(), 2);
        assert_eq!(resolve(0, 3).unwrap(), 0);
        assert!(resolve(3, 3).is_err());
        assert!(resolve(-4, 3).is_err());
        assert!(resolve(i64::MIN, 3).is_err());
        assert!(resolve(0, 0).is_err());
    }

    #[test]
    fn slices_clamp_like_go() {
        let b = Budget::default();
        let a = Value::from(vec![1i64, 2, 3]);
        let s = |from: Option<i64>, to: Option<i64>| {
            let (f, t) = (from.map(Value::Int), to.map(Value::Int));
            slice(&a, f.as_ref(), t.as_ref(), &b).unwrap()
        };
        assert_eq!(s(Some(-100), Some(100)), a);
        assert_eq!(s(Some(2), Some(1)), Value::Array(vec![]));
        assert_eq!(s(None, Some(-1)), Value::from(vec![1i64, 2]));
        let text = Value::from("héllo");
        // Go slices strings by byte; a cut inside a character is replaced, not a panic.
        let cut = slice(&text, Some(&Value::Int(0)), Some(&Value::Int(2)), &b).unwrap();
        assert_eq!(cut, Value::from("h\u{fffd}"));
    }

    #[test]
    fn comparisons_reject_mixed_kinds() {
        assert!(compare(BinaryOp::Lt, &Value::Int(1), &Value::Float(1.5)).unwrap());
        assert!(!compare(BinaryOp::Ge, &Value::Float(f64::NAN), &Value::Int(0)).unwrap());
        assert!(compare(BinaryOp::Lt, &Value::from("a"), &Value::Int(1)).is_err());
        assert!(compare(BinaryOp::Lt, &Value::Nil, &Value::Nil).is_err());
    }
}
