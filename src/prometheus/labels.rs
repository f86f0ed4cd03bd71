//! A series' label set in a compact, immutable form.
//!
//! A vector of 200k series is common for fleet queries; a `BTreeMap<String, String>` per series
//! costs a dozen allocations and ~700 bytes, which alone is 3x the JSON it came from. `Labels`
//! keeps every name and value of one series in a single string plus one offset table (two
//! allocations, no per-label overhead) and answers lookups by binary search.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The labels of one series: sorted by name, names unique (the last one wins on duplicates,
/// as when decoding a JSON object into a map).
///
/// Use it like a read-only sorted map: [`get`](Labels::get), [`iter`](Labels::iter),
/// [`len`](Labels::len); build one with `collect()` or `Labels::from(btree_map)`.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels {
    /// `name0 value0 name1 value1 ...` with no separators.
    text: Box<str>,
    /// End offset in `text` of each name and each value, in that order.
    ends: Box<[u32]>,
}

impl Labels {
    /// An empty label set (no allocation).
    pub fn new() -> Labels {
        Labels::default()
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.ends.len() / 2
    }

    /// Whether there are no labels (e.g. the result of `sum(...)`).
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The value of label `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (n, v) = self.entry(mid);
            match n.cmp(name) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(v),
            }
        }
        None
    }

    /// Whether label `name` is present.
    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// `(name, value)` pairs in name order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            labels: self,
            next: 0,
        }
    }

    /// A `BTreeMap` copy, for callers that want to modify the set.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn entry(&self, i: usize) -> (&str, &str) {
        let start = match i.checked_sub(1) {
            Some(prev) => self.end(2 * prev + 1),
            None => 0,
        };
        let name_end = self.end(2 * i);
        let value_end = self.end(2 * i + 1);
        (
            self.text.get(start..name_end).unwrap_or_default(),
            self.text.get(name_end..value_end).unwrap_or_default(),
        )
    }

    fn end(&self, i: usize) -> usize {
        self.ends.get(i).map_or(0, |&e| e as usize)
    }
}

/// Iterator over `(name, value)` pairs of a [`Labels`], in name order.
#[derive(Debug)]
pub struct Iter<'a> {
    labels: &'a Labels,
    next: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.labels.len() {
            return None;
        }
        let item = self.labels.entry(self.next);
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.labels.len().saturating_sub(self.next);
        (left, Some(left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Labels {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Labels {
    /// Sorts by name; on duplicate names the last pair wins.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Labels {
        let mut builder = LabelsBuilder::default();
        for (name, value) in iter {
            builder.push(name.as_ref(), value.as_ref());
        }
        builder.build().unwrap_or_default()
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(map: BTreeMap<String, String>) -> Labels {
        map.iter().collect()
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl fmt::Display for Labels {
    /// PromQL selector style: `{job="api", pod="p-1"}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (name, value)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name}=\"")?;
            for c in value.chars() {
                match c {
                    '\\' => f.write_str("\\\\")?,
                    '"' => f.write_str("\\\"")?,
                    '\n' => f.write_str("\\n")?,
                    c => write!(f, "{c}")?,
                }
            }
            f.write_str("\"")?;
        }
        f.write_str("}")
    }
}

impl Serialize for Labels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (name, value) in self {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Labels, D::Error> {
        deserializer.deserialize_map(LabelsVisitor {
            builder: &mut LabelsBuilder::default(),
        })
    }
}

/// Reads a JSON object of string values into a [`Labels`], reusing the caller's scratch space
/// so that parsing many series allocates only the final two buffers per series.
pub(crate) struct LabelsVisitor<'b> {
    pub(crate) builder: &'b mut LabelsBuilder,
}

impl<'de> Visitor<'de> for LabelsVisitor<'_> {
    type Value = Labels;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of label names to string values")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Labels, A::Error> {
        self.builder.clear();
        while let Some(name_span) = map.next_key_seed(TextSeed(self.builder))? {
            let value_span = map.next_value_seed(TextSeed(self.builder))?;
            self.builder.spans.push((name_span, value_span));
        }
        self.builder
            .build()
            .ok_or_else(|| serde::de::Error::custom("label set larger than 4 GiB"))
    }
}

/// Appends one JSON string to the builder's text (escaped or not) and yields its span.
struct TextSeed<'b>(&'b mut LabelsBuilder);

impl<'de> serde::de::DeserializeSeed<'de> for TextSeed<'_> {
    type Value = (usize, usize);

    fn deserialize<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<(usize, usize), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for TextSeed<'_> {
    type Value = (usize, usize);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<(usize, usize), E> {
        let start = self.0.text.len();
        self.0.text.push_str(s);
        Ok((start, self.0.text.len()))
    }
}

/// Scratch space for building [`Labels`]: pairs are appended in any order, then sorted,
/// de-duplicated and copied into an exactly-sized [`Labels`].
#[derive(Default)]
pub(crate) struct LabelsBuilder {
    text: String,
    /// `(name span, value span)` in `text`.
    spans: Vec<((usize, usize), (usize, usize))>,
}

impl LabelsBuilder {
    fn clear(&mut self) {
        self.text.clear();
        self.spans.clear();
    }

    fn push(&mut self, name: &str, value: &str) {
        let start = self.text.len();
        self.text.push_str(name);
        let mid = self.text.len();
        self.text.push_str(value);
        self.spans.push(((start, mid), (mid, self.text.len())));
    }

    /// The finished set; `None` only if it would exceed the 4 GiB offset range.
    fn build(&mut self) -> Option<Labels> {
        let text = self.text.as_str();
        let slice = |(a, b): (usize, usize)| text.get(a..b).unwrap_or_default();
        // Prometheus already sends names sorted; only other servers pay for the sort.
        if !self.spans.is_sorted_by(|a, b| slice(a.0) <= slice(b.0)) {
            // Stable, so the later of two equal names stays later and wins below.
            self.spans.sort_by(|a, b| slice(a.0).cmp(slice(b.0)));
        }
        let keep = |i: usize| {
            let next = self.spans.get(i + 1).map(|s| slice(s.0));
            self.spans.get(i).map(|s| slice(s.0)) != next
        };
        let mut len = 0;
        let mut count = 0;
        for (i, &(name, value)) in self.spans.iter().enumerate() {
            if keep(i) {
                len += (name.1 - name.0) + (value.1 - value.0);
                count += 1;
            }
        }
        if u32::try_from(len).is_err() {
            return None;
        }
        let mut out = String::with_capacity(len);
        let mut ends = Vec::with_capacity(2 * count);
        for (i, &(name, value)) in self.spans.iter().enumerate() {
            if keep(i) {
                // The total length fits a u32 (checked above).
                out.push_str(slice(name));
                ends.push(u32::try_from(out.len()).unwrap_or(u32::MAX));
                out.push_str(slice(value));
                ends.push(u32::try_from(out.len()).unwrap_or(u32::MAX));
            }
        }
        Some(Labels {
            text: out.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_lookup_and_last_duplicate_wins() {
        let labels: Labels = [("pod", "p-1"), ("job", "api"), ("a", ""), ("job", "web")]
            .into_iter()
            .collect();
        assert_eq!(labels.len(), 3);
        assert_eq!(
            labels.iter().collect::<Vec<_>>(),
            vec![("a", ""), ("job", "web"), ("pod", "p-1")]
        );
        assert_eq!(labels.get("job"), Some("web"));
        assert_eq!(labels.get("a"), Some(""));
        assert_eq!(labels.get("pod"), Some("p-1"));
        assert_eq!(labels.get("zzz"), None);
        assert_eq!(labels.get(""), None);
        assert!(!labels.contains_key("jo"));
    }

    #[test]
    fn empty_set() {
        let labels = Labels::new();
        assert!(labels.is_empty());
        assert_eq!(labels.get("x"), None);
        assert_eq!(labels.iter().count(), 0);
        assert_eq!(labels.to_string(), "{}");
    }

    #[test]
    fn equality_is_by_content() {
        let a: Labels = [("b", "2"), ("a", "1")].into_iter().collect();
        let b = Labels::from(BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string()),
        ]));
        assert_eq!(a, b);
        assert_eq!(a.to_map(), b.to_map());
        // The split between name and value matters, not just the concatenated text.
        let c: Labels = [("ab", ""), ("x", "1")].into_iter().collect();
        let d: Labels = [("a", "b"), ("x", "1")].into_iter().collect();
        assert_ne!(c, d);
    }

    #[test]
    fn json_round_trip_with_escapes() {
        let json = r#"{"z":"1","path":"a\"b\\c\n","é":"ü"}"#;
        let labels: Labels = serde_json::from_str(json).unwrap();
        assert_eq!(labels.get("path"), Some("a\"b\\c\n"));
        assert_eq!(labels.get("é"), Some("ü"));
        let back = serde_json::to_string(&labels).unwrap();
        assert_eq!(back, r#"{"path":"a\"b\\c\n","z":"1","é":"ü"}"#);
        assert_eq!(labels.to_string(), r#"{path="a\"b\\c\n", z="1", é="ü"}"#);
    }

    #[test]
    fn non_string_values_are_rejected() {
        assert!(serde_json::from_str::<Labels>(r#"{"a":1}"#).is_err());
        assert!(serde_json::from_str::<Labels>(r#"["a"]"#).is_err());
    }
}
