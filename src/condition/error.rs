//! Errors from compiling or evaluating a condition.

use std::fmt;

/// Where in the condition's source something went wrong (1-based line and column, in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Byte offset into the source.
    pub offset: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` in `source`.
    pub(crate) fn at(source: &str, offset: usize) -> Position {
        let offset = offset.min(source.len());
        let before = source.get(..offset).unwrap_or(source);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
        Position {
            offset,
            line,
            column,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// Why a condition could not be compiled or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConditionError {
    /// The text is not a valid expression.
    #[error("syntax error at {position}: {message}")]
    Syntax {
        /// What the parser expected.
        message: String,
        /// Where in the source.
        position: Position,
    },
    /// A variable that the environment does not define.
    #[error("unknown name `{name}` at {position} (the condition can only refer to `result`)")]
    UnknownName {
        /// The name as written.
        name: String,
        /// Where in the source.
        position: Position,
    },
    /// A call to a function that neither expr nor Argo defines (or that rollgate does not support).
    #[error("unknown function `{name}` at {position}{}", hint.map(|h| format!(" ({h})")).unwrap_or_default())]
    UnknownFunction {
        /// The function as written.
        name: String,
        /// Where in the source.
        position: Position,
        /// What to use instead, where there is something.
        hint: Option<&'static str>,
    },
    /// A call with the wrong number of arguments.
    #[error("{function}() at {position} takes {expected} argument(s), got {got}")]
    ArgumentCount {
        /// The function.
        function: &'static str,
        /// How many it takes, e.g. `1 or 2`.
        expected: &'static str,
        /// How many it was given.
        got: usize,
        /// Where in the source.
        position: Position,
    },
    /// Nesting beyond what the evaluator allows (protects the stack).
    #[error("expression nested too deeply at {position} (the limit is {limit} levels)")]
    TooDeep {
        /// The nesting limit.
        limit: usize,
        /// Where in the source.
        position: Position,
    },
    /// More syntax nodes than the evaluator allows.
    #[error("expression too large (the limit is {limit} nodes)")]
    TooLarge {
        /// The node limit.
        limit: usize,
    },
    /// expr's compile-time type check failed for the type `result` has (Argo compiles each
    /// condition against its result, so this depends on the result's type).
    #[error("{message}")]
    Type {
        /// expr's message.
        message: String,
    },
    /// A `matches` pattern that is not a valid regular expression.
    #[error("invalid regular expression `{pattern}`: {message}")]
    Regex {
        /// The pattern.
        pattern: String,
        /// Why it does not compile.
        message: String,
    },
    /// The condition produced something other than `true` or `false`.
    #[error("the condition must evaluate to a boolean, but it gave {type_name} `{value}`")]
    NotBoolean {
        /// expr's name of the type it gave.
        type_name: &'static str,
        /// A preview of the value.
        value: String,
    },
    /// An index past either end of an array or string.
    #[error("index {index} out of range (length {length})")]
    IndexOutOfRange {
        /// The index asked for.
        index: i64,
        /// The length of the array or string.
        length: usize,
    },
    /// Integer `%` by zero.
    #[error("integer division by zero")]
    DivisionByZero,
    /// An operator or access applied to values of the wrong type.
    #[error("{0}")]
    InvalidOperation(String),
    /// A function rejected its arguments.
    #[error("{function}(): {message}")]
    Function {
        /// The function.
        function: &'static str,
        /// Why it refused.
        message: String,
    },
    /// The evaluation built too much data or ran too many predicate steps.
    #[error("evaluation budget exceeded: {what} (the limit is {limit})")]
    BudgetExceeded {
        /// Which budget ran out.
        what: &'static str,
        /// Its limit.
        limit: u64,
    },
}

impl ConditionError {
    /// True for errors found when compiling (the text is wrong), false for errors that
    /// depend on the value the condition was evaluated against.
    pub fn is_compile_error(&self) -> bool {
        matches!(
            self,
            ConditionError::Syntax { .. }
                | ConditionError::UnknownName { .. }
                | ConditionError::UnknownFunction { .. }
                | ConditionError::ArgumentCount { .. }
                | ConditionError::TooDeep { .. }
                | ConditionError::TooLarge { .. }
                | ConditionError::Type { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_counts_lines_and_characters() {
        let src = "a\nbé c";
        let p = Position::at(src, src.find('c').unwrap());
        assert_eq!((p.line, p.column), (2, 4));
        assert_eq!(Position::at(src, 0).column, 1);
        // Offsets past the end clamp instead of panicking.
        assert_eq!(Position::at(src, 999).offset, src.len());
    }

    #[test]
    fn unknown_function_display_includes_hint_only_when_given() {
        let p = Position::at("x", 0);
        let with = ConditionError::UnknownFunction {
            name: "reduce".into(),
            position: p,
            hint: Some("not supported"),
        };
        assert!(with.to_string().ends_with("(not supported)"));
        let without = ConditionError::UnknownFunction {
            name: "foo".into(),
            position: p,
            hint: None,
        };
        assert!(without.to_string().ends_with("column 1"));
    }
}
