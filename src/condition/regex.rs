//! `matches`: Go's `regexp` (RE2 syntax as Go 1.24's `regexp/syntax` parses it), run by the
//! `regex` crate, which shares RE2's linear-time guarantee, so a hostile pattern cannot stall an
//! analysis worker.
//!
//! The two syntaxes look alike and differ at the edges: in Go `\d \s \w \b` are ASCII, `\Q…\E`
//! quotes, `[a&&b]` is three literal characters, `a{,3}` and `{` are literals, `(?<n>x)` and
//! duplicate group names are fine, a repeat count over 1000 (also as a product of nested
//! counts) is an error, and so are `(?x)`, `\pL`-style names Go's tables lack, `\e`, `\u0041`
//! and `\<`-style word boundaries that Rust accepts. So a pattern is parsed here by Go's rules
//! (`src/regexp/syntax/parse.go`) and written out again in a form whose meaning is the same in
//! the `regex` crate: every literal escaped, every class spelled out.

use std::fmt::Write as _;

/// The compiled-program size one pattern may use; larger patterns are errors, not memory.
const SIZE_LIMIT: usize = 1 << 20;

/// Go's `maxRepeat`: the largest count in `x{n,m}`, and of the product of nested counts.
const MAX_REPEAT: i64 = 1000;
const MAX_PRODUCT: u64 = 1000;

/// Go's `maxHeight`: how deeply groups may nest.
const MAX_DEPTH: usize = 1000;

/// A compiled pattern; `is_match` searches anywhere in the text, like Go's `MatchString`.
#[derive(Debug, Clone)]
pub(crate) struct Regex(regex::Regex);

impl Regex {
    /// Compiles `pattern` with Go's syntax; the error says what is wrong with it.
    pub(crate) fn new(pattern: &str) -> Result<Regex, String> {
        let translated = translate(pattern)?;
        regex::RegexBuilder::new(&translated)
            .size_limit(SIZE_LIMIT)
            .build()
            .map(Regex)
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => "pattern too large".to_string(),
                regex::Error::Syntax(text) => text
                    .lines()
                    .last()
                    .unwrap_or("invalid pattern")
                    .trim()
                    .to_string(),
                other => other.to_string(),
            })
    }

    /// True when the pattern matches anywhere in `text`.
    pub(crate) fn is_match(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
}

/// Go's error text: `error parsing regexp: <code>: `<expr>``.
fn go_error(code: &str, expr: &str) -> String {
    format!("{code}: `{expr}`")
}

/// Go's `\d`, `\s`, `\w` (perl_groups.go): ASCII only.
const PERL_DIGIT: &str = r"0-9";
const PERL_SPACE: &str = r"\t\n\x0C\r ";
const PERL_WORD: &str = r"0-9A-Za-z_";

/// Go's POSIX classes (perl_groups.go), as ranges in the `regex` crate's class syntax.
fn posix_class(name: &str) -> Option<&'static str> {
    Some(match name {
        "alnum" => r"0-9A-Za-z",
        "alpha" => r"A-Za-z",
        "ascii" => r"\x00-\x7F",
        "blank" => r"\t ",
        "cntrl" => r"\x00-\x1F\x7F",
        "digit" => r"0-9",
        "graph" => r"!-~",
        "lower" => r"a-z",
        "print" => r" -~",
        "punct" => r"!-/:-@\[-`\{-~",
        "space" => r"\t\n\x0B\x0C\r ",
        "upper" => r"A-Z",
        "word" => r"0-9A-Za-z_",
        "xdigit" => r"0-9A-Fa-f",
        _ => return None,
    })
}

/// Go 1.24's `unicode.Categories` keys.
const GO_CATEGORIES: &[&str] = &[
    "C", "Cc", "Cf", "Co", "Cs", "L", "Ll", "Lm", "Lo", "Lt", "Lu", "M", "Mc", "Me", "Mn", "N",
    "Nd", "Nl", "No", "P", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "S", "Sc", "Sk", "Sm", "So",
    "Z", "Zl", "Zp", "Zs",
];

/// Go 1.24's `unicode.Scripts` keys (Unicode 15.0).
const GO_SCRIPTS: &[&str] = &[
    "Adlam",
    "Ahom",
    "Anatolian_Hieroglyphs",
    "Arabic",
    "Armenian",
    "Avestan",
    "Balinese",
    "Bamum",
    "Bassa_Vah",
    "Batak",
    "Bengali",
    "Bhaiksuki",
    "Bopomofo",
    "Brahmi",
    "Braille",
    "Buginese",
    "Buhid",
    "Canadian_Aboriginal",
    "Carian",
    "Caucasian_Albanian",
    "Chakma",
    "Cham",
    "Cherokee",
    "Chorasmian",
    "Common",
    "Coptic",
    "Cuneiform",
    "Cypriot",
    "Cypro_Minoan",
    "Cyrillic",
    "Deseret",
    "Devanagari",
    "Dives_Akuru",
    "Dogra",
    "Duployan",
    "Egyptian_Hieroglyphs",
    "Elbasan",
    "Elymaic",
    "Ethiopic",
    "Georgian",
    "Glagolitic",
    "Gothic",
    "Grantha",
    "Greek",
    "Gujarati",
    "Gunjala_Gondi",
    "Gurmukhi",
    "Han",
    "Hangul",
    "Hanifi_Rohingya",
    "Hanunoo",
    "Hatran",
    "Hebrew",
    "Hiragana",
    "Imperial_Aramaic",
    "Inherited",
    "Inscriptional_Pahlavi",
    "Inscriptional_Parthian",
    "Javanese",
    "Kaithi",
    "Kannada",
    "Katakana",
    "Kawi",
    "Kayah_Li",
    "Kharoshthi",
    "Khitan_Small_Script",
    "Khmer",
    "Khojki",
    "Khudawadi",
    "Lao",
    "Latin",
    "Lepcha",
    "Limbu",
    "Linear_A",
    "Linear_B",
    "Lisu",
    "Lycian",
    "Lydian",
    "Mahajani",
    "Makasar",
    "Malayalam",
    "Mandaic",
    "Manichaean",
    "Marchen",
    "Masaram_Gondi",
    "Medefaidrin",
    "Meetei_Mayek",
    "Mende_Kikakui",
    "Meroitic_Cursive",
    "Meroitic_Hieroglyphs",
    "Miao",
    "Modi",
    "Mongolian",
    "Mro",
    "Multani",
    "Myanmar",
    "Nabataean",
    "Nag_Mundari",
    "Nandinagari",
    "New_Tai_Lue",
    "Newa",
    "Nko",
    "Nushu",
    "Nyiakeng_Puachue_Hmong",
    "Ogham",
    "Ol_Chiki",
    "Old_Hungarian",
    "Old_Italic",
    "Old_North_Arabian",
    "Old_Permic",
    "Old_Persian",
    "Old_Sogdian",
    "Old_South_Arabian",
    "Old_Turkic",
    "Old_Uyghur",
    "Oriya",
    "Osage",
    "Osmanya",
    "Pahawh_Hmong",
    "Palmyrene",
    "Pau_Cin_Hau",
    "Phags_Pa",
    "Phoenician",
    "Psalter_Pahlavi",
    "Rejang",
    "Runic",
    "Samaritan",
    "Saurashtra",
    "Sharada",
    "Shavian",
    "Siddham",
    "SignWriting",
    "Sinhala",
    "Sogdian",
    "Sora_Sompeng",
    "Soyombo",
    "Sundanese",
    "Syloti_Nagri",
    "Syriac",
    "Tagalog",
    "Tagbanwa",
    "Tai_Le",
    "Tai_Tham",
    "Tai_Viet",
    "Takri",
    "Tamil",
    "Tangsa",
    "Tangut",
    "Telugu",
    "Thaana",
    "Thai",
    "Tibetan",
    "Tifinagh",
    "Tirhuta",
    "Toto",
    "Ugaritic",
    "Vai",
    "Vithkuqi",
    "Wancho",
    "Warang_Citi",
    "Yezidi",
    "Yi",
    "Zanabazar_Square",
];

/// One group being parsed: what a repetition may apply to and how many copies the nested
/// counted repetitions inside it make (Go's `repeatIsValid` bounds their product).
#[derive(Default)]
struct Frame {
    /// The largest nested-repeat product of the items before the last one.
    done: u64,
    /// The last item's nested-repeat product; `None` after `(` or `|` (nothing to repeat).
    last: Option<u64>,
}

impl Frame {
    fn item(&mut self, worst: u64) {
        if let Some(w) = self.last {
            self.done = self.done.max(w);
        }
        self.last = Some(worst);
    }

    fn worst(&self) -> u64 {
        self.done.max(self.last.unwrap_or(1)).max(1)
    }
}

/// Rewrites Go regexp syntax as the `regex` crate's, or gives Go's error.
fn translate(pattern: &str) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut stack = vec![Frame::default()];
    let mut t = pattern;
    let mut last_repeat: &str = "";
    while let Some(c) = t.chars().next() {
        let mut repeat = "";
        let top = stack.len() - 1;
        match c {
            '(' if t[1..].starts_with('?') => {
                let (rest, opened) = perl_flags(t, &mut out)?;
                t = rest;
                if opened {
                    stack.push(Frame::default());
                }
            }
            '(' => {
                out.push('(');
                stack.push(Frame::default());
                t = &t[1..];
            }
            '|' => {
                let f = &mut stack[top];
                if let Some(w) = f.last.take() {
                    f.done = f.done.max(w);
                }
                out.push('|');
                t = &t[1..];
            }
            ')' => {
                if stack.len() == 1 {
                    return Err(go_error("unexpected )", pattern));
                }
                let inner = stack.pop().map_or(1, |f| f.worst());
                if let Some(parent) = stack.last_mut() {
                    parent.item(inner);
                }
                out.push(')');
                t = &t[1..];
            }
            '^' | '$' | '.' => {
                stack[top].item(1);
                out.push(c);
                t = &t[1..];
            }
            '[' => {
                t = class(t, &mut out)?;
                stack[top].item(1);
            }
            '*' | '+' | '?' => {
                let before = t;
                let mut after = &t[1..];
                if after.starts_with('?') {
                    after = &after[1..];
                }
                let op = &before[..before.len() - after.len()];
                check_repeat(&stack[top], last_repeat, after, op)?;
                out.push_str(op);
                repeat = before;
                t = after;
            }
            '{' => match parse_repeat(t) {
                None => {
                    push_literal(&mut out, '{');
                    stack[top].item(1);
                    t = &t[1..];
                }
                Some((min, max, after)) => {
                    let before = t;
                    let text = &before[..before.len() - after.len()];
                    if !(0..=MAX_REPEAT).contains(&min)
                        || max > MAX_REPEAT
                        || (max >= 0 && min > max)
                    {
                        return Err(go_error("invalid repeat count", text));
                    }
                    let mut after = after;
                    if after.starts_with('?') {
                        after = &after[1..];
                    }
                    let op = &before[..before.len() - after.len()];
                    check_repeat(&stack[top], last_repeat, after, op)?;
                    // Go's repeatIsValid: the count times the nested counts inside.
                    let m = if max == -1 { min } else { max };
                    let m = u64::try_from(m).unwrap_or(0);
                    let f = &mut stack[top];
                    let inner = f.last.unwrap_or(1);
                    if (min >= 2 || max >= 2) && m > 0 && m.saturating_mul(inner) > MAX_PRODUCT {
                        return Err(go_error("invalid repeat count", text));
                    }
                    f.last = Some(if m == 0 { 1 } else { m.saturating_mul(inner) });
                    out.push_str(op);
                    repeat = before;
                    t = after;
                }
            },
            '\\' => {
                t = escape_outside_class(t, &mut out)?;
                stack[top].item(1);
            }
            c => {
                push_literal(&mut out, c);
                stack[top].item(1);
                t = &t[c.len_utf8()..];
            }
        }
        if stack.len() > MAX_DEPTH {
            return Err(go_error("expression nests too deeply", pattern));
        }
        last_repeat = repeat;
    }
    if stack.len() != 1 {
        return Err(go_error("missing closing )", pattern));
    }
    Ok(out)
}

/// Go's checks before a repetition operator `op`: not right after another one (`a**`), and
/// not with nothing to repeat (`*a`, `(|*)`).
fn check_repeat(frame: &Frame, last_repeat: &str, after: &str, op: &str) -> Result<(), String> {
    if !last_repeat.is_empty() {
        let text = &last_repeat[..last_repeat.len() - after.len()];
        return Err(go_error("invalid nested repetition operator", text));
    }
    if frame.last.is_none() {
        return Err(go_error("missing argument to repetition operator", op));
    }
    Ok(())
}

/// Go's `parseRepeat`: `{n}`, `{n,}` or `{n,m}` (no leading zeros), else `None` (a literal
/// `{`). A number too large gives -1.
fn parse_repeat(s: &str) -> Option<(i64, i64, &str)> {
    let s = s.strip_prefix('{')?;
    let (min, s) = parse_int(s)?;
    let (max, s) = if let Some(s) = s.strip_prefix(',') {
        if s.starts_with('}') {
            (-1, s)
        } else {
            let (max, s) = parse_int(s)?;
            (max, s)
        }
    } else {
        (min, s)
    };
    let rest = s.strip_prefix('}')?;
    // A count too large to read is -2 here, -1 in Go; either way an invalid count.
    let min = if max < -1 { -1 } else { min };
    Some((min, max, rest))
}

/// Go's `parseInt` for repeat counts: decimal digits without a leading zero; -1 when too big.
fn parse_int(s: &str) -> Option<(i64, &str)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || (digits >= 2 && s.starts_with('0')) {
        return None;
    }
    let mut n: i64 = 0;
    for b in s[..digits].bytes() {
        if n >= 100_000_000 {
            n = -2;
            break;
        }
        n = n * 10 + i64::from(b - b'0');
    }
    Some((n, &s[digits..]))
}

/// `(?flags)`, `(?flags:`, `(?P<name>` and `(?<name>`: returns the rest of the pattern and
/// whether a group was opened.
fn perl_flags<'p>(s: &'p str, out: &mut String) -> Result<(&'p str, bool), String> {
    let b = s.as_bytes();
    let with_p = b.len() > 4 && b[2] == b'P' && b[3] == b'<';
    let with_name = b.len() > 3 && b[2] == b'<';
    if with_p || with_name {
        let start = if with_p { 4 } else { 3 };
        let Some(end) = s.find('>') else {
            return Err(go_error("invalid named capture", s));
        };
        let name = &s[start..end];
        if name.is_empty() || !name.bytes().all(|c| c == b'_' || c.is_ascii_alphanumeric()) {
            return Err(go_error("invalid named capture", &s[..=end]));
        }
        // Names do not change what matches; Go allows a name twice, the crate does not.
        out.push('(');
        return Ok((&s[end + 1..], true));
    }
    // Each of i, m, s, U takes the sign it was last given.
    let mut state: [Option<bool>; 4] = [None; 4];
    let mut negative = false;
    let mut saw_flag = false;
    let mut t = &s[2..];
    while let Some(c) = t.chars().next() {
        t = &t[c.len_utf8()..];
        let slot = match c {
            'i' => 0,
            'm' => 1,
            's' => 2,
            'U' => 3,
            '-' if !negative => {
                negative = true;
                saw_flag = false;
                continue;
            }
            ':' | ')' if !negative || saw_flag => {
                let mut on = String::new();
                let mut off = String::new();
                for (letter, v) in ['i', 'm', 's', 'U'].iter().zip(state) {
                    match v {
                        Some(true) => on.push(*letter),
                        Some(false) => off.push(*letter),
                        None => {}
                    }
                }
                let flags = if off.is_empty() {
                    on
                } else {
                    format!("{on}-{off}")
                };
                if c == ':' {
                    let _ = write!(out, "(?{flags}:");
                    return Ok((t, true));
                }
                if !flags.is_empty() {
                    let _ = write!(out, "(?{flags})");
                }
                return Ok((t, false));
            }
            _ => break,
        };
        state[slot] = Some(!negative);
        saw_flag = true;
    }
    Err(go_error(
        "invalid or unsupported Perl syntax",
        &s[..s.len() - t.len()],
    ))
}

/// Writes one literal character so that it means itself to the `regex` crate.
fn push_literal(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:X}}}", u32::from(c));
    }
}

/// A code point from an escape; Go allows surrogates, which match nothing in valid UTF-8.
fn push_code_point(out: &mut String, r: u32) {
    match char::from_u32(r) {
        Some(c) => push_literal(out, c),
        None => out.push_str(NOTHING),
    }
}

/// A class that matches no character.
const NOTHING: &str = r"[^\x00-\x{10FFFF}]";

/// An escape outside a class: assertions, `\Q…\E`, classes, then single characters.
fn escape_outside_class<'p>(t: &'p str, out: &mut String) -> Result<&'p str, String> {
    match t.as_bytes().get(1) {
        Some(b'A') => {
            out.push_str(r"\A");
            return Ok(&t[2..]);
        }
        Some(b'z') => {
            out.push_str(r"\z");
            return Ok(&t[2..]);
        }
        // Go's word boundary is ASCII's.
        Some(b'b') => {
            out.push_str(r"(?-u:\b)");
            return Ok(&t[2..]);
        }
        Some(b'B') => {
            out.push_str(r"(?-u:\B)");
            return Ok(&t[2..]);
        }
        Some(b'C') => return Err(go_error("invalid escape sequence", r"\C")),
        Some(b'Q') => {
            let body = &t[2..];
            let (lit, rest) = match body.find(r"\E") {
                Some(i) => (&body[..i], &body[i + 2..]),
                None => (body, ""),
            };
            // Go pushes each character as its own literal; a repetition after `\E` applies
            // to the last one, as it does here.
            for c in lit.chars() {
                push_literal(out, c);
            }
            return Ok(rest);
        }
        _ => {}
    }
    let mut class = String::new();
    if let Some(rest) = unicode_class(t, &mut class)? {
        let _ = write!(out, "[{class}]");
        return Ok(rest);
    }
    if let Some(rest) = perl_class(t, &mut class) {
        let _ = write!(out, "[{class}]");
        return Ok(rest);
    }
    let (r, rest) = parse_escape(t)?;
    push_code_point(out, r);
    Ok(rest)
}

/// Go's `parseEscape` for a single character: returns the code point and the rest.
fn parse_escape(s: &str) -> Result<(u32, &str), String> {
    let t = &s[1..];
    let Some(c) = t.chars().next() else {
        return Err(go_error("trailing backslash at end of expression", ""));
    };
    let mut t = &t[c.len_utf8()..];
    let bad = |t: &str| Err(go_error("invalid escape sequence", &s[..s.len() - t.len()]));
    match c {
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((u32::from(c), t)),
        '1'..='7' if !t.starts_with(|d: char| ('0'..='7').contains(&d)) => bad(t),
        '0'..='7' => {
            let mut r = c.to_digit(8).unwrap_or(0);
            for _ in 1..3 {
                match t.chars().next().and_then(|d| d.to_digit(8)) {
                    Some(d) => {
                        r = r * 8 + d;
                        t = &t[1..];
                    }
                    None => break,
                }
            }
            Ok((r, t))
        }
        'x' => {
            let Some(c) = t.chars().next() else {
                return bad(t);
            };
            t = &t[c.len_utf8()..];
            if c == '{' {
                let mut r: u32 = 0;
                let mut n = 0;
                loop {
                    let Some(c) = t.chars().next() else {
                        return bad(t);
                    };
                    t = &t[c.len_utf8()..];
                    if c == '}' {
                        break;
                    }
                    let Some(v) = c.to_digit(16) else {
                        return bad(t);
                    };
                    r = r * 16 + v;
                    if r > 0x10FFFF {
                        return bad(t);
                    }
                    n += 1;
                }
                if n == 0 {
                    return bad(t);
                }
                return Ok((r, t));
            }
            let x = c.to_digit(16);
            let Some(c2) = t.chars().next() else {
                return bad(t);
            };
            t = &t[c2.len_utf8()..];
            match (x, c2.to_digit(16)) {
                (Some(x), Some(y)) => Ok((x * 16 + y, t)),
                _ => bad(t),
            }
        }
        'a' => Ok((7, t)),
        'f' => Ok((12, t)),
        'n' => Ok((10, t)),
        'r' => Ok((13, t)),
        't' => Ok((9, t)),
        'v' => Ok((11, t)),
        _ => bad(t),
    }
}

/// `\d \D \s \S \w \W` at the start of `s`, written into `class` (the inside of a class).
fn perl_class<'p>(s: &'p str, class: &mut String) -> Option<&'p str> {
    let (set, negated) = match s.as_bytes().get(..2)? {
        br"\d" => (PERL_DIGIT, false),
        br"\D" => (PERL_DIGIT, true),
        br"\s" => (PERL_SPACE, false),
        br"\S" => (PERL_SPACE, true),
        br"\w" => (PERL_WORD, false),
        br"\W" => (PERL_WORD, true),
        _ => return None,
    };
    push_set(class, set, negated);
    Some(&s[2..])
}

fn push_set(class: &mut String, set: &str, negated: bool) {
    if negated {
        let _ = write!(class, "[^{set}]");
    } else {
        class.push_str(set);
    }
}

/// `\pX`, `\p{Name}`, `\PX`, `\P{^Name}` at the start of `s` with Go 1.24's names, written
/// into `class`; `None` when `s` does not start with one.
fn unicode_class<'p>(s: &'p str, class: &mut String) -> Result<Option<&'p str>, String> {
    let negated = match s.as_bytes().get(..2) {
        Some(br"\p") => false,
        Some(br"\P") => true,
        _ => return Ok(None),
    };
    let t = &s[2..];
    let (seq, name, rest) = match t.chars().next() {
        Some('{') => {
            let Some(end) = s.find('}') else {
                return Err(go_error("invalid character class range", s));
            };
            (&s[..=end], &s[3..end], &s[end + 1..])
        }
        Some(c) => {
            let n = 2 + c.len_utf8();
            (&s[..n], &s[2..n], &s[n..])
        }
        None => (s, "", ""),
    };
    let (name, negated) = match name.strip_prefix('^') {
        Some(n) => (n, !negated),
        None => (name, negated),
    };
    if name == "Any" {
        push_set(class, r"\x00-\x{10FFFF}", negated);
    } else if GO_CATEGORIES.contains(&name) || GO_SCRIPTS.contains(&name) {
        let p = if negated { 'P' } else { 'p' };
        let _ = write!(class, r"\{p}{{{name}}}");
    } else {
        return Err(go_error("invalid character class range", seq));
    }
    Ok(Some(rest))
}

/// Go's `parseClass`: a bracketed class at the start of `s`, written out with every member
/// spelled so that the crate's class syntax (nested classes, `&&`, `--`, `~~`) cannot
/// reinterpret it.
fn class<'p>(s: &'p str, out: &mut String) -> Result<&'p str, String> {
    let mut t = &s[1..];
    let mut body = String::new();
    let mut negated = false;
    if t.starts_with('^') {
        negated = true;
        t = &t[1..];
    }
    let mut first = true;
    while t.is_empty() || !t.starts_with(']') || first {
        first = false;
        if t.len() > 2 && t.starts_with("[:") {
            if let Some(i) = t[2..].find(":]") {
                let name = &t[..i + 4];
                let inner = &t[2..i + 2];
                let (inner, neg) = match inner.strip_prefix('^') {
                    Some(n) => (n, true),
                    None => (inner, false),
                };
                let Some(set) = posix_class(inner) else {
                    return Err(go_error("invalid character class range", name));
                };
                push_set(&mut body, set, neg);
                t = &t[i + 4..];
                continue;
            }
        }
        if let Some(rest) = unicode_class(t, &mut body)? {
            t = rest;
            continue;
        }
        if let Some(rest) = perl_class(t, &mut body) {
            t = rest;
            continue;
        }
        let rng = t;
        let (lo, rest) = class_char(t, s)?;
        t = rest;
        let mut hi = lo;
        if t.len() >= 2 && t.starts_with('-') && !t[1..].starts_with(']') {
            let (h, rest) = class_char(&t[1..], s)?;
            t = rest;
            hi = h;
            if hi < lo {
                return Err(go_error(
                    "invalid character class range",
                    &rng[..rng.len() - t.len()],
                ));
            }
        }
        push_range(&mut body, lo, hi);
    }
    let _ = write!(out, "[{}{body}]", if negated { "^" } else { "" });
    Ok(&t[1..])
}

fn class_char<'p>(s: &'p str, whole: &str) -> Result<(u32, &'p str), String> {
    match s.chars().next() {
        None => Err(go_error("missing closing ]", whole)),
        Some('\\') => parse_escape(s),
        Some(c) => Ok((u32::from(c), &s[c.len_utf8()..])),
    }
}

/// A range of code points inside a class; the surrogates in it (Go allows them, they match
/// nothing in valid UTF-8) are left out.
fn push_range(body: &mut String, lo: u32, hi: u32) {
    let mut put = |a: u32, b: u32| {
        let _ = write!(body, "\\x{{{a:X}}}-\\x{{{b:X}}}");
    };
    const SURROGATES: (u32, u32) = (0xD800, 0xDFFF);
    if hi < SURROGATES.0 || lo > SURROGATES.1 {
        put(lo, hi);
        return;
    }
    if lo < SURROGATES.0 {
        put(lo, SURROGATES.0 - 1);
    }
    if hi > SURROGATES.1 {
        put(SURROGATES.1 + 1, hi);
    }
    if lo >= SURROGATES.0 && hi <= SURROGATES.1 {
        body.push_str(NOTHING);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, text: &str) -> bool {
        Regex::new(pattern)
            .unwrap_or_else(|e| panic!("{pattern}: {e}"))
            .is_match(text)
    }

    fn rejected(pattern: &str) -> String {
        match Regex::new(pattern) {
            Ok(_) => panic!("{pattern} should not compile"),
            Err(e) => e,
        }
    }

    #[test]
    fn searches_anywhere_with_re2_syntax() {
        assert!(m("abc", "xxabcxx"));
        assert!(m("^ab", "abc"));
        assert!(!m("^bc", "abc"));
        assert!(m(r"^\d+$", "12345"));
        assert!(m("(?i)^hello$", "HeLLo"));
        assert!(m(r"\bfoo\b", "a foo b"));
        assert!(m("(?s)a.b", "a\nb"));
        assert!(!m("a.b", "a\nb"));
        assert!(m("(?m)^b$", "a\nb\nc"));
        assert!(m("(?U)^a+$", "aaa"));
    }

    /// Go's `\d \s \w` and `\b` are ASCII (regexp/syntax perl_groups.go; `\s` is
    /// `[\t\n\f\r ]`, without `\v`); the crate's are Unicode.
    #[test]
    fn perl_classes_and_word_boundaries_are_ascii() {
        assert!(!m(r"^\s$", "\u{a0}"));
        assert!(m(r"^\S$", "\u{a0}"));
        assert!(!m(r"\s", "\u{b}"));
        assert!(m("[[:space:]]", "\u{b}"));
        assert!(!m(r"^\d$", "\u{663}"));
        assert!(m(r"^\D$", "\u{663}"));
        assert!(!m(r"^\w$", "é"));
        assert!(m(r"^\W$", "é"));
        assert!(!m(r"^\w+$", "naïve"));
        assert!(!m(r"\bé", " é"));
        assert!(m(r"a\b", "aé"));
        assert!(!m(r"\Ba", "éa"));
        assert!(m(r"\Ba", "ba"));
        assert!(!m("[[:alpha:]]", "é"));
        assert!(m("[[:punct:]]", "$"));
        assert!(!m("[[:punct:]]", "¡"));
        // Case folding adds what Go's folding adds: ſ and the Kelvin sign to \w.
        assert!(m(r"(?i)\w", "ſ"));
        assert!(m(r"(?i)\w", "\u{212a}"));
        assert!(!m(r"(?i)\W", "\u{212a}"));
        // Unicode classes stay Unicode.
        assert!(m(r"\pN", "\u{663}"));
        assert!(m(r"^\p{Greek}$", "α"));
        assert!(m(r"\p{^Greek}", "a"));
        assert!(m(r"\PL", "1"));
        assert!(m(r"\p{Any}", "a"));
    }

    /// `\Q…\E` quotes (parse.go, `case 'Q'`); an unterminated `\Q` quotes to the end.
    #[test]
    fn quoting_with_q_and_e() {
        assert!(m(r"^\Qa.b\E$", "a.b"));
        assert!(!m(r"\Qa.b\E", "axb"));
        assert!(m(r"\Qa.b", "a.b"));
        assert!(m(r"(?i)\QA.B\E", "a.b"));
        assert!(m(r"^\Qa+\E+$", "a++"));
        assert!(m(r"^a\Q\Eb$", "ab"));
        assert!(rejected(r"[\Qx\E]").contains("invalid escape"));
    }

    /// Go 1.22 added `(?<name>…)` to `(?P<name>…)` (Argo v1.9.1 builds with Go 1.24); names
    /// are `[A-Za-z0-9_]+` and may repeat.
    #[test]
    fn named_groups_as_go_reads_them() {
        assert!(m("(?P<x>a)", "a"));
        assert!(m("(?<x>a)", "a"));
        assert!(m("(?P<1x>a)", "a"));
        assert!(m("(?P<x>a)(?P<x>b)", "ab"));
        for p in [
            "(?'x'a)",
            "(?P<é>a)",
            "(?P<>a)",
            "(?P=x)",
            "(?P<x-y>a)",
            "(?<x",
        ] {
            assert!(
                rejected(p).contains("named capture") || rejected(p).contains("Perl"),
                "{p}"
            );
        }
    }

    /// Go's maxRepeat: no count over 1000, nor a product of nested counts over 1000
    /// (parse.go repeatIsValid); a `{` that is not a well-formed count is a literal.
    #[test]
    fn repeat_counts_follow_go() {
        assert!(m("^a{1000}$", &"a".repeat(1000)));
        for p in [
            "a{1001}",
            "a{2,1001}",
            "a{1001,}",
            "a{100000000}",
            "(a{2}){501}",
            "((a{10}){10}){11}",
            "(a{2}|b{501}){2}",
            "(?:a{500}){3,}",
            "a{2,1}",
        ] {
            assert!(rejected(p).contains("invalid repeat count"), "{p}");
        }
        for p in [
            "((a{10}){10}){10}",
            "(?:a{0}){1000}",
            "(?:a{1000})*",
            "(?:a*){1000}",
        ] {
            assert!(Regex::new(p).is_ok(), "{p}");
        }
        assert!(m("^a{,3}$", "a{,3}"));
        assert!(m("^{$", "{"));
        assert!(m("^a{$", "a{"));
        assert!(m("^x{01}$", "x{01}"));
        for p in ["a**", "a++", "a{2}{3}", "a*{2}", "a??*", "*a", "(*)", "a|*"] {
            assert!(Regex::new(p).is_err(), "{p}");
        }
    }

    /// What the crate accepts and Go rejects.
    #[test]
    fn syntax_go_does_not_have_is_an_error() {
        for p in [
            "(?x)a b",
            "(?u)a",
            "(?=a)",
            "(?!a)",
            "(?<=a)b",
            "(?#c)a",
            r"\e",
            r"\u0041",
            r"\cA",
            r"\N{LATIN SMALL LETTER A}",
            r"\Z",
            r"\1",
            r"\8",
            r"\C",
            r"\é",
            r"\p{Letter}",
            r"\p{greek}",
            r"\p{ASCII}",
            r"\p{Cn}",
            r"\p{LC}",
            r"\p{IsGreek}",
            r"\p{sc=Greek}",
            "[[:foo:]]",
            "[a--b]",
            r"\x{110000}",
            r"[\b]",
            "(?i-)a",
            "(?-)a",
            "(",
            ")",
            "[a",
            r"\",
        ] {
            assert!(Regex::new(p).is_err(), "{p}");
        }
    }

    /// What Go reads as plain characters the crate would read as syntax.
    #[test]
    fn characters_go_takes_literally() {
        assert!(m(r"\<a", "<a"));
        assert!(!m(r"\<a", "a"));
        assert!(!m(r"a\>", "a"));
        assert!(!m(r"\b{start}a", "a"));
        assert!(m("[a&&b]", "&"));
        assert!(m("[a~~b]", "~"));
        assert!(m("^[[a]]$", "a]"));
        assert!(!m("^[[a]]$", "a"));
        assert!(m("[]a]", "]"));
        assert!(m(r"[\d-z]", "-"));
        assert!(m("(?)a", "a"));
        assert!(m("(?ii)a", "A"));
        assert!(m(r"\0", "\0"));
        assert!(m(r"^\08$", "\u{0}8"));
        assert!(m(r"\12", "\n"));
        assert!(m(r"\x{41}\x41", "AA"));
        assert!(m(r"\_\%\ ", "_% "));
        assert!(!m(r"\x{D800}", "\u{FFFD}"));
    }

    #[test]
    fn patterns_over_the_size_limit_are_errors() {
        assert_eq!(
            Regex::new(r"\pL{1000}\pL{1000}\pL{1000}").unwrap_err(),
            "pattern too large"
        );
    }

    #[test]
    fn pathological_patterns_run_in_linear_time() {
        let text = format!("{}b", "a".repeat(50_000));
        assert!(!m("^(a+)+$", &text));
    }
}
