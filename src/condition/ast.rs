//! The compiled form of a condition: a tree evaluated many times without re-parsing.

use super::functions::Function;
use super::regex::Regex;
use super::value::Value;

/// One node of the syntax tree.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Literal(Value),
    /// The `result` variable.
    Result,
    /// A name bound with `let`.
    Variable(String),
    /// `#`: the current element inside a predicate.
    Pointer,
    /// `#index`: the current element's index inside a predicate.
    PointerIndex,
    Unary(UnaryOp, Box<Node>),
    Binary(BinaryOp, Box<Node>, Box<Node>),
    /// `a matches b`, with the pattern compiled once when it is a literal.
    Matches(Box<Node>, Box<Node>, Option<Box<Regex>>),
    /// `a && b && ...`, flattened so long chains stay shallow.
    And(Vec<Node>),
    /// `a || b || ...`, flattened likewise.
    Or(Vec<Node>),
    /// `a ?? b`
    Coalesce(Box<Node>, Box<Node>),
    /// `c ? a : b`
    Conditional(Box<Node>, Box<Node>, Box<Node>),
    /// `a.b`, `a[i]`, `a?.b`, `a?.[i]`
    Member {
        object: Box<Node>,
        property: Box<Node>,
        optional: bool,
    },
    /// `a[from:to]`
    Slice {
        object: Box<Node>,
        from: Option<Box<Node>>,
        to: Option<Box<Node>>,
    },
    /// A member chain containing `?.`: a nil before `?.` makes the whole chain nil.
    Chain(Box<Node>),
    Array(Vec<Node>),
    Map(Vec<(Node, Node)>),
    /// A builtin call; predicate arguments are `Node::Predicate`.
    Call(Function, Vec<Node>),
    /// A predicate closure (`{# > 0}` or a bare `# > 0`) passed to a builtin.
    Predicate(Box<Node>),
    /// `let name = value; body`
    Let {
        name: String,
        value: Box<Node>,
        body: Box<Node>,
    },
}

/// Prefix operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnaryOp {
    Not,
    Neg,
    Plus,
}

/// Binary operators evaluated eagerly on both operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryOp {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Range,
    In,
    Contains,
    StartsWith,
    EndsWith,
}

impl BinaryOp {
    /// The operator as written in the source.
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Gt => ">",
            BinaryOp::Le => "<=",
            BinaryOp::Ge => ">=",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::Pow => "**",
            BinaryOp::Range => "..",
            BinaryOp::In => "in",
            BinaryOp::Contains => "contains",
            BinaryOp::StartsWith => "startsWith",
            BinaryOp::EndsWith => "endsWith",
        }
    }
}
