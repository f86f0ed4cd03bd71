//! Behaviour tests: Argo's phase rules and the expr language as Argo's controller sees it.

use std::collections::BTreeMap;

use super::*;

fn compile(src: &str) -> Condition {
    Condition::compile(src).unwrap_or_else(|e| panic!("`{src}` should compile: {e}"))
}

fn eval(src: &str, result: &Value) -> Result<bool, ConditionError> {
    compile(src).evaluate(result)
}

fn holds(src: &str, result: &Value) -> bool {
    eval(src, result).unwrap_or_else(|e| panic!("`{src}` failed: {e}"))
}

fn value_of(src: &str) -> Value {
    compile(src)
        .evaluate_value(&Value::Nil)
        .unwrap_or_else(|e| panic!("`{src}` failed: {e}"))
}

fn runtime_error(src: &str, result: &Value) -> ConditionError {
    match compile(src).evaluate_value(result) {
        Ok(v) => panic!("`{src}` should fail, gave {v:?}"),
        // Type errors are compile errors that need the result's type: they show here too.
        Err(e) => e,
    }
}

fn compile_error(src: &str) -> ConditionError {
    match Condition::compile(src) {
        Ok(_) => panic!("`{src}` should not compile"),
        Err(e) => e,
    }
}

fn phase(
    result: &Value,
    success: Option<&str>,
    failure: Option<&str>,
) -> Result<Phase, ConditionFailure> {
    let s = success.map(compile);
    let f = failure.map(compile);
    evaluate_result(result, s.as_ref(), f.as_ref())
}

fn floats(v: &[f64]) -> Value {
    Value::from(v.to_vec())
}

fn map(pairs: &[(&str, Value)]) -> Value {
    Value::Map(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
    )
}

// ---- Argo's EvaluateResult ----

#[test]
fn argo_equal_ten_is_successful() {
    let p = phase(
        &Value::Float(10.0),
        Some("result == 10"),
        Some("result != 10"),
    );
    assert_eq!(p.unwrap(), Phase::Successful);
}

#[test]
fn argo_nan_with_both_conditions_is_inconclusive() {
    let p = phase(
        &Value::Float(f64::NAN),
        Some("result >= 0.9"),
        Some("result < 0.9"),
    );
    assert_eq!(p.unwrap(), Phase::Inconclusive);
}

#[test]
fn argo_nan_accepted_by_isnan_is_successful() {
    let p = phase(
        &Value::Float(f64::NAN),
        Some("result >= 0.9 || isNaN(result)"),
        None,
    );
    assert_eq!(p.unwrap(), Phase::Successful);
}

#[test]
fn argo_nan_with_only_success_condition_is_failed() {
    let p = phase(&Value::Float(f64::NAN), Some("result >= 0.9"), None);
    assert_eq!(p.unwrap(), Phase::Failed);
}

#[test]
fn argo_in_and_len_on_arrays() {
    let p = phase(
        &floats(&[10.0, 11.0]),
        Some("10 in result"),
        Some("len(result) != 2"),
    );
    assert_eq!(p.unwrap(), Phase::Successful);
}

#[test]
fn argo_short_circuit_guards_empty_result() {
    let p = phase(
        &floats(&[]),
        Some("len(result) == 0 || result[0] >= 0.95"),
        None,
    );
    assert_eq!(p.unwrap(), Phase::Successful);
}

#[test]
fn argo_index_into_empty_result_says_no_data() {
    let err = phase(&floats(&[]), Some("result[0] >= 0.95"), None).unwrap_err();
    assert_eq!(err.which, Which::Success);
    assert!(err.no_data);
    assert_eq!(
        err.to_string(),
        "successCondition `result[0] >= 0.95` could not be evaluated: index 0 out of range (length 0); the query returned no data"
    );
    let err = phase(&floats(&[]), None, Some("result[1] > 1")).unwrap_err();
    assert_eq!(err.which, Which::Failure);
    assert!(err
        .to_string()
        .starts_with("failureCondition `result[1] > 1` could not be evaluated: "));
    assert!(err.to_string().ends_with("; the query returned no data"));
}

#[test]
fn failure_message_omits_no_data_when_there_was_data() {
    let err = phase(&floats(&[1.0]), Some("result[3] > 0"), None).unwrap_err();
    assert!(!err.no_data);
    assert_eq!(
        err.to_string(),
        "successCondition `result[3] > 0` could not be evaluated: index 3 out of range (length 1)"
    );
}

#[test]
fn compile_failure_message_says_invalid() {
    let source = "result >";
    let err = ConditionFailure::compile(Which::Failure, source, compile_error(source));
    let text = err.to_string();
    assert!(text.starts_with("failureCondition `result >` is not a valid condition: syntax error at line 1, column 9"), "{text}");
}

#[test]
fn phase_rules() {
    let r = Value::Float(1.0);
    assert_eq!(phase(&r, None, None).unwrap(), Phase::Successful);
    // A true failure condition wins over a true success condition.
    assert_eq!(
        phase(&r, Some("true"), Some("true")).unwrap(),
        Phase::Failed
    );
    assert_eq!(
        phase(&r, Some("true"), Some("false")).unwrap(),
        Phase::Successful
    );
    assert_eq!(
        phase(&r, Some("false"), Some("false")).unwrap(),
        Phase::Inconclusive
    );
    assert_eq!(phase(&r, Some("false"), None).unwrap(), Phase::Failed);
    assert_eq!(phase(&r, Some("true"), None).unwrap(), Phase::Successful);
    assert_eq!(phase(&r, None, Some("false")).unwrap(), Phase::Successful);
    assert_eq!(phase(&r, None, Some("true")).unwrap(), Phase::Failed);
}

#[test]
fn errors_stop_evaluation_and_name_the_condition() {
    let r = Value::Float(1.0);
    // The success condition is evaluated first; its error is the one reported.
    let err = phase(&r, Some("result.a"), Some("len(result) > 0")).unwrap_err();
    assert_eq!(err.which, Which::Success);
    let err = phase(&r, Some("true"), Some("len(result) > 0")).unwrap_err();
    assert_eq!(err.which, Which::Failure);
    assert_eq!(err.source, "len(result) > 0");
    // expr's type check: len() of a float64 does not compile in Argo.
    assert!(matches!(err.error, ConditionError::Type { .. }));
    assert!(err.to_string().contains("is not a valid condition"));
}

#[test]
fn non_boolean_output_is_an_error() {
    let err = eval("1", &Value::Nil).unwrap_err();
    assert_eq!(
        err,
        ConditionError::NotBoolean {
            type_name: "int",
            value: "1".into()
        }
    );
    assert!(eval("result", &floats(&[0.5])).is_err());
    assert!(eval("nil", &Value::Nil).is_err());
    let err = phase(&Value::Float(0.5), Some("result * 2"), None).unwrap_err();
    assert!(
        err.to_string()
            .contains("must evaluate to a boolean, but it gave float `1`"),
        "{err}"
    );
}

#[test]
fn unknown_names_and_functions_fail_at_compile_time() {
    assert!(
        matches!(compile_error("foo > 1"), ConditionError::UnknownName { ref name, .. } if name == "foo")
    );
    assert!(matches!(
        compile_error("results[0] > 1"),
        ConditionError::UnknownName { .. }
    ));
    assert!(matches!(
        compile_error("foo(result)"),
        ConditionError::UnknownFunction { hint: None, .. }
    ));
    let err = compile_error("reduce(result, #acc + #)");
    assert!(matches!(
        err,
        ConditionError::UnknownFunction { hint: Some(_), .. }
    ));
    assert!(err.to_string().contains("does not support"));
    assert!(compile_error("result(1)")
        .to_string()
        .contains("not a function"));
    assert!(compile_error("isNaN").to_string().contains("is a function"));
    // Inside predicates a bare name is still a variable, not a field: use `.name`.
    assert!(matches!(
        compile_error("all(result, {x > 0})"),
        ConditionError::UnknownName { .. }
    ));
}

// ---- Argo's functions ----

#[test]
fn argo_functions() {
    assert!(holds("isNil(result)", &Value::Nil));
    assert!(!holds("isNil(result)", &Value::Float(0.0)));
    // isNil ignores its argument and looks at `result`.
    assert!(holds("isNil(5)", &Value::Nil));
    assert!(!holds("isNil(nil)", &floats(&[])));
    assert!(holds("default(result, 5) == 5", &Value::Nil));
    // default ignores its first argument and gives `result` when it is not nil.
    assert!(holds("default(nil, 5) == 2", &Value::Float(2.0)));
    assert!(holds("asInt(\"12\") == 12", &Value::Nil));
    assert!(holds(
        "asInt(2.9) == 2 && asInt(-2.9) == -2 && asInt(7) == 7",
        &Value::Nil
    ));
    assert!(holds(
        "asFloat(\"1.5\") == 1.5 && asFloat(2) == 2.0",
        &Value::Nil
    ));
    assert!(holds("asFloat(result) > 0.5", &Value::from("0.75")));
    assert!(holds("isInf(result)", &Value::Float(f64::INFINITY)));
    assert!(holds("isInf(result)", &Value::Float(f64::NEG_INFINITY)));
    assert!(!holds("isInf(result)", &Value::Float(1e308)));
    assert!(holds("isNaN(result)", &Value::Float(f64::NAN)));
    assert!(!holds("isNaN(result)", &Value::Int(3)));
    assert!(!holds("isNaN(1)", &Value::Nil));
    runtime_error("isNaN(len(result))", &floats(&[]));
    assert!(holds("isNaN(0.0 / 0)", &Value::Nil));
}

#[test]
fn argo_function_errors() {
    for src in [
        "asInt('x') == 1",
        "asInt('1.5') == 1",
        "asInt(true) == 1",
        "asInt(nil) == 1",
        "asInt(result) == 1",
        "asFloat('abc') > 0",
        "asFloat([1]) > 0",
        "isNaN('a')",
        "isInf(nil)",
    ] {
        let result = Value::Float(f64::NAN);
        runtime_error(src, &result);
    }
    // isNil still evaluates its argument, as Go does, so a bad argument is an error.
    runtime_error("isNil(result.x)", &Value::Nil);
    assert!(matches!(
        compile_error("isNil()"),
        ConditionError::ArgumentCount { got: 0, .. }
    ));
    assert!(matches!(
        compile_error("default(result)"),
        ConditionError::ArgumentCount { got: 1, .. }
    ));
}

// ---- the expr language ----

#[test]
fn literals() {
    assert_eq!(value_of("1_000"), Value::Int(1000));
    assert_eq!(value_of("0x2A"), Value::Int(42));
    // Argo v1.9.1's expr reads only 0x prefixes.
    compile_error("0o52");
    compile_error("0b101010");
    assert_eq!(value_of("1e3"), Value::Float(1000.0));
    assert_eq!(value_of("1.5"), Value::Float(1.5));
    assert_eq!(value_of(".5"), Value::Float(0.5));
    assert_eq!(value_of(r"'it\'s'"), Value::from("it's"));
    assert_eq!(value_of(r#""a\tb\"""#), Value::from("a\tb\""));
    assert_eq!(value_of(r#""\u00e9" + '\x41'"#), Value::from("éA"));
    assert_eq!(value_of("true"), Value::Bool(true));
    assert_eq!(value_of("nil"), Value::Nil);
    assert_eq!(
        value_of("[1, 'a', [true]]"),
        Value::Array(vec![
            Value::Int(1),
            Value::from("a"),
            Value::Array(vec![Value::Bool(true)])
        ])
    );
    assert_eq!(value_of("[1, 2,]"), Value::from(vec![1i64, 2]));
    assert_eq!(
        value_of("{a: 1, 'b c': 2, 3: 4, ('d' + 'e'): 5}"),
        map(&[
            ("a", Value::Int(1)),
            ("b c", Value::Int(2)),
            ("3", Value::Int(4)),
            ("de", Value::Int(5))
        ])
    );
    assert_eq!(value_of("1 /* note */ + // rest\n 1"), Value::Int(2));
}

#[test]
fn arithmetic() {
    assert_eq!(value_of("1 + 2 * 3"), Value::Int(7));
    assert_eq!(value_of("(1 + 2) * 3"), Value::Int(9));
    assert_eq!(value_of("10 - 2 - 3"), Value::Int(5));
    assert_eq!(value_of("3 / 2"), Value::Float(1.5));
    assert_eq!(value_of("4 / 2"), Value::Float(2.0));
    assert_eq!(value_of("7 % 3"), Value::Int(1));
    assert_eq!(value_of("-7 % 3"), Value::Int(-1));
    assert_eq!(value_of("2 ** 3"), Value::Float(8.0));
    assert_eq!(value_of("2 ^ 3"), Value::Float(8.0));
    assert_eq!(value_of("2 ** 3 ** 2"), Value::Float(512.0));
    assert_eq!(value_of("-2 ** 2"), Value::Float(-4.0));
    assert_eq!(value_of("1 + 1.5"), Value::Float(2.5));
    assert_eq!(value_of("-(1)"), Value::Int(-1));
    assert_eq!(value_of("+1.5"), Value::Float(1.5));
    assert_eq!(value_of("'a' + 'b'"), Value::from("ab"));
    // Go's int64 wraps.
    assert_eq!(value_of("9223372036854775807 + 1"), Value::Int(i64::MIN));
    assert_eq!(value_of("-9223372036854775807 - 1"), Value::Int(i64::MIN));
    assert_eq!(value_of("(-9223372036854775807 - 1) % -1"), Value::Int(0));
    // Float division by zero follows IEEE 754, as in Go.
    assert_eq!(value_of("1 / 0"), Value::Float(f64::INFINITY));
    assert_eq!(value_of("-1 / 0.0"), Value::Float(f64::NEG_INFINITY));
    assert!(holds("isNaN(0 / 0)", &Value::Nil));
}

#[test]
fn arithmetic_errors() {
    let nil = Value::Nil;
    assert_eq!(runtime_error("1 % 0", &nil), ConditionError::DivisionByZero);
    assert!(runtime_error("1.5 % 2", &nil)
        .to_string()
        .contains("mismatched types float64 and int"));
    assert!(runtime_error("'a' + 1", &nil)
        .to_string()
        .contains("mismatched types string and int"));
    runtime_error("[1] + [2]", &nil);
    runtime_error("nil + 1", &nil);
    runtime_error("-'a'", &nil);
    runtime_error("1 .. 'a'", &nil);
    runtime_error("1.0 .. 3", &nil);
}

#[test]
fn comparisons_mix_ints_and_floats() {
    let nil = Value::Nil;
    for src in [
        "1 < 1.5",
        "2 > 1.5",
        "1 <= 1.0",
        "1.0 >= 1",
        "1 == 1.0",
        "'a' < 'b'",
        "'b' >= 'a'",
        "nil == nil",
        "[1, 2] == [1, 2]",
        "{a: 1} == {a: 1}",
        "[1, [2]] != [1, [3]]",
    ] {
        assert!(holds(src, &nil), "{src}");
    }
    for src in [
        // reflect.DeepEqual: an int and a float64 inside arrays or maps differ.
        "[1, 2] == [1.0, 2.0]",
        "{a: 1} == {a: 1.0}",
        "nil == false",
        "[1] == [1, 2]",
        "{a: 1} == {b: 1}",
    ] {
        assert!(!holds(src, &nil), "{src}");
    }
    assert!(holds("result >= 10", &Value::Int(10)));
    assert!(holds("result == 10", &Value::Float(10.0)));
    assert!(runtime_error("'a' < 1", &nil)
        .to_string()
        .contains("mismatched types string and int"));
    // Comparisons do not chain in expr 1.15.5: `(1 < 2) < 3` compares a bool.
    runtime_error("1 < 2 < 3", &nil);
    // A string and an int are not comparable for expr's checker.
    runtime_error("'1' == 1", &nil);
    runtime_error("nil < 1", &nil);
    runtime_error("[1] < [2]", &nil);
    runtime_error("true > false", &nil);
}

#[test]
fn nan_compares_false_and_unequal() {
    let nan = Value::Float(f64::NAN);
    for src in [
        "result < 1",
        "result > 1",
        "result <= 1",
        "result >= 1",
        "result == result",
        "[result] == [result]",
        "result in [result]",
    ] {
        assert!(!holds(src, &nan), "{src}");
    }
    assert!(holds("result != result", &nan));
    assert!(holds("result != 1", &nan));
    let r = floats(&[f64::NAN, 0.5]);
    assert!(holds("any(result, isNaN(#))", &r));
    assert!(!holds("all(result, # < 1)", &r));
}

#[test]
fn infinity_is_data() {
    let inf = Value::Float(f64::INFINITY);
    assert!(holds("result > 1e308", &inf));
    assert!(!holds("result < 0.5", &inf));
    assert_eq!(
        phase(&floats(&[f64::INFINITY]), Some("result[0] < 0.5"), None).unwrap(),
        Phase::Failed
    );
}

#[test]
fn logic_short_circuits_and_requires_booleans() {
    let nil = Value::Nil;
    let one = floats(&[1.0]);
    assert!(holds("true || result[5] > 0", &one));
    assert!(!holds("false && result[5] > 0", &one));
    // expr's optimizer folds these without evaluating the left side.
    assert!(holds("result[5] > 0 || true", &one));
    assert!(!holds("result[5] > 0 && false", &one));
    runtime_error("result[5] > 0 || false", &one);
    assert!(holds("not false and !false", &nil));
    assert!(holds("true or false", &nil));
    assert!(!holds("true and false", &nil));
    assert!(holds("!(1 > 2)", &nil));
    // `not` binds tighter than comparisons, as in expr.
    assert!(compile("not true == false").evaluate(&nil).unwrap());
    runtime_error("1 && true", &nil);
    runtime_error("false || 1", &nil);
    // The type check refuses a non-boolean operand even where it would not be evaluated.
    runtime_error("true || 1", &nil);
    runtime_error("!1", &nil);
    runtime_error("1 ? true : false", &nil);
    let long = vec!["result > 0"; 1000].join(" && ");
    assert!(holds(&long, &Value::Int(1)));
}

#[test]
fn ternary_coalesce_and_if() {
    assert_eq!(value_of("true ? 1 : 2"), Value::Int(1));
    assert_eq!(value_of("false ? 1 : 2"), Value::Int(2));
    assert_eq!(value_of("false ? 1 : true ? 3 : 4"), Value::Int(3));
    assert_eq!(value_of("true ?: false"), Value::Bool(true));
    assert_eq!(value_of("nil ?? 5"), Value::Int(5));
    assert_eq!(value_of("1 ?? 5"), Value::Int(1));
    assert_eq!(value_of("nil ?? nil ?? 3"), Value::Int(3));
    assert!(compile_error("if 1 > 2 { 'a' } else { 'c' }")
        .to_string()
        .contains("not in Argo v1.9.1"));
    assert!(compile_error("nil ?? 1 + 2")
        .to_string()
        .contains("cannot be mixed"));
    assert_eq!(value_of("(nil ?? 1) + 2"), Value::Int(3));
    assert!(holds(
        "result > 0.5 ? result < 2 : false",
        &Value::Float(1.0)
    ));
}

#[test]
fn membership_and_string_operators() {
    let nil = Value::Nil;
    for src in [
        "2 in [1, 2]",
        "2.0 in [1, 2]",
        "2 not in [1, 3]",
        "'a' in {a: 1}",
        "'b' not in {a: 1}",
        "3 in 1..5",
        "'abc' contains 'b'",
        "'abc' not contains 'z'",
        "'abc' startsWith 'ab'",
        "'abc' endsWith 'bc'",
        "'abc' not endsWith 'b'",
        "'abc' matches '^a.c$'",
        "'abc' not matches 'x'",
        "'ABC' matches '(?i)abc'",
    ] {
        assert!(holds(src, &nil), "{src}");
    }
    runtime_error("1 in 5", &nil);
    runtime_error("5 in nil", &nil);
    // expr 1.15.5 drops a `not` after an operand of a tighter operator (`a * 1 in [2]`):
    // refused, since it would invert the condition.
    for src in [
        "result[0] * 1 not in [2]",
        "1 == 1 not in [true]",
        "-1 not in [1]",
    ] {
        assert!(
            compile_error(src).to_string().contains("without `not`"),
            "{src}"
        );
    }
    // At the operator's own level `not` negates any binary operator, as in expr.
    assert!(holds("1 not == 2", &nil));
    assert!(holds("(result[0] * 1) not in [2]", &floats(&[1.0])));
    runtime_error("1 in {a: 1}", &nil);
    runtime_error("'abc' contains 1", &nil);
    runtime_error("1 startsWith 'a'", &nil);
    runtime_error("1 matches 'a'", &nil);
    // A literal pattern is checked when compiling, a computed one when evaluating.
    assert!(matches!(
        compile_error("'a' matches '('"),
        ConditionError::Regex { .. }
    ));
    assert!(matches!(
        runtime_error("'a' matches result", &Value::from("(")),
        ConditionError::Regex { .. }
    ));
    assert!(holds("'a1' matches result", &Value::from("^[a-z]\\d$")));
}

#[test]
fn member_access_indexing_and_slices() {
    let r = map(&[
        ("canary", map(&[("rate", Value::Float(0.005))])),
        ("p-value", Value::Float(0.01)),
        ("list", Value::from(vec![1i64, 2, 3, 4, 5])),
        ("none", Value::Nil),
    ]);
    for src in [
        "result.canary.rate < 0.01",
        "result['canary']['rate'] < 0.01",
        "result['p-value'] < 0.05",
        "result.missing == nil",
        "result.none?.x == nil",
        "result.none?.x.y.z == nil",
        "result?.canary?.rate > 0",
        "(result.none?.x ?? 7) == 7",
        "result.list[0] == 1",
        "result.list[-1] == 5",
        "result.list[-5] == 1",
        "result.list[1.9] == 2",
        "result.list[1:4] == [2, 3, 4]",
        "result.list[1:-1] == [2, 3, 4]",
        "result.list[:3] == [1, 2, 3]",
        "result.list[3:] == [4, 5]",
        "result.list[:] == result.list",
        "result.list[1:10] == [2, 3, 4, 5]",
        "result.list[-10:2] == [1, 2]",
        "result.list[3:1] == []",
        "('hello')[1:3] == 'el'",
        "{a: [1, {b: 2}]}.a[1].b == 2",
        "result.list | len() == 5",
    ] {
        assert!(holds(src, &r), "{src}");
    }
    assert_eq!(
        runtime_error("result.list[5]", &r),
        ConditionError::IndexOutOfRange {
            index: 5,
            length: 5
        }
    );
    assert_eq!(
        runtime_error("result.list[-6]", &r),
        ConditionError::IndexOutOfRange {
            index: -6,
            length: 5
        }
    );
    runtime_error("result.none.x", &r);
    runtime_error("result.canary.rate.x", &r);
    runtime_error("result[0]", &r);
    runtime_error("result.list['a']", &r);
    runtime_error("result.list[nil]", &r);
    runtime_error("(1)[0]", &r);
    // expr 1.15.5's parser takes no index after a string literal.
    compile_error("'hello'[0] == 104");
    runtime_error("result.list[0:'a']", &r);
    assert!(runtime_error("result.x", &Value::Float(1.0))
        .to_string()
        .contains("type float64[string] is undefined"));
    assert!(compile_error("result.x()")
        .to_string()
        .contains("not supported"));
}

#[test]
fn predicates_as_closures_and_bare() {
    let r = floats(&[0.1, 0.2, 0.9]);
    for src in [
        "all(result, {# < 1})",
        "all(result, # < 1)",
        "any(result, # > 0.5)",
        "none(result, # > 1)",
        "one(result, # > 0.5)",
        "!one(result, # > 0.15)",
        "count(result, # > 0.15) == 2",
        "len(filter(result, # > 0.15)) == 2",
        "map(result, # * 10) == [1.0, 2.0, 9.0]",
        "map(result, # * 10) != [1, 2, 9]",
        "find(result, # > 0.15) == 0.2",
        "findIndex(result, # > 0.15) == 1",
        "findLast(result, # > 0.15) == 0.9",
        "findLastIndex(result, # > 0.15) == 2",
        "find(result, # > 5) == nil",
        "findIndex(result, # > 5) == -1",
        "map(result, #index) == [0, 1, 2]",
        "all([], # > 0) && !any([], # > 0) && none([], # > 0) && !one([], # > 0)",
        "all(result, {let x = #; x < 1})",
        "result | all(# < 1)",
        "result | filter(# > 0.15) | len() == 2",
        "sum(result) > 1.19 && sum(result) < 1.21",
        "sum([1, 2, 3]) == 6",
        "sum(map(result, 1)) == 3",
        "filter(1..6, # % 2 == 0) == [2, 4, 6]",
        "all(map([[1, 2], [3]], len(#)), # > 0)",
        "any([[1, 2], [3]], any(#, # == 3))",
    ] {
        assert!(holds(src, &r), "{src}");
    }
    let objects = Value::Array(vec![
        map(&[("x", Value::Int(1)), ("name", Value::from("a"))]),
        map(&[("x", Value::Float(2.5)), ("name", Value::from("b"))]),
    ]);
    for src in [
        "all(result, {.x > 0})",
        "any(result, .x > 2)",
        "map(result, .name) == ['a', 'b']",
        "filter(result, .name startsWith 'b')[0].x == 2.5",
        "all(result, #.x == .x)",
    ] {
        assert!(holds(src, &objects), "{src}");
    }
    assert_eq!(value_of("sum([1, 2])"), Value::Int(3));
    runtime_error("all(5, # > 0)", &r);
    runtime_error("all(nil, # > 0)", &r);
    runtime_error("all(result, #)", &r);
    runtime_error("count([1, 2])", &r);
    runtime_error("count([true, false])", &r);
    runtime_error("sum(result, # * 10) == 12", &r);
    runtime_error("sum(['a'])", &r);
    assert!(matches!(
        compile_error("all(result)"),
        ConditionError::ArgumentCount { .. }
    ));
    assert!(matches!(
        compile_error("all(result, # > 0, 1)"),
        ConditionError::ArgumentCount { .. }
    ));
    assert!(compile_error("# > 0")
        .to_string()
        .contains("inside a predicate"));
    assert!(compile_error(".x > 0")
        .to_string()
        .contains("inside a predicate"));
    assert!(compile_error("all(result, #acc > 0)")
        .to_string()
        .contains("not supported"));
    assert!(compile_error("all(result, # > 0; true)")
        .to_string()
        .contains("braces"));
}

#[test]
fn builtins() {
    let cases: Vec<(&str, Value)> = vec![
        ("len([1, 2, 3])", Value::Int(3)),
        ("len({a: 1, b: 2})", Value::Int(2)),
        // Go's len counts bytes.
        ("len('héllo')", Value::Int(6)),
        ("abs(-3)", Value::Int(3)),
        ("abs(-1.5)", Value::Float(1.5)),
        ("ceil(1.2)", Value::Float(2.0)),
        ("floor(1.8)", Value::Float(1.0)),
        ("round(1.5)", Value::Float(2.0)),
        ("round(-1.5)", Value::Float(-2.0)),
        ("round(2)", Value::Float(2.0)),
        ("int(2.7)", Value::Int(2)),
        ("int('42')", Value::Int(42)),
        ("int(-3)", Value::Int(-3)),
        ("float(2)", Value::Float(2.0)),
        ("float('1.25')", Value::Float(1.25)),
        ("string(1.5)", Value::from("1.5")),
        ("string(1e6)", Value::from("1e+06")),
        ("string(10)", Value::from("10")),
        ("string([1, 'a'])", Value::from("[1 a]")),
        ("string(nil)", Value::from("<nil>")),
        ("max(1, 3, 2)", Value::Int(3)),
        ("max(1, 2.5, 2)", Value::Float(2.5)),
        ("min(4, 2.5)", Value::Float(2.5)),
        ("mean([1, 2, 3])", Value::Float(2.0)),
        ("median([1, 2, 3, 4])", Value::Float(2.5)),
        ("median([4])", Value::Float(4.0)),
        ("first([1, 2])", Value::Int(1)),
        ("last([1, 2])", Value::Int(2)),
        ("first([])", Value::Nil),
        ("get([1, 2], 5)", Value::Nil),
        ("get([1, 2], -1)", Value::Int(2)),
        ("get({a: 1}, 'a')", Value::Int(1)),
        ("take([1, 2, 3], 2)", Value::from(vec![1i64, 2])),
        ("take([1, 2, 3], 9)", Value::from(vec![1i64, 2, 3])),
        ("keys({b: 1, a: 2})", Value::from(vec!["a", "b"])),
        ("values({b: 1, a: 2})", Value::from(vec![2i64, 1])),
        ("sort([3, 1, 2])", Value::from(vec![1i64, 2, 3])),
        ("sort(['b', 'a'], 'desc')", Value::from(vec!["b", "a"])),
        ("join(['a', 'b'], '-')", Value::from("a-b")),
        ("join(['a', 'b'])", Value::from("ab")),
        ("split('a,b', ',')", Value::from(vec!["a", "b"])),
        ("split('a,b,c', ',', 2)", Value::from(vec!["a", "b,c"])),
        ("upper('aé')", Value::from("AÉ")),
        ("lower('AÉ')", Value::from("aé")),
        ("trim('  a ')", Value::from("a")),
        ("trim('__a__', '_')", Value::from("a")),
        ("trimPrefix('HelloWorld', 'Hello')", Value::from("World")),
        ("trimSuffix('HelloWorld', 'World')", Value::from("Hello")),
        ("replace('a-b-c', '-', '+')", Value::from("a+b+c")),
        ("indexOf('apple pie', 'pie')", Value::Int(6)),
        ("lastIndexOf('apple pie apple', 'apple')", Value::Int(10)),
        ("hasPrefix('ab', 'a')", Value::Bool(true)),
        ("hasSuffix('ab', 'a')", Value::Bool(false)),
        ("type(1)", Value::from("int")),
        ("type(1.0)", Value::from("float")),
        ("type('')", Value::from("string")),
        ("type(nil)", Value::from("nil")),
        ("type([])", Value::from("array")),
        ("type({})", Value::from("map")),
        ("type(true)", Value::from("bool")),
        ("let x = 2; x * 3", Value::Int(6)),
        ("let x = 2; let y = x + 1; x * y", Value::Int(6)),
        ("1..3", Value::from(vec![1i64, 2, 3])),
        ("3..1", Value::Array(vec![])),
    ];
    for (src, want) in cases {
        assert_eq!(value_of(src), want, "{src}");
    }
}

#[test]
fn builtin_errors() {
    let nil = Value::Nil;
    for src in [
        "len(5)",
        "len(nil)",
        "abs('a')",
        "int('1.5')",
        "int(true)",
        "int(0.0 / 0)",
        "int(1e300)",
        "float('x')",
        "upper(1)",
        "max('a')",
        "mean(['a'])",
        "first(5)",
        "take([1], -1)",
        "take(1, 1)",
        "keys([1])",
        "join([1])",
        "split('a', 1)",
        "sort([1, 'a'])",
        "max([1, 2])",
        "mean(1, 2)",
        "mean(1)",
        "reverse([1])",
        "concat([1], [2])",
    ] {
        runtime_error(src, &nil);
    }
    assert!(runtime_error("len(5)", &nil)
        .to_string()
        .contains("invalid argument for len (type int)"));
    for src in [
        "len()",
        "len(1, 2)",
        "abs()",
        "replace('a', 'b')",
        "trim('a', 'b', 'c')",
        "max()",
    ] {
        assert!(
            matches!(compile_error(src), ConditionError::ArgumentCount { .. }),
            "{src}"
        );
    }
}

#[test]
fn syntax_errors_carry_positions() {
    for (src, line, column) in [
        ("", 1, 1),
        ("1 +", 1, 4),
        ("(1", 1, 3),
        ("result >\n  ]", 2, 3),
        ("'unterminated", 1, 1),
        ("[1, 2", 1, 6),
        ("{a 1}", 1, 4),
        ("1 2", 1, 3),
        ("a @ b", 1, 3),
        ("result[", 1, 8),
        ("9223372036854775808", 1, 1),
        ("1e400", 1, 1),
        ("let result = 1; result", 1, 5),
        ("not", 1, 4),
        ("1 not 2", 1, 3),
    ] {
        match compile_error(src) {
            ConditionError::Syntax { position, .. } => {
                assert_eq!((position.line, position.column), (line, column), "`{src}`");
                assert!(position.offset <= src.len());
            }
            other => panic!("`{src}`: unexpected {other:?}"),
        }
    }
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let shapes = [
        format!("{}1{}", "(".repeat(5000), ")".repeat(5000)),
        format!("{}true", "!".repeat(5000)),
        format!("{}1", "-".repeat(5000)),
        format!("{}{}", "[".repeat(5000), "]".repeat(5000)),
        format!("1{}", " + 1".repeat(5000)),
        format!("2{}", " ** 2".repeat(5000)),
        format!("result{}", ".a".repeat(5000)),
        format!("result{}", "?.a".repeat(5000)),
        format!("{}1{}", "len([".repeat(5000), "])".repeat(5000)),
        format!("{}1{}", "true ? ".repeat(5000), " : 2".repeat(5000)),
        format!("{}true{}", "all([1], ".repeat(5000), ")".repeat(5000)),
        format!("{}1", "let x = 1; ".repeat(5000)),
    ];
    for src in &shapes {
        match Condition::compile(src) {
            Err(ConditionError::TooDeep { limit, .. }) => assert_eq!(limit, parser::MAX_DEPTH),
            Err(ConditionError::TooLarge { .. }) => {}
            other => panic!("{}...: {:?}", &src[..40], other.map(|_| ())),
        }
    }
}

/// The deepest conditions the parser accepts, one of each shape that recurses.
fn deepest_accepted() -> Vec<String> {
    let n = parser::MAX_DEPTH / 2 - 2;
    vec![
        format!("{}true{}", "all([1], ".repeat(n), ")".repeat(n)),
        format!("{}1{} == 1", "len([".repeat(n), "])".repeat(n)),
        format!("(result{}) == nil", "?.a".repeat(n)),
        format!("{}true", "!!".repeat(n)),
        format!("{}1 > 0", "- -".repeat(n)),
        format!("{}true{}", "(true && ".repeat(n), ")".repeat(n)),
        // expr refuses to redeclare a variable, so each level binds its own name.
        format!(
            "{}true{}",
            (0..n / 2)
                .map(|i| format!("(let x{i} = 1; "))
                .collect::<String>(),
            ")".repeat(n / 2)
        ),
        format!("{}true{}", "[".repeat(n), "][0]".repeat(n)),
    ]
}

/// Stack for the small-stack tests: half the 2 MiB a spawned thread gets by default. At the
/// depth limit, debug builds need about 460 KiB to compile and 300 KiB to evaluate; release
/// builds about 160 KiB and 80 KiB.
const SMALL_STACK: usize = 1024 * 1024;

fn with_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn deepest_accepted_conditions_compile_within_a_small_stack() {
    with_small_stack(|| {
        for src in deepest_accepted() {
            Condition::compile(&src).unwrap_or_else(|e| panic!("{src}: {e}"));
        }
    });
}

#[test]
fn deepest_accepted_conditions_evaluate_within_a_small_stack() {
    let compiled: Vec<Condition> = deepest_accepted().iter().map(|s| compile(s)).collect();
    with_small_stack(move || {
        for c in &compiled {
            assert!(
                c.evaluate(&Value::Map(BTreeMap::new())).unwrap(),
                "{}",
                c.source()
            );
        }
    });
}

#[test]
fn budgets_stop_runaway_evaluations() {
    let nil = Value::Nil;
    assert!(matches!(
        runtime_error("len(0..2000000) > 0", &nil),
        ConditionError::BudgetExceeded { .. }
    ));
    assert!(matches!(
        runtime_error("len(map(0..999, 0..999)) > 0", &nil),
        ConditionError::BudgetExceeded { .. }
    ));
    assert!(matches!(
        runtime_error("all(0..9999, all(0..9999, all(0..999, true)))", &nil),
        ConditionError::BudgetExceeded { .. }
    ));
    assert!(matches!(
        runtime_error("-9223372036854775807 .. 9223372036854775807", &nil),
        ConditionError::BudgetExceeded { .. }
    ));
    // Copies of a large result count by size, not by element.
    let big = Value::from(vec![0.5; 100_000]);
    assert!(matches!(
        runtime_error("len(map(0..99, result)) > 0", &big),
        ConditionError::BudgetExceeded { .. }
    ));
    assert!(matches!(
        runtime_error(
            "join(split(result, ''), result) != ''",
            &Value::from("x".repeat(20_000))
        ),
        ConditionError::BudgetExceeded { .. }
    ));
    assert!(holds("len(map(0..5, result)) == 6", &big));
    // Within budget is fine.
    assert!(holds("len(0..999999) == 1000000", &nil));
}

#[test]
fn compiled_condition_is_reusable_and_shareable() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Condition>();
    let c = compile("result[0] < 0.01 && len(result) > 0");
    assert_eq!(c.source(), "result[0] < 0.01 && len(result) > 0");
    assert!(c.evaluate(&floats(&[0.005])).unwrap());
    assert!(!c.evaluate(&floats(&[0.5])).unwrap());
    assert!(c.evaluate(&floats(&[])).is_err());
    assert!(c.evaluate(&floats(&[0.001])).unwrap());
    assert!(format!("{c:?}").contains("result[0]"));
}

#[test]
fn json_values_work_as_results() {
    let json: serde_json::Value = serde_json::from_str(
        r#"{"canary": {"rate": 0.004, "count": 1200}, "stable": {"rate": 0.003}, "pValue": 0.2, "series": [1, 2.5]}"#,
    )
    .unwrap();
    let r = Value::from(&json);
    assert!(holds("result.canary.rate - result.stable.rate < 0.01", &r));
    assert!(holds(
        "result.canary.count >= 1000 && result.pValue > 0.05",
        &r
    ));
    assert!(holds("result.canary.count / 2 == 600", &r));
    assert!(holds("!isNaN(result.canary.count)", &r));
    assert!(holds("sum(result.series) == 3.5", &r));
}

/// A tiny xorshift PRNG so the fuzz test is reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

#[test]
fn random_input_never_panics() {
    let fragments = [
        "result",
        "[",
        "]",
        "(",
        ")",
        "{",
        "}",
        "0",
        "1",
        "-1",
        "0.5",
        "1e3",
        "'a'",
        "\"b\"",
        "nil",
        "true",
        "false",
        "#",
        "#index",
        ".",
        "?.",
        "?",
        ":",
        "??",
        ",",
        ";",
        "+",
        "-",
        "*",
        "/",
        "%",
        "**",
        "^",
        "==",
        "!=",
        "<",
        ">",
        "<=",
        ">=",
        "&&",
        "||",
        "!",
        "not",
        "in",
        "and",
        "or",
        "matches",
        "contains",
        "startsWith",
        "..",
        "|",
        "len",
        "all",
        "any",
        "map",
        "filter",
        "count",
        "sum",
        "max",
        "first",
        "isNaN",
        "isNil",
        "default",
        "asInt",
        "string",
        "let",
        "x",
        "=",
        "if",
        "else",
        "'['",
        "'(a+)+$'",
        " ",
        "\n",
        "é",
        "@",
        "\\",
        "`",
        "'",
        "/*",
        "*/",
    ];
    let results = [
        Value::Nil,
        Value::Float(f64::NAN),
        Value::Int(-1),
        Value::from(vec![0.5, 1.0]),
        Value::Array(vec![]),
        Value::from("ab"),
        map(&[("a", Value::from(vec![1i64, 2])), ("b", Value::Nil)]),
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut compiled, mut evaluated) = (0, 0);
    for _ in 0..20_000 {
        let len = 1 + rng.next() % 12;
        let mut src = String::new();
        for _ in 0..len {
            src.push_str(rng.pick(&fragments));
            if rng.next().is_multiple_of(3) {
                src.push(' ');
            }
        }
        match Condition::compile(&src) {
            Ok(c) => {
                compiled += 1;
                for r in &results {
                    if c.evaluate_value(r).is_ok() {
                        evaluated += 1;
                    }
                    let _ = evaluate_result(r, Some(&c), Some(&c)).map_err(|e| e.to_string());
                }
            }
            Err(e) => {
                if let ConditionError::Syntax { position, .. } = &e {
                    assert!(position.offset <= src.len(), "{src}: {e}");
                }
                assert!(!e.to_string().is_empty());
            }
        }
    }
    // The generator must reach evaluation, or the test proves little.
    assert!(compiled > 200, "only {compiled} compiled");
    assert!(evaluated > 200, "only {evaluated} evaluated");
}

/// Random well-formed expressions (some then corrupted) from a small grammar.
fn generate(rng: &mut Rng, depth: u32, out: &mut String) {
    const ATOMS: &[&str] = &[
        "result",
        "result[0]",
        "result[-1]",
        "result.a",
        "result?.b",
        "1",
        "0",
        "-1",
        "0.5",
        "1e308",
        "'a'",
        "\"ab\"",
        "nil",
        "true",
        "false",
        "[1, 2.5]",
        "{a: 1}",
        "1..3",
        "#",
        "#index",
        ".a",
    ];
    const BINARY: &[&str] = &[
        " + ",
        " - ",
        " * ",
        " / ",
        " % ",
        " ** ",
        " == ",
        " != ",
        " < ",
        " >= ",
        " && ",
        " || ",
        " in ",
        " not in ",
        " ?? ",
        " contains ",
        " matches ",
        " .. ",
    ];
    const CALLS: &[&str] = &[
        "len", "abs", "int", "float", "string", "max", "min", "sum", "mean", "first", "last",
        "isNaN", "isInf", "isNil", "asInt", "asFloat", "upper", "type", "keys",
    ];
    const PREDICATES: &[&str] = &[
        "all", "any", "none", "one", "filter", "map", "count", "find",
    ];
    if depth == 0 {
        out.push_str(rng.pick(ATOMS));
        return;
    }
    match rng.next() % 7 {
        0 => out.push_str(rng.pick(ATOMS)),
        1 => {
            out.push_str(rng.pick(&["!", "-", "not "]));
            generate(rng, depth - 1, out);
        }
        2 | 3 => {
            out.push('(');
            generate(rng, depth - 1, out);
            out.push_str(rng.pick(BINARY));
            generate(rng, depth - 1, out);
            out.push(')');
        }
        4 => {
            out.push_str(rng.pick(CALLS));
            out.push('(');
            generate(rng, depth - 1, out);
            if rng.next().is_multiple_of(4) {
                out.push_str(", ");
                generate(rng, depth - 1, out);
            }
            out.push(')');
        }
        5 => {
            out.push_str(rng.pick(PREDICATES));
            out.push('(');
            generate(rng, depth - 1, out);
            out.push_str(", {");
            generate(rng, depth - 1, out);
            out.push_str("})");
        }
        _ => {
            generate(rng, depth - 1, out);
            out.push_str(" ? ");
            generate(rng, depth - 1, out);
            out.push_str(" : ");
            generate(rng, depth - 1, out);
        }
    }
}

#[test]
fn random_expressions_never_panic() {
    let results = [
        Value::Nil,
        Value::Float(f64::NAN),
        Value::Float(f64::INFINITY),
        Value::Int(i64::MIN),
        Value::from(vec![0.5, -1.0]),
        Value::Array(vec![]),
        Value::from("a(b"),
        map(&[("a", Value::from(vec![1i64, 2])), ("b", Value::Nil)]),
        Value::Array(vec![map(&[("a", Value::Int(1))]), Value::Nil]),
    ];
    let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
    let (mut compiled, mut booleans, mut errors) = (0, 0, 0);
    let total = 5_000;
    for _ in 0..total {
        let mut src = String::new();
        let depth = 1 + (rng.next() % 5) as u32;
        generate(&mut rng, depth, &mut src);
        if rng.next().is_multiple_of(5) && !src.is_empty() {
            // Corrupt: drop one char (at a char boundary).
            let at = (rng.next() % src.len() as u64) as usize;
            if src.is_char_boundary(at) {
                src.remove(at);
            }
        }
        let Ok(c) = Condition::compile(&src) else {
            continue;
        };
        compiled += 1;
        for r in &results {
            match c.evaluate(r) {
                Ok(_) => booleans += 1,
                Err(e) => {
                    errors += 1;
                    assert!(!e.to_string().is_empty());
                }
            }
        }
        let _ = evaluate_result(&results[4], Some(&c), None);
    }
    assert!(compiled > total / 4, "only {compiled} of {total} compiled");
    // Many generated expressions fail expr's type check for some of the results.
    assert!(booleans > 500, "only {booleans} boolean outcomes");
    assert!(errors > 1000, "only {errors} errors");
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(42);
    let alphabet: Vec<char> = "result[]{}()#.?:!&|=<>+-*/%^'\"`\\ 0123456789abcdeEx_,;é\n\t\u{0}"
        .chars()
        .collect();
    for _ in 0..20_000 {
        let len = (rng.next() % 24) as usize;
        let src: String = (0..len)
            .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
            .collect();
        if let Ok(c) = Condition::compile(&src) {
            let _ = c.evaluate(&Value::from(vec![1.0]));
            let _ = c.evaluate(&Value::Nil);
        }
    }
}

// ---- the edges of expr 1.15.5 and Go, as Argo v1.9.1 runs them ----

/// Compiles and evaluates against a two-element vector: `Some(bool)` or `None` for an error.
fn outcome(src: &str) -> Option<bool> {
    let v = floats(&[1.0, 2.0]);
    Condition::compile(src).ok()?.evaluate(&v).ok()
}

/// expr 1.15.5's lexer (`parser/lexer/state.go` root, `lexer.go` scanString/scanEscape,
/// `utils.go` unescape): no backtick strings, no raw line feed inside a string, only Go's
/// escapes and the string's own quote; a surrogate escape is U+FFFD.
#[test]
fn string_literals_as_expr_1_15_5_lexes_them() {
    for src in [
        "`abc` == 'abc'",
        "\"a\nb\" == 'a'",
        "\"a\r\nb\" == 'a'",
        r#""a\'" == "a'""#,
        r#"'a\"' == 'a"'"#,
        r#""a\?" == "a?""#,
        r#""\`" == "`""#,
        r#""\X41" == "A""#,
        r#""\u{41}" == "A""#,
        r#""\e" == """#,
        r#""\0" == """#,
        r#""\477" == """#,
        r#""\x4" == """#,
        r#""\U00110000" == """#,
    ] {
        assert_eq!(outcome(src), None, "{src:?} should be an error");
    }
    for src in [
        r#""\uD83D" == "\uFFFD""#,
        r#"len("\uD83D") == 3"#,
        r#""\uD83D\uDE00" == "\uFFFD\uFFFD""#,
        r#""\U0001F600" == "😀""#,
        r#""\377" == "ÿ""#,
        r#""\xe9" == "é""#,
        r#"len("\000") == 1"#,
        "\"a\rb\" == \"a\\nb\"",
        r#"'it\'s' == "it's""#,
    ] {
        assert_eq!(outcome(src), Some(true), "{src:?}");
    }
}

/// expr 1.15.5's parser (`parser.go` parseSecondary, parsePostfixExpression): nothing
/// follows a string or number literal, and a name must follow `?.` (`?.[` came later).
#[test]
fn syntax_expr_1_15_5_does_not_have_is_an_error() {
    for src in [
        r#""abc"[1:] == "bc""#,
        r#""abc"[0] == "a""#,
        r#""abc".x == 1"#,
        "1[0] == 1",
        "result?.[0] == 1",
        "[1, 2]?.[0] == 1",
        "{'a': 1}?.['a'] == 1",
        "1 in result?.[0:1]",
    ] {
        assert_eq!(outcome(src), None, "{src:?} should be an error");
    }
    for src in [
        "let s = 'abc'; s[1:] == 'bc'",
        "('abc')[1:] == 'bc'",
        "[1, 2, 3][1:] == [2, 3] || true",
        "{'a': 1}?.a == 1",
        "{'a': 1}?.b == nil",
    ] {
        assert!(outcome(src).is_some(), "{src:?} should be valid");
    }
}

/// Go's strings.ToUpper/ToLower map each character by Unicode's simple case mapping.
#[test]
fn upper_and_lower_use_go_simple_case_mapping() {
    for src in [
        "upper('ß') == 'ß'",
        "upper('straße') == 'STRAßE'",
        "upper('ﬀ') == 'ﬀ'",
        "upper('ŉ') == 'ŉ'",
        "upper('ᾳ') == 'ᾼ'",
        "upper('ᾀ') == 'ᾈ'",
        "upper('ᾈ') == 'ᾈ'",
        "upper('ǅ') == 'Ǆ'",
        "lower('İ') == 'i'",
        "len(lower('İ')) == 1",
        "lower('ΑΣ') == 'ασ'",
        "lower('K') == 'k'",
        "upper('éa') == 'ÉA'",
    ] {
        assert_eq!(outcome(src), Some(true), "{src:?}");
    }
}

/// expr 1.15.5's `replace` takes an optional count (strings.Replace), `repeat` is
/// strings.Repeat behind a 1e6 guard, and `split` gives a `[]string`, never equal to a
/// literal `[]interface {}` (`builtin/builtin.go`).
#[test]
fn replace_repeat_and_split_as_expr_builtins() {
    for src in [
        "replace('aaa', 'a', 'b', 1) == 'baa'",
        "replace('aaa', 'a', 'b', -1) == 'bbb'",
        "replace('aaa', 'a', 'b', 0) == 'aaa'",
        "replace('aaa', '', '-', 2) == '-a-aa'",
        "replace('ab', '', '-') == '-a-b-'",
        "replace('aaa', 'a', 'b', len('x')) == 'baa'",
        "repeat('ab', 2) == 'abab'",
        "repeat('a', 0) == ''",
        "len(repeat('é', 3)) == 6",
        "split('a,b', ',') == split('a,b', ',')",
        "sort([3, 1])[0] == 1",
        "split('a,b', ',') != ['a', 'b']",
        "'a' in split('a,b', ',')",
        "join(split('a,b', ','), '-') == 'a-b'",
    ] {
        assert_eq!(outcome(src), Some(true), "{src:?}");
    }
    for src in [
        "replace('aaa', 'a', 'b', 1.5) == 'baa'",
        "replace('aaa', 'a', 'b', '1') == 'baa'",
        "replace('aaa', 'a') == 'aaa'",
        "repeat('ab', -1) == ''",
        "repeat('ab', 1000001) == ''",
        "repeat('ab', 1.5) == ''",
        "repeat(1, 2) == ''",
        // expr's sort wants one element type (`builtin/sort.go` copyArray).
        "sort([3, 1.5])[0] == 1.5",
    ] {
        assert_eq!(outcome(src), None, "{src:?} should be an error");
    }
}

/// expr's OpMap builds the map from the last pair to the first: a repeated key keeps its
/// first value (`vm/vm.go`).
#[test]
fn a_repeated_map_key_keeps_its_first_value() {
    assert_eq!(outcome("{'a': 1, 'a': 2}.a == 1"), Some(true));
    assert_eq!(outcome("{'a': 1, 'b': 2, 'a': 3}.a == 1"), Some(true));
    assert_eq!(outcome("len({'a': 1, 'a': 2}) == 1"), Some(true));
    assert_eq!(outcome("{a: 1, 'a': 2}.a == 1"), Some(true));
    assert_eq!(
        outcome("{'x': result[0], 'x': result[1]}.x == 1"),
        Some(true)
    );
}

/// Argo's isNaN/isInf are Go functions of a float64 (`utils/evaluate/evaluate.go`). expr's
/// checker turns integer literals in the argument into floats (`checker.go`
/// traverseAndReplaceIntegerNodesWithFloatNodes); an int that reaches the call at run time
/// fails it ("interface conversion: interface {} is int, not float64").
#[test]
fn an_int_reaching_isnan_at_run_time_is_an_error() {
    let empty = floats(&[]);
    let two = floats(&[1.0, 2.0]);
    for (src, result) in [
        ("isNaN(sum(result))", &empty),
        ("isNaN(sum(result[0:0]))", &two),
        ("isNaN(sum(filter(result, false)))", &two),
        ("isNaN(sum(map(result, 1)))", &two),
        ("[1, 2] | any(isNaN(#))", &two),
        ("[1.5, 2] | any(isNaN(#))", &two),
        ("map(result, int(#)) | any(isNaN(#))", &two),
        ("isNaN(first([1]))", &two),
        ("isNaN([1][0])", &two),
        ("isNaN({'a': 1}.a)", &two),
        ("isNaN(first([1]) + 1)", &two),
        ("isInf(get([1], 0))", &two),
        ("isNaN(len(result))", &two),
        ("isNaN(len(result) % 2)", &two),
    ] {
        let c = Condition::compile(src).unwrap_or_else(|e| panic!("{src}: {e}"));
        assert!(c.evaluate(result).is_err(), "{src} should be an error");
        // As a failure condition it must not let the measurement pass.
        let p = evaluate_result(result, None, Some(&c));
        assert!(p.is_err(), "{src}: {p:?}");
    }
    for src in [
        "isNaN(1)",
        "isInf(0)",
        "isNaN(-1)",
        "isNaN(1 + 1)",
        "isNaN(len(result) + 1)",
        "isNaN(len(result) * 1.0)",
        "isNaN(sum(result))",
        "isNaN(sum([1.5]))",
        "any(result, isNaN(#))",
        "isNaN(max(1, 2) + 1)",
    ] {
        assert_eq!(eval(src, &two).ok(), Some(false), "{src}");
    }
    // A JSON result's integers are float64 to Argo (web and compare metrics).
    let json = map(&[("x", Value::Int(3))]);
    assert!(!holds("isNaN(result.x)", &json));
}

/// What rollgate refuses where Argo answers (documented in docs/conditions.md): `$env`,
/// functions as values.
#[test]
fn refusals_are_errors() {
    for src in [
        "$env.result[0] == 1",
        "len($env) > 0",
        "type(isNaN) == 'func'",
        "type(asInt) == 'func'",
    ] {
        assert_eq!(outcome(src), None, "{src:?}");
    }
}
