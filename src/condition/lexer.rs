//! Splits a condition into tokens, following expr's lexer.

use super::error::{ConditionError, Position};

/// What kind of token, as expr classifies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Identifier,
    Number,
    String,
    Operator,
    Bracket,
    Eof,
}

/// One token: its kind, its text (unescaped for strings) and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub kind: Kind,
    pub value: String,
    pub offset: usize,
}

impl Token {
    pub(crate) fn is(&self, kind: Kind, value: &str) -> bool {
        self.kind == kind && self.value == value
    }

    pub(crate) fn is_op(&self, value: &str) -> bool {
        self.is(Kind::Operator, value)
    }

    /// How the token reads in an error message.
    pub(crate) fn describe(&self) -> String {
        match self.kind {
            Kind::Eof => "end of expression".into(),
            Kind::String => format!("string {:?}", self.value),
            _ => format!("`{}`", self.value),
        }
    }
}

/// Words that expr lexes as operators rather than identifiers.
const WORD_OPERATORS: &[&str] = &[
    "in",
    "or",
    "and",
    "not",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
    "let",
    "if",
    "else",
];

/// Longest source the compiler accepts; conditions are one-liners in YAML.
pub(crate) const MAX_SOURCE_LEN: usize = 64 * 1024;

/// Tokenizes the whole source, ending with an `Eof` token.
pub(crate) fn tokenize(source: &str) -> Result<Vec<Token>, ConditionError> {
    if source.len() > MAX_SOURCE_LEN {
        return Err(ConditionError::TooLarge {
            limit: MAX_SOURCE_LEN,
        });
    }
    let mut lexer = Lexer {
        src: source,
        pos: 0,
        tokens: Vec::new(),
    };
    lexer.run()?;
    Ok(lexer.tokens)
}

struct Lexer<'s> {
    src: &'s str,
    pos: usize,
    tokens: Vec<Token>,
}

/// expr's `utils.IsAlphabetic`: `_`, `$` or Go's `unicode.IsLetter` (category L; Rust's
/// `is_alphabetic` also takes letter numbers and combining marks).
fn is_alphabetic(c: char) -> bool {
    if c.is_ascii() {
        return c == '_' || c == '$' || c.is_ascii_alphabetic();
    }
    in_category(c, 0)
}

/// expr's `utils.IsAlphaNumeric`: a letter or Go's `unicode.IsDigit` (category Nd).
fn is_alphanumeric(c: char) -> bool {
    if c.is_ascii() {
        return c == '_' || c == '$' || c.is_ascii_alphanumeric();
    }
    in_category(c, 0) || in_category(c, 1)
}

/// Whether a non-ASCII `c` is a letter (`which` 0) or a decimal digit (1); only conditions
/// with non-ASCII names or text outside strings get here.
fn in_category(c: char, which: usize) -> bool {
    static CLASSES: std::sync::OnceLock<Option<[regex::Regex; 2]>> = std::sync::OnceLock::new();
    let classes = CLASSES.get_or_init(|| {
        Some([
            regex::Regex::new(r"\A\pL\z").ok()?,
            regex::Regex::new(r"\A\p{Nd}\z").ok()?,
        ])
    });
    let mut buf = [0u8; 4];
    classes
        .as_ref()
        .and_then(|c| c.get(which))
        .is_some_and(|re| re.is_match(c.encode_utf8(&mut buf)))
}

impl<'s> Lexer<'s> {
    fn peek(&self) -> Option<char> {
        self.src.get(self.pos..).and_then(|s| s.chars().next())
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.src.get(self.pos..).and_then(|s| s.chars().nth(n))
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn accept(&mut self, set: &str) -> bool {
        match self.peek() {
            Some(c) if set.contains(c) => {
                self.pos += c.len_utf8();
                true
            }
            _ => false,
        }
    }

    fn accept_run(&mut self, set: &str) {
        while self.accept(set) {}
    }

    fn error(&self, offset: usize, message: impl Into<String>) -> ConditionError {
        ConditionError::Syntax {
            message: message.into(),
            position: Position::at(self.src, offset),
        }
    }

    fn emit(&mut self, kind: Kind, start: usize) {
        let value = self.src.get(start..self.pos).unwrap_or_default().to_owned();
        self.tokens.push(Token {
            kind,
            value,
            offset: start,
        });
    }

    fn run(&mut self) -> Result<(), ConditionError> {
        loop {
            let start = self.pos;
            let Some(c) = self.bump() else {
                self.tokens.push(Token {
                    kind: Kind::Eof,
                    value: String::new(),
                    offset: self.pos,
                });
                return Ok(());
            };
            match c {
                c if c.is_whitespace() => {}
                '\'' | '"' => {
                    let value = self.quoted(c, start)?;
                    self.tokens.push(Token {
                        kind: Kind::String,
                        value,
                        offset: start,
                    });
                }
                // expr 1.15.5's lexer has no raw strings: a backtick is an unknown character.
                '`' => {
                    return Err(self.error(start, "unrecognized character '`'"));
                }
                'b' | 'B' if matches!(self.peek(), Some('\'' | '"')) => {
                    return Err(self.error(start, "bytes literals are not supported"));
                }
                '0'..='9' => {
                    self.pos = start;
                    self.number(start)?;
                }
                '.' if self.peek().is_some_and(|d| d.is_ascii_digit()) => {
                    self.pos = start;
                    self.number(start)?;
                }
                '.' => {
                    self.accept(".");
                    self.emit(Kind::Operator, start);
                }
                '?' => {
                    self.accept(".?");
                    self.emit(Kind::Operator, start);
                }
                '/' => {
                    if self.accept("/") {
                        while let Some(c) = self.bump() {
                            if c == '\n' {
                                break;
                            }
                        }
                    } else if self.accept("*") {
                        let rest = self.src.get(self.pos..).unwrap_or_default();
                        let Some(end) = rest.find("*/") else {
                            return Err(self.error(start, "unclosed comment"));
                        };
                        self.pos += end + 2;
                    } else {
                        self.emit(Kind::Operator, start);
                    }
                }
                '#' => {
                    self.accept("#");
                    self.emit(Kind::Operator, start);
                    let name_start = self.pos;
                    while self.peek().is_some_and(is_alphanumeric) {
                        self.bump();
                    }
                    if self.pos > name_start {
                        self.emit(Kind::Identifier, name_start);
                    }
                }
                '|' => {
                    self.accept("|");
                    self.emit(Kind::Operator, start);
                }
                ':' => {
                    self.accept(":");
                    self.emit(Kind::Operator, start);
                }
                '(' | '[' | '{' | ')' | ']' | '}' => self.emit(Kind::Bracket, start),
                ',' | ';' | '%' | '+' | '-' | '^' => self.emit(Kind::Operator, start),
                '&' | '!' | '=' | '*' | '<' | '>' => {
                    self.accept("&=*");
                    self.emit(Kind::Operator, start);
                }
                c if is_alphabetic(c) => {
                    while self.peek().is_some_and(is_alphanumeric) {
                        self.bump();
                    }
                    let word = self.src.get(start..self.pos).unwrap_or_default();
                    let kind = if WORD_OPERATORS.contains(&word) {
                        Kind::Operator
                    } else {
                        Kind::Identifier
                    };
                    self.emit(kind, start);
                }
                other => {
                    return Err(self.error(start, format!("unrecognized character {other:?}")));
                }
            }
        }
    }

    /// Scans a number the way expr does; the parser converts the text.
    fn number(&mut self, start: usize) -> Result<(), ConditionError> {
        let mut digits = "0123456789_";
        if self.accept("0") {
            if self.accept("xX") {
                digits = "0123456789abcdefABCDEF_";
            } else if self.accept("oO") {
                digits = "01234567_";
            } else if self.accept("bB") {
                digits = "01_";
            }
        }
        self.accept_run(digits);
        if self.peek() == Some('.') {
            if self.peek_at(1) == Some('.') {
                // `1..3` is a range, not the float `1.`.
                self.emit(Kind::Number, start);
                return Ok(());
            }
            self.bump();
            self.accept_run(digits);
        }
        if self.accept("eE") {
            self.accept("+-");
            self.accept_run(digits);
        }
        if self.peek().is_some_and(is_alphanumeric) {
            self.bump();
            let word = self.src.get(start..self.pos).unwrap_or_default();
            return Err(self.error(start, format!("bad number syntax: {word:?}")));
        }
        self.emit(Kind::Number, start);
        Ok(())
    }

    /// Scans a quoted string whose opening quote is at `start` and returns it unescaped, by
    /// expr 1.15.5's rules (`parser/lexer/lexer.go` scanString/scanEscape, then `utils.go`
    /// unescape): a raw line feed ends nothing (an error), a raw carriage return reads as `\n`,
    /// and only `\a \b \f \n \r \t \v \\`, the string's own quote, three octal digits
    /// (`\0`-`\377`), `\xHH`, `\uHHHH` and `\UHHHHHHHH` are escapes. A surrogate code point
    /// becomes U+FFFD, as Go's `utf8.EncodeRune` writes it.
    fn quoted(&mut self, quote: char, start: usize) -> Result<String, ConditionError> {
        let mut out = String::new();
        loop {
            let at = self.pos;
            let Some(c) = self.bump() else {
                return Err(self.error(start, "literal not terminated"));
            };
            match c {
                c if c == quote => return Ok(out),
                '\n' => return Err(self.error(start, "literal not terminated")),
                '\r' => out.push('\n'),
                '\\' => {
                    let bad = |l: &Self| l.error(at, "invalid char escape");
                    let Some(e) = self.bump() else {
                        return Err(self.error(start, "literal not terminated"));
                    };
                    match e {
                        'a' => out.push('\u{7}'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'v' => out.push('\u{b}'),
                        '\\' => out.push('\\'),
                        e if e == quote => out.push(e),
                        'x' | 'u' | 'U' => {
                            let n = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let v = self.digits(16, n).ok_or_else(|| bad(self))?;
                            if v > 0x10_FFFF {
                                return Err(self.error(at, "invalid unicode escape"));
                            }
                            out.push(char::from_u32(v).unwrap_or('\u{FFFD}'));
                        }
                        '0'..='7' => {
                            let first = e.to_digit(8).unwrap_or(0);
                            let rest = self.digits(8, 2).ok_or_else(|| bad(self))?;
                            // Three octal digits, the first at most 3: \0-\377.
                            if first > 3 {
                                return Err(self.error(at, "invalid octal escape"));
                            }
                            out.push(char::from_u32(first * 64 + rest).unwrap_or('\u{FFFD}'));
                        }
                        _ => return Err(bad(self)),
                    }
                }
                c => out.push(c),
            }
        }
    }

    /// `n` digits in `radix`, or `None` when one is missing.
    fn digits(&mut self, radix: u32, n: usize) -> Option<u32> {
        let mut value: u32 = 0;
        for _ in 0..n {
            let d = self.peek()?.to_digit(radix)?;
            self.bump();
            value = value * radix + d;
        }
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds_and_values(src: &str) -> Vec<(Kind, String)> {
        tokenize(src)
            .unwrap()
            .into_iter()
            .map(|t| (t.kind, t.value))
            .collect()
    }

    #[test]
    fn splits_operators_numbers_and_words() {
        let toks = kinds_and_values("result[0] >= 0.95 && x not in [1..3] ?? a?.b");
        let values: Vec<&str> = toks.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(
            values,
            [
                "result", "[", "0", "]", ">=", "0.95", "&&", "x", "not", "in", "[", "1", "..", "3",
                "]", "??", "a", "?.", "b", ""
            ]
        );
        assert_eq!(toks[8].0, Kind::Operator);
        assert_eq!(toks.last().unwrap().0, Kind::Eof);
    }

    #[test]
    fn unescapes_strings_of_both_quotes() {
        let toks = kinds_and_values(r#"'a\n\'b' "\u00e9\x41\101\uD83D""#);
        assert_eq!(toks[0], (Kind::String, "a\n'b".into()));
        assert_eq!(toks[1], (Kind::String, "éAA\u{FFFD}".into()));
    }

    #[test]
    fn skips_comments() {
        let toks = kinds_and_values("1 /* two */ + // three\n 4");
        let values: Vec<&str> = toks.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, ["1", "+", "4", ""]);
    }

    #[test]
    fn numbers_in_expr_forms() {
        for src in ["1_000", "0x2A", "0o52", "0b101010", "1e3", "1.5e-3", ".5"] {
            let toks = kinds_and_values(src);
            assert_eq!(toks[0], (Kind::Number, src.into()), "{src}");
        }
        assert!(tokenize("12abc").is_err());
    }

    #[test]
    fn reports_position_of_errors() {
        let err = tokenize("a &&\n  'open").unwrap_err();
        match err {
            ConditionError::Syntax { position, .. } => {
                assert_eq!((position.line, position.column), (2, 3));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(tokenize("a @ b").is_err());
        assert!(tokenize(r"'\q'").is_err());
        assert!(tokenize("/* never closed").is_err());
    }

    #[test]
    fn pointer_names_are_separate_tokens() {
        let toks = kinds_and_values("#index + #");
        assert_eq!(toks[0], (Kind::Operator, "#".into()));
        assert_eq!(toks[1], (Kind::Identifier, "index".into()));
        assert_eq!(toks[3], (Kind::Operator, "#".into()));
    }
}
