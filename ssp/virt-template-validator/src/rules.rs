//! Validation rules as a VM or its template carries them: a JSON array of rules, each with a
//! type (`integer`, `string`, `enum`, `regex`), a `name`, a `path`, a `message`, and the
//! arguments of its type. Read as upstream reads them: key names in any case, unknown keys
//! ignored, any malformed part failing the whole set. Pure.

use serde_json::{Map, Value};

use crate::path::{PREFIX, Path, PathError};

/// Why a rule set cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RulesError {
    /// Not JSON.
    #[error("the validation rules are not JSON: {0}")]
    NotJson(String),
    /// Not an array of objects.
    #[error("the validation rules must be a JSON array of objects")]
    NotArray,
    /// A key of a rule has the wrong JSON type.
    #[error("rule {index}: key {key:?} must be {expected}")]
    WrongType {
        /// The rule's place in the array, from 0.
        index: usize,
        /// The key.
        key: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// A path that cannot be read.
    #[error("rule {index}: key {key:?}: {source}")]
    Path {
        /// The rule's place in the array, from 0.
        index: usize,
        /// The key.
        key: &'static str,
        /// Why.
        source: PathError,
    },
    /// A bound that is neither a number nor a path (upstream's words).
    #[error("rule {index}: key {key:?}: cannot unmarshall IntOrPath from JSON: {why}")]
    Bound {
        /// The rule's place in the array, from 0.
        index: usize,
        /// The key.
        key: &'static str,
        /// Why.
        why: String,
    },
}

/// A bound: a number, or a path to one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntOrPath {
    /// A number (upstream rounds a fraction half away from zero).
    Int(i64),
    /// A path whose one value is the number.
    Path(Path),
}

/// An allowed value of an enum: a literal, or a path to one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StringOrPath {
    /// The value itself.
    Literal(String),
    /// A path whose one value is the value.
    Path(Path),
}

/// One rule, as read; whether it makes sense is decided when it is evaluated (upstream's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// `rule`: `integer`, `string`, `enum` or `regex` (anything else is said when evaluated).
    pub kind: String,
    /// `name`, unique in the set.
    pub name: String,
    /// `path`: the values checked.
    pub path: Option<Path>,
    /// `message`, the start of every cause.
    pub message: String,
    /// `valid`: the rule applies only where this path reaches something on the VM.
    pub valid: Option<Path>,
    /// `justWarning`: a broken rule is logged, not refused.
    pub just_warning: bool,
    /// `min` of an integer rule.
    pub min: Option<IntOrPath>,
    /// `max` of an integer rule.
    pub max: Option<IntOrPath>,
    /// `minLength` of a string rule.
    pub min_length: Option<IntOrPath>,
    /// `maxLength` of a string rule.
    pub max_length: Option<IntOrPath>,
    /// `values` of an enum rule.
    pub values: Option<Vec<StringOrPath>>,
    /// `regex` of a regex rule.
    pub regex: Option<String>,
}

/// Reads a rule set; an empty text is no rules.
///
/// # Errors
/// Not JSON, not an array of objects, a key of the wrong type, a path that cannot be read.
pub fn parse(text: &str) -> Result<Vec<Rule>, RulesError> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let value: Value = serde_json::from_str(text).map_err(|e| RulesError::NotJson(e.to_string()))?;
    let items = match value {
        Value::Array(items) => items,
        // Go reads `null` as no rules.
        Value::Null => return Ok(Vec::new()),
        _ => return Err(RulesError::NotArray),
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| match item {
            Value::Object(keys) => rule(index, keys),
            // Go reads `null` as an empty rule.
            Value::Null => Ok(Rule::default()),
            _ => Err(RulesError::NotArray),
        })
        .collect()
}

/// The value of `key` in `keys`, matched in any case (as Go's JSON decoder matches); an exact
/// match first.
fn key<'a>(keys: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    keys.get(key)
        .or_else(|| keys.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
        .filter(|v| !v.is_null())
}

fn rule(index: usize, keys: &Map<String, Value>) -> Result<Rule, RulesError> {
    let string = |name: &'static str| -> Result<String, RulesError> {
        match key(keys, name) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(RulesError::WrongType {
                index,
                key: name,
                expected: "a string",
            }),
        }
    };
    let path = |name: &'static str| -> Result<Option<Path>, RulesError> {
        match key(keys, name) {
            None => Ok(None),
            Some(Value::String(s)) => Path::parse(s).map(Some).map_err(|source| RulesError::Path {
                index,
                key: name,
                source,
            }),
            Some(_) => Err(RulesError::WrongType {
                index,
                key: name,
                expected: "a string",
            }),
        }
    };
    let bound = |name: &'static str| -> Result<Option<IntOrPath>, RulesError> {
        let fail = |why: String| RulesError::Bound { index, key: name, why };
        match key(keys, name) {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_i64()
                .or_else(|| n.as_f64().map(round_f64))
                .map(|n| Some(IntOrPath::Int(n)))
                .ok_or_else(|| fail(format!("{n} is not an integer"))),
            Some(Value::String(s)) => Path::parse(s)
                .map(|p| Some(IntOrPath::Path(p)))
                .map_err(|e| fail(e.to_string())),
            Some(other) => Err(fail(format!("{} is neither a number nor a path", kind_of(other)))),
        }
    };
    let just_warning = match key(keys, "justWarning") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(RulesError::WrongType {
                index,
                key: "justWarning",
                expected: "a boolean",
            });
        }
    };
    let values = match key(keys, "values") {
        None => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|item| match item {
                    Value::String(s) if s.starts_with(PREFIX) => {
                        Path::parse(s)
                            .map(StringOrPath::Path)
                            .map_err(|source| RulesError::Path {
                                index,
                                key: "values",
                                source,
                            })
                    }
                    Value::String(s) => Ok(StringOrPath::Literal(s.clone())),
                    _ => Err(RulesError::WrongType {
                        index,
                        key: "values",
                        expected: "an array of strings",
                    }),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => {
            return Err(RulesError::WrongType {
                index,
                key: "values",
                expected: "an array of strings",
            });
        }
    };
    Ok(Rule {
        kind: string("rule")?,
        name: string("name")?,
        path: path("path")?,
        message: string("message")?,
        valid: path("valid")?,
        just_warning,
        min: bound("min")?,
        max: bound("max")?,
        min_length: bound("minLength")?,
        max_length: bound("maxLength")?,
        values,
        regex: key(keys, "regex").map(|_| string("regex")).transpose()?,
    })
}

/// Go's `math.Round`: half away from zero; out of range saturates.
#[expect(
    clippy::cast_possible_truncation,
    reason = "rounded first, and saturating is what is wanted"
)]
pub(crate) fn round_f64(value: f64) -> i64 {
    value.round() as i64
}

/// A JSON value's kind, as an error names it.
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
