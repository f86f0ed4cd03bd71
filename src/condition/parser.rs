//! Builds the syntax tree from tokens with expr's grammar, precedences and checks.

use super::ast::{BinaryOp, Node, UnaryOp};
use super::error::{ConditionError, Position};
use super::functions::{Arg, Function};
use super::lexer::{tokenize, Kind, Token};
use super::regex::Regex;
use super::value::Value;

/// Deepest nesting (of the tree and of the parser's recursion) a condition may have; keeps
/// both parsing and evaluation far from the end of a thread's stack.
pub(crate) const MAX_DEPTH: usize = 100;
/// Most nodes a condition may have (expr's default limit).
pub(crate) const MAX_NODES: usize = 10_000;

/// Parses `source` into a tree, checking names and argument counts.
pub(crate) fn parse(source: &str) -> Result<Node, ConditionError> {
    let tokens = tokenize(source)?;
    let eof = Token {
        kind: Kind::Eof,
        value: String::new(),
        offset: source.len(),
    };
    let mut parser = Parser {
        source,
        tokens,
        eof,
        pos: 0,
        depth: 0,
        nodes: 0,
        predicate_depth: 0,
        scopes: Vec::new(),
    };
    let root = parser.sequence().map_err(|e| *e)?;
    if parser.current().kind != Kind::Eof {
        let tok = parser.current().clone();
        return Err(*parser.unexpected(&tok));
    }
    Ok(root.node)
}

/// A node with the height of its subtree.
struct Expr {
    node: Node,
    height: usize,
}

/// Errors are boxed so results stay small: the parser recurses, and in debug builds every
/// temporary takes stack space.
type PError = Box<ConditionError>;
type Parsed = Result<Expr, PError>;

struct Parser<'s> {
    source: &'s str,
    tokens: Vec<Token>,
    /// Returned past the end (the lexer always ends with Eof, so this is only a fallback).
    eof: Token,
    pos: usize,
    depth: usize,
    nodes: usize,
    predicate_depth: usize,
    /// Names bound by enclosing `let`s.
    scopes: Vec<String>,
}

/// A binary operator just consumed by the parser.
#[derive(Debug, Clone, Copy)]
struct BinaryToken {
    symbol: &'static str,
    precedence: u8,
    right_assoc: bool,
    /// Preceded by `not` (`not in`, `not matches`, ...).
    negate: bool,
    offset: usize,
}

/// expr's binary operators: the symbol, its precedence and whether it is right-associative.
const BINARY: &[(&str, u8, bool)] = &[
    ("|", 0, false),
    ("or", 10, false),
    ("||", 10, false),
    ("and", 15, false),
    ("&&", 15, false),
    ("==", 20, false),
    ("!=", 20, false),
    ("<", 20, false),
    (">", 20, false),
    (">=", 20, false),
    ("<=", 20, false),
    ("in", 20, false),
    ("matches", 20, false),
    ("contains", 20, false),
    ("startsWith", 20, false),
    ("endsWith", 20, false),
    ("..", 25, false),
    ("+", 30, false),
    ("-", 30, false),
    ("*", 60, false),
    ("/", 60, false),
    ("%", 60, false),
    ("**", 100, true),
    ("^", 100, true),
    ("??", 200, false),
];

fn binary_info(op: &str) -> Option<(&'static str, u8, bool)> {
    BINARY.iter().find(|(s, _, _)| *s == op).copied()
}

fn unary_info(op: &str) -> Option<(u8, UnaryOp)> {
    Some(match op {
        "not" | "!" => (50, UnaryOp::Not),
        "-" => (90, UnaryOp::Neg),
        "+" => (90, UnaryOp::Plus),
        _ => return None,
    })
}

/// Operators a `not` may precede: expr v1.15.5 negates any binary operator written after
/// `not` (`a not in b`, and also `a not == b`), except the pipe, where it drops the `not`.
fn negatable(op: &str) -> bool {
    op != "|" && binary_info(op).is_some()
}

fn is_identifier_word(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c == '$' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c == '$' || c.is_alphanumeric())
}

impl Parser<'_> {
    fn current(&self) -> &Token {
        self.tokens.get(self.pos).unwrap_or(&self.eof)
    }

    fn peek(&self, n: usize) -> Option<&Token> {
        self.tokens.get(self.pos + n)
    }

    fn advance(&mut self) {
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
    }

    fn position(&self, offset: usize) -> Position {
        Position::at(self.source, offset)
    }

    fn syntax(&self, offset: usize, message: &str) -> PError {
        self.syntax_with(offset, || message.to_owned())
    }

    /// A syntax error whose message is built only when needed (the closure keeps the
    /// formatting out of the recursive functions' stack frames).
    #[cold]
    #[inline(never)]
    fn syntax_with(&self, offset: usize, message: impl FnOnce() -> String) -> PError {
        Box::new(ConditionError::Syntax {
            message: message(),
            position: self.position(offset),
        })
    }

    #[cold]
    #[inline(never)]
    fn unexpected(&self, tok: &Token) -> PError {
        if tok.kind == Kind::Eof {
            self.syntax(tok.offset, "unexpected end of expression")
        } else {
            self.syntax_with(tok.offset, || {
                format!("unexpected token {}", tok.describe())
            })
        }
    }

    fn expect(&mut self, kind: Kind, value: &str) -> Result<(), PError> {
        if self.current().is(kind, value) {
            self.advance();
            Ok(())
        } else {
            Err(self.expected(value))
        }
    }

    #[cold]
    #[inline(never)]
    fn expected(&self, value: &str) -> PError {
        let tok = self.current();
        match tok.kind {
            Kind::Eof => self.syntax_with(tok.offset, || {
                format!("expected `{value}` but the expression ended")
            }),
            _ => self.syntax_with(tok.offset, || {
                format!("expected `{value}`, found {}", tok.describe())
            }),
        }
    }

    /// expr v1.15.5 consumes a `not` that follows an operand of a tighter operator
    /// (`a * 1 not in [2]`) and then drops it: Argo evaluates `a * 1 in [2]`. rollgate refuses
    /// instead of silently inverting the condition.
    #[cold]
    #[inline(never)]
    fn dropped_not(&self, offset: usize, symbol: &str) -> PError {
        self.syntax_with(offset, || {
            format!(
                "`not {symbol}` here would be read by Argo v1.9.1 (expr 1.15.5) as `{symbol}`, without `not`; put the left side in parentheses"
            )
        })
    }

    #[cold]
    #[inline(never)]
    fn too_deep(&self, offset: usize) -> PError {
        Box::new(ConditionError::TooDeep {
            limit: MAX_DEPTH,
            position: self.position(offset),
        })
    }

    /// Wraps `node`, counting it and checking the height of the tree.
    fn make(&mut self, node: Node, children: &[usize], offset: usize) -> Parsed {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(Box::new(ConditionError::TooLarge { limit: MAX_NODES }));
        }
        let height = 1 + children.iter().copied().max().unwrap_or(0);
        if height > MAX_DEPTH {
            return Err(self.too_deep(offset));
        }
        Ok(Expr { node, height })
    }

    fn leaf(&mut self, node: Node, offset: usize) -> Parsed {
        self.make(node, &[], offset)
    }

    /// A whole expression (the source, a parenthesized one, a predicate body). expr 1.15.5
    /// (Argo v1.9.1) has no `a; b` sequences: `;` only ends the value of a `let`.
    fn sequence(&mut self) -> Parsed {
        let expr = self.expression(0)?;
        if self.current().is_op(";") {
            return Err(self.syntax(
                self.current().offset,
                "`;` is only allowed after `let name = value` in Argo v1.9.1's expr (1.15.5)",
            ));
        }
        Ok(expr)
    }

    fn expression(&mut self, precedence: u8) -> Parsed {
        self.depth += 1;
        let result = self.expression_inner(precedence);
        self.depth -= 1;
        result
    }

    fn expression_inner(&mut self, precedence: u8) -> Parsed {
        let start = self.current().offset;
        if self.depth > MAX_DEPTH {
            return Err(self.too_deep(start));
        }
        if precedence == 0 && self.current().is_op("let") {
            return self.let_binding();
        }
        if precedence == 0 && self.current().is_op("if") {
            return Err(self.syntax(
                start,
                "`if { } else { }` is not in Argo v1.9.1's expr (1.15.5); use `condition ? a : b`",
            ));
        }
        let mut left = self.primary()?;
        let mut previous: Option<&'static str> = None;
        while let Some(op) = self.binary_operator(precedence, previous)? {
            left = match op.symbol {
                "|" => self.pipe(left)?,
                _ => {
                    let right = self.expression(op.precedence + u8::from(!op.right_assoc))?;
                    let node = self.binary(op.symbol, left, right, op.offset)?;
                    if op.negate {
                        let h = node.height;
                        self.make(
                            Node::Unary(UnaryOp::Not, Box::new(node.node)),
                            &[h],
                            op.offset,
                        )?
                    } else {
                        node
                    }
                }
            };
            previous = Some(op.symbol);
        }
        if precedence == 0 {
            left = self.conditional(left)?;
        }
        Ok(left)
    }

    /// The binary operator at the cursor when it binds at `precedence` or tighter, consumed
    /// (with a leading `not` for `not in` and friends).
    fn binary_operator(
        &mut self,
        precedence: u8,
        previous: Option<&'static str>,
    ) -> Result<Option<BinaryToken>, PError> {
        let tok = self.current();
        if tok.kind != Kind::Operator {
            return Ok(None);
        }
        let offset = tok.offset;
        let mut negate = false;
        let mut symbol = tok.value.as_str();
        if symbol == "not" {
            match self.peek(1) {
                Some(next) if next.kind == Kind::Operator && negatable(&next.value) => {
                    symbol = next.value.as_str();
                    negate = true;
                }
                _ => return Err(self.unexpected(&self.current().clone())),
            }
        }
        let Some((symbol, op_precedence, right_assoc)) = binary_info(symbol) else {
            return Ok(None);
        };
        if op_precedence < precedence {
            if negate {
                return Err(self.dropped_not(offset, symbol));
            }
            return Ok(None);
        }
        if negate {
            self.advance();
        }
        self.advance();
        if previous == Some("??") && symbol != "??" {
            return Err(self.syntax_with(offset, || {
                format!("operator `{symbol}` and coalesce expressions (??) cannot be mixed; wrap either in parentheses")
            }));
        }
        Ok(Some(BinaryToken {
            symbol,
            precedence: op_precedence,
            right_assoc,
            negate,
            offset,
        }))
    }

    /// `left | f(args)` calls `f(left, args)`.
    fn pipe(&mut self, left: Expr) -> Parsed {
        let name = self.current().clone();
        if name.kind != Kind::Identifier {
            return Err(self.syntax(name.offset, "expected a function call after `|`"));
        }
        self.advance();
        let called = self.call(&name, vec![left])?;
        self.postfix(called)
    }

    fn binary(&mut self, op: &str, left: Expr, right: Expr, offset: usize) -> Parsed {
        let heights = [left.height, right.height];
        let (l, r) = (left.node, right.node);
        let node = match op {
            "||" | "or" | "&&" | "and" => {
                let is_and = matches!(op, "&&" | "and");
                // Flatten `a && b && c` into one node so long chains stay shallow.
                let [left_height, right_height] = heights;
                // The tallest child: a merged chain's children are one level below it.
                let (mut items, tallest) = match l {
                    Node::And(items) if is_and => (items, left_height.saturating_sub(1)),
                    Node::Or(items) if !is_and => (items, left_height.saturating_sub(1)),
                    other => (vec![other], left_height),
                };
                items.push(r);
                let height = tallest.max(right_height);
                let node = if is_and {
                    Node::And(items)
                } else {
                    Node::Or(items)
                };
                return self.make(node, &[height], offset);
            }
            "??" => Node::Coalesce(Box::new(l), Box::new(r)),
            "matches" => {
                let compiled = match &r {
                    Node::Literal(Value::String(pattern)) => {
                        Some(Box::new(Regex::new(pattern).map_err(|message| {
                            Box::new(ConditionError::Regex {
                                pattern: pattern.clone(),
                                message,
                            })
                        })?))
                    }
                    _ => None,
                };
                Node::Matches(Box::new(l), Box::new(r), compiled)
            }
            _ => {
                let op = match op {
                    "==" => BinaryOp::Eq,
                    "!=" => BinaryOp::Ne,
                    "<" => BinaryOp::Lt,
                    ">" => BinaryOp::Gt,
                    "<=" => BinaryOp::Le,
                    ">=" => BinaryOp::Ge,
                    "+" => BinaryOp::Add,
                    "-" => BinaryOp::Sub,
                    "*" => BinaryOp::Mul,
                    "/" => BinaryOp::Div,
                    "%" => BinaryOp::Mod,
                    "**" | "^" => BinaryOp::Pow,
                    ".." => BinaryOp::Range,
                    "in" => BinaryOp::In,
                    "contains" => BinaryOp::Contains,
                    "startsWith" => BinaryOp::StartsWith,
                    "endsWith" => BinaryOp::EndsWith,
                    other => {
                        return Err(
                            self.syntax_with(offset, || format!("unknown operator `{other}`"))
                        )
                    }
                };
                Node::Binary(op, Box::new(l), Box::new(r))
            }
        };
        self.make(node, &heights, offset)
    }

    fn conditional(&mut self, mut node: Expr) -> Parsed {
        while self.current().is_op("?") {
            let offset = self.current().offset;
            self.advance();
            let (yes, no) = if self.current().is_op(":") {
                // `a ?: b` gives a when it is true.
                self.advance();
                let yes = Expr {
                    node: node.node.clone(),
                    height: node.height,
                };
                (yes, self.expression(0)?)
            } else {
                let yes = self.expression(0)?;
                self.expect(Kind::Operator, ":")?;
                (yes, self.expression(0)?)
            };
            let heights = [node.height, yes.height, no.height];
            node = self.make(
                Node::Conditional(Box::new(node.node), Box::new(yes.node), Box::new(no.node)),
                &heights,
                offset,
            )?;
        }
        Ok(node)
    }

    fn let_binding(&mut self) -> Parsed {
        let offset = self.current().offset;
        self.advance();
        let name = self.current().clone();
        if name.kind != Kind::Identifier {
            return Err(self.syntax(name.offset, "expected a variable name after `let`"));
        }
        if name.value == "result" || Function::lookup(&name.value).is_some() {
            return Err(
                self.syntax_with(name.offset, || format!("cannot redeclare `{}`", name.value))
            );
        }
        self.advance();
        self.expect(Kind::Operator, "=")?;
        let value = self.expression(0)?;
        self.expect(Kind::Operator, ";")?;
        self.scopes.push(name.value.clone());
        let body = self.sequence();
        self.scopes.pop();
        let body = body?;
        let heights = [value.height, body.height];
        self.make(
            Node::Let {
                name: name.value,
                value: Box::new(value.node),
                body: Box::new(body.node),
            },
            &heights,
            offset,
        )
    }

    /// Prefix operators, parentheses and predicate pointers; everything else is `secondary`.
    /// Each case is its own function to keep this recursive frame small.
    fn primary(&mut self) -> Parsed {
        let tok = self.current();
        if tok.kind == Kind::Operator {
            if let Some((precedence, op)) = unary_info(&tok.value) {
                return self.prefix(precedence, op);
            }
            if tok.value == "#" || tok.value == "." {
                return self.pointer();
            }
        }
        if tok.is(Kind::Bracket, "(") {
            return self.parenthesized();
        }
        self.secondary()
    }

    fn prefix(&mut self, precedence: u8, op: UnaryOp) -> Parsed {
        let offset = self.current().offset;
        self.advance();
        let operand = self.expression(precedence)?;
        let h = operand.height;
        let node = self.make(Node::Unary(op, Box::new(operand.node)), &[h], offset)?;
        self.postfix(node)
    }

    fn parenthesized(&mut self) -> Parsed {
        self.advance();
        let inner = self.sequence()?;
        self.expect(Kind::Bracket, ")")?;
        self.postfix(inner)
    }

    /// `#`, `#index`, or a leading `.` (`.x` is `#.x`), only inside predicates.
    fn pointer(&mut self) -> Parsed {
        let tok = self.current().clone();
        if self.predicate_depth == 0 {
            return Err(self.syntax_with(tok.offset, || {
                format!(
                    "`{}` can only be used inside a predicate such as all(result, {{# > 0}})",
                    tok.value
                )
            }));
        }
        let mut node = Node::Pointer;
        if tok.value == "#" {
            self.advance();
            let name = self.current().clone();
            if name.kind == Kind::Identifier && name.offset == tok.offset + 1 {
                self.advance();
                node = match name.value.as_str() {
                    "index" => Node::PointerIndex,
                    other => {
                        return Err(self.syntax_with(tok.offset, || {
                            format!("`#{other}` is not supported (only `#` and `#index`)")
                        }))
                    }
                };
            }
        }
        let node = self.leaf(node, tok.offset)?;
        self.postfix(node)
    }

    fn secondary(&mut self) -> Parsed {
        let tok = self.current();
        let (kind, offset) = (tok.kind, tok.offset);
        let node = match kind {
            Kind::Identifier => return self.name(),
            Kind::Number => {
                let tok = tok.clone();
                self.advance();
                let value = self.number(&tok)?;
                return self.leaf(Node::Literal(value), offset);
            }
            // As with numbers, expr 1.15.5 takes no `[i]`, `[a:b]` or `.x` after a string
            // literal (`parser.go` parseSecondary returns before parsePostfixExpression).
            Kind::String => {
                let value = Value::String(tok.value.clone());
                self.advance();
                return self.leaf(Node::Literal(value), offset);
            }
            Kind::Bracket if tok.value == "[" => self.array()?,
            Kind::Bracket if tok.value == "{" => self.map()?,
            _ => return Err(self.unexpected(&tok.clone())),
        };
        self.postfix(node)
    }

    /// An identifier: a literal word, a call, or a variable.
    fn name(&mut self) -> Parsed {
        let tok = self.current().clone();
        self.advance();
        let node = match tok.value.as_str() {
            "true" => return self.leaf(Node::Literal(Value::Bool(true)), tok.offset),
            "false" => return self.leaf(Node::Literal(Value::Bool(false)), tok.offset),
            "nil" => return self.leaf(Node::Literal(Value::Nil), tok.offset),
            _ if self.current().is(Kind::Bracket, "(") => self.call(&tok, Vec::new())?,
            _ => self.identifier(&tok)?,
        };
        self.postfix(node)
    }

    fn identifier(&mut self, tok: &Token) -> Parsed {
        let name = tok.value.as_str();
        if name == "result" {
            return self.leaf(Node::Result, tok.offset);
        }
        if self.scopes.iter().any(|s| s == name) {
            return self.leaf(Node::Variable(name.to_owned()), tok.offset);
        }
        if Function::lookup(name).is_some() {
            return Err(self.syntax_with(tok.offset, || {
                format!("`{name}` is a function; call it with arguments, e.g. {name}(result)")
            }));
        }
        Err(Box::new(ConditionError::UnknownName {
            name: name.to_owned(),
            position: self.position(tok.offset),
        }))
    }

    fn number(&self, tok: &Token) -> Result<Value, PError> {
        let text = tok.value.replace('_', "");
        let lower = text.to_ascii_lowercase();
        // expr 1.15.5 reads `0x` literals in base 16 and everything else in base 10, so `0o17`
        // and `0b101` are not numbers there.
        let radix = if text.starts_with("0x") {
            Some(16)
        } else if lower.starts_with("0x") || lower.starts_with("0o") || lower.starts_with("0b") {
            return Err(self.syntax_with(tok.offset, || {
                format!(
                    "invalid integer literal {} (Argo v1.9.1 reads only 0x prefixes)",
                    tok.value
                )
            }));
        } else {
            None
        };
        if let Some(radix) = radix {
            let digits = text.get(2..).unwrap_or_default();
            return i64::from_str_radix(digits, radix)
                .map(Value::Int)
                .map_err(|_| {
                    self.syntax_with(tok.offset, || {
                        format!("invalid integer literal {}", tok.value)
                    })
                });
        }
        if lower.contains('.') || lower.contains('e') {
            return match text.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(Value::Float(f)),
                _ => Err(self.syntax_with(tok.offset, || {
                    format!("invalid float literal {}", tok.value)
                })),
            };
        }
        text.parse::<i64>().map(Value::Int).map_err(|_| {
            self.syntax_with(tok.offset, || {
                format!("invalid integer literal {}", tok.value)
            })
        })
    }

    fn call(&mut self, name: &Token, mut args: Vec<Expr>) -> Parsed {
        let Some(function) = Function::lookup(&name.value) else {
            return Err(self.unknown_function(name));
        };
        match function.predicate_args() {
            Some(spec) => self.predicate_arguments(function, spec, name, &mut args)?,
            None => {
                self.arguments(&mut args)?;
                let (min, max, _) = function.arity();
                if args.len() < min || args.len() > max {
                    return Err(self.arity_error(function, name, args.len()));
                }
            }
        }
        let heights: Vec<usize> = args.iter().map(|a| a.height).collect();
        let nodes = args.into_iter().map(|a| a.node).collect();
        self.make(Node::Call(function, nodes), &heights, name.offset)
    }

    /// The arguments of `all`, `map`, ...: expressions and predicates in the builtin's layout.
    fn predicate_arguments(
        &mut self,
        function: Function,
        spec: &[Arg],
        name: &Token,
        args: &mut Vec<Expr>,
    ) -> Result<(), PError> {
        let given = args.len();
        let Some(rest) = spec.get(given..) else {
            return Err(self.arity_error(function, name, given));
        };
        self.expect(Kind::Bracket, "(")?;
        for (i, kind) in rest.iter().enumerate() {
            if self.current().is(Kind::Bracket, ")") {
                if *kind == Arg::OptionalPredicate {
                    break;
                }
                return Err(self.arity_error(function, name, args.len()));
            }
            if i > 0 {
                self.expect(Kind::Operator, ",")?;
            }
            let arg = match kind {
                Arg::Expr => self.expression(0)?,
                Arg::Predicate | Arg::OptionalPredicate => self.predicate()?,
            };
            args.push(arg);
        }
        if self.current().is_op(",") {
            self.advance();
        }
        if !self.current().is(Kind::Bracket, ")") {
            return Err(self.too_many_arguments(function, name, args.len()));
        }
        self.advance();
        Ok(())
    }

    /// Counts the surplus arguments of a predicate builtin for the error message.
    #[cold]
    #[inline(never)]
    fn too_many_arguments(&mut self, function: Function, name: &Token, parsed: usize) -> PError {
        let mut got = parsed + 1;
        while !self.current().is(Kind::Bracket, ")") && self.current().kind != Kind::Eof {
            got += usize::from(self.current().is_op(","));
            self.advance();
        }
        self.arity_error(function, name, got)
    }

    #[cold]
    #[inline(never)]
    fn unknown_function(&self, name: &Token) -> PError {
        if name.value == "result" || self.scopes.contains(&name.value) {
            return self.syntax_with(name.offset, || {
                format!("`{}` is not a function", name.value)
            });
        }
        Box::new(ConditionError::UnknownFunction {
            name: name.value.clone(),
            position: self.position(name.offset),
            hint: Function::unsupported_hint(&name.value),
        })
    }

    #[cold]
    #[inline(never)]
    fn arity_error(&self, function: Function, name: &Token, got: usize) -> PError {
        let (_, _, expected) = function.arity();
        Box::new(ConditionError::ArgumentCount {
            function: function.name(),
            expected,
            got,
            position: self.position(name.offset),
        })
    }

    fn arguments(&mut self, args: &mut Vec<Expr>) -> Result<(), PError> {
        let offset = args.len();
        self.expect(Kind::Bracket, "(")?;
        while !self.current().is(Kind::Bracket, ")") {
            if args.len() > offset {
                self.expect(Kind::Operator, ",")?;
            }
            if self.current().is(Kind::Bracket, ")") {
                break;
            }
            args.push(self.expression(0)?);
        }
        self.expect(Kind::Bracket, ")")
    }

    fn predicate(&mut self) -> Parsed {
        let offset = self.current().offset;
        let braces = self.current().is(Kind::Bracket, "{");
        if braces {
            self.advance();
        }
        self.predicate_depth += 1;
        let body = if braces {
            self.sequence()
        } else {
            self.expression(0)
        };
        self.predicate_depth -= 1;
        let body = body?;
        if braces {
            self.expect(Kind::Bracket, "}")?;
        } else if self.current().is_op(";") {
            return Err(self.syntax(
                self.current().offset,
                "wrap the predicate in braces { and }",
            ));
        }
        let h = body.height;
        self.make(Node::Predicate(Box::new(body.node)), &[h], offset)
    }

    fn array(&mut self) -> Parsed {
        let offset = self.current().offset;
        self.expect(Kind::Bracket, "[")?;
        let mut items: Vec<Expr> = Vec::new();
        while !self.current().is(Kind::Bracket, "]") {
            if !items.is_empty() {
                self.expect(Kind::Operator, ",")?;
                if self.current().is(Kind::Bracket, "]") {
                    break;
                }
            }
            items.push(self.expression(0)?);
        }
        self.expect(Kind::Bracket, "]")?;
        let heights: Vec<usize> = items.iter().map(|e| e.height).collect();
        let node = match items.iter().all(|e| matches!(e.node, Node::Literal(_))) {
            // A literal array is built once, at compile time.
            true => Node::Literal(Value::Array(
                items
                    .into_iter()
                    .map(|e| match e.node {
                        Node::Literal(v) => v,
                        _ => Value::Nil,
                    })
                    .collect(),
            )),
            false => Node::Array(items.into_iter().map(|e| e.node).collect()),
        };
        self.make(node, &heights, offset)
    }

    fn map(&mut self) -> Parsed {
        let offset = self.current().offset;
        self.expect(Kind::Bracket, "{")?;
        let mut pairs: Vec<(Expr, Expr)> = Vec::new();
        while !self.current().is(Kind::Bracket, "}") {
            if !pairs.is_empty() {
                self.expect(Kind::Operator, ",")?;
                if self.current().is(Kind::Bracket, "}") {
                    break;
                }
            }
            let tok = self.current().clone();
            let key = match tok.kind {
                Kind::Number | Kind::String | Kind::Identifier => {
                    self.advance();
                    self.leaf(Node::Literal(Value::String(tok.value.clone())), tok.offset)?
                }
                Kind::Bracket if tok.value == "(" => self.expression(0)?,
                _ => {
                    return Err(self.syntax_with(tok.offset, || {
                        format!(
                            "a map key must be a quoted string, a number, an identifier, or an expression in parentheses (found {})",
                            tok.describe()
                        )
                    }))
                }
            };
            self.expect(Kind::Operator, ":")?;
            let value = self.expression(0)?;
            pairs.push((key, value));
        }
        self.expect(Kind::Bracket, "}")?;
        let heights: Vec<usize> = pairs.iter().map(|(k, v)| k.height.max(v.height)).collect();
        let node = Node::Map(pairs.into_iter().map(|(k, v)| (k.node, v.node)).collect());
        self.make(node, &heights, offset)
    }

    fn postfix(&mut self, mut node: Expr) -> Parsed {
        let mut chain = false;
        loop {
            let tok = self.current().clone();
            let optional = tok.is_op("?.");
            if tok.is_op(".") || optional {
                self.advance();
                let prop = self.current().clone();
                let valid = prop.kind == Kind::Identifier
                    || (prop.kind == Kind::Operator && is_identifier_word(&prop.value));
                // `?.[` came after expr 1.15.5: a name must follow `.` and `?.`.
                if !valid {
                    return Err(self.syntax_with(prop.offset, || {
                        format!("expected a name after `{}`", tok.value)
                    }));
                }
                self.advance();
                if self.current().is(Kind::Bracket, "(") {
                    return Err(self.syntax_with(prop.offset, || {
                        format!("method calls such as `.{}()` are not supported", prop.value)
                    }));
                }
                let h = node.height;
                node = self.make(
                    Node::Member {
                        object: Box::new(node.node),
                        property: Box::new(Node::Literal(Value::String(prop.value))),
                        optional,
                    },
                    &[h],
                    prop.offset,
                )?;
                chain |= optional;
            } else if tok.is(Kind::Bracket, "[") {
                node = self.index(node, false)?;
            } else {
                break;
            }
        }
        if chain {
            let h = node.height;
            let offset = self.current().offset;
            node = self.make(Node::Chain(Box::new(node.node)), &[h], offset)?;
        }
        Ok(node)
    }

    /// `[i]`, `[a:b]`, `[:b]`, `[a:]`, `[:]` after `node` (the cursor is on `[`).
    fn index(&mut self, node: Expr, optional: bool) -> Parsed {
        let offset = self.current().offset;
        self.expect(Kind::Bracket, "[")?;
        let from = if self.current().is_op(":") {
            None
        } else {
            Some(self.expression(0)?)
        };
        if self.current().is_op(":") {
            self.advance();
            let to = if self.current().is(Kind::Bracket, "]") {
                None
            } else {
                Some(self.expression(0)?)
            };
            self.expect(Kind::Bracket, "]")?;
            let heights = [
                node.height,
                from.as_ref().map_or(0, |e| e.height),
                to.as_ref().map_or(0, |e| e.height),
            ];
            return self.make(
                Node::Slice {
                    object: Box::new(node.node),
                    from: from.map(|e| Box::new(e.node)),
                    to: to.map(|e| Box::new(e.node)),
                },
                &heights,
                offset,
            );
        }
        self.expect(Kind::Bracket, "]")?;
        let Some(index) = from else {
            return Err(self.syntax(offset, "expected an index"));
        };
        let heights = [node.height, index.height];
        self.make(
            Node::Member {
                object: Box::new(node.node),
                property: Box::new(index.node),
                optional,
            },
            &heights,
            offset,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn and_or_chains_are_flattened() {
        let Node::And(items) = parse("true && false && true && result").unwrap() else {
            panic!("not an And");
        };
        assert_eq!(items.len(), 4);
        // Different operators are not merged: `||` binds looser than `&&`.
        let Node::Or(items) = parse("true && false || true && true").unwrap() else {
            panic!("not an Or");
        };
        assert_eq!(items.len(), 2);
        assert!(matches!(items[0], Node::And(_)));
    }

    #[test]
    fn literal_patterns_and_arrays_are_prepared_at_compile_time() {
        assert!(matches!(
            parse("'a' matches '^a'").unwrap(),
            Node::Matches(_, _, Some(_))
        ));
        assert!(matches!(
            parse("'a' matches result").unwrap(),
            Node::Matches(_, _, None)
        ));
        assert!(matches!(
            parse("[1, 'a', [2]]").unwrap(),
            Node::Literal(Value::Array(_))
        ));
        assert!(matches!(parse("[1, result]").unwrap(), Node::Array(_)));
    }

    #[test]
    fn negated_operators_wrap_in_not() {
        match parse("1 not in [1]").unwrap() {
            Node::Unary(UnaryOp::Not, inner) => {
                assert!(matches!(*inner, Node::Binary(BinaryOp::In, _, _)))
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn precedence_follows_expr() {
        // `-` binds looser than `**`, `..` looser than `+`, `??` tightest.
        assert!(matches!(
            parse("-2 ** 2").unwrap(),
            Node::Unary(UnaryOp::Neg, _)
        ));
        assert!(matches!(
            parse("1 .. 2 + 3").unwrap(),
            Node::Binary(BinaryOp::Range, _, _)
        ));
        match parse("1 == nil ?? 1").unwrap() {
            Node::Binary(BinaryOp::Eq, _, right) => assert!(matches!(*right, Node::Coalesce(..))),
            other => panic!("unexpected {other:?}"),
        }
        // As in expr, `??` followed by another operator must be parenthesized.
        assert!(parse("nil ?? 1 == 1").is_err());
        assert!(matches!(parse("result?.a.b").unwrap(), Node::Chain(_)));
    }
}
