//! A rule's path: `jsonpath::` and a JSONPath relative to the VirtualMachine's
//! `spec.template` (upstream's: `jsonpath::.spec.domain.cpu.cores` reads
//! `spec.template.spec.domain.cpu.cores`), looked up on the VM as JSON.
//!
//! The JSONPath is the part of Kubernetes' dialect that validation rules use: field names
//! (`.name`, with `\.` for a dot inside a name, or `['name']`), indexes (`[2]`, `[-1]` from the
//! end) and every element or value (`[*]`, `.*`). Filters, slices, unions and recursive descent are
//! refused when the rule is read. Pure.

use serde_json::Value;

/// The prefix every path has (upstream's).
pub const PREFIX: &str = "jsonpath::";

/// Why a path cannot be read or looked up (upstream's texts).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Not a `jsonpath::` path, or not one of the dialect's.
    #[error("invalid JSONPath")]
    Invalid,
    /// A JSONPath this validator does not evaluate.
    #[error("invalid JSONPath: {0} is not supported by this validator")]
    Unsupported(&'static str),
}

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// A field of an object.
    Field(String),
    /// An element of an array, from the end when negative.
    Index(i64),
    /// Every element of an array, or every value of an object.
    All,
}

/// A parsed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    /// The path as written after the prefix and `$` (upstream's `Expr`).
    expr: String,
    /// Its steps, from the VM's root (`.spec.template` followed by what is written).
    steps: Vec<Step>,
}

/// Why a lookup found nothing to look at (upstream's "… is not found": a missing field, an index
/// out of range, a value of another shape). The caller may look again on the reference VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotFound;

impl Path {
    /// Parses `jsonpath::…`.
    ///
    /// # Errors
    /// No prefix, a syntax error, or a form this validator does not evaluate.
    pub fn parse(text: &str) -> Result<Self, PathError> {
        let rest = text.strip_prefix(PREFIX).ok_or(PathError::Invalid)?;
        let expr = rest.strip_prefix('$').unwrap_or(rest).to_owned();
        // Appended as text, as upstream's: `spec.domain` without its dot reads `templatespec`.
        let steps = parse_steps(&format!(".spec.template{expr}"))?;
        Ok(Self { expr, steps })
    }

    /// The path as written, without the prefix and `$`: what a refusal names as its field.
    #[must_use]
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// The values the path reaches in `root` (the whole VirtualMachine): every match of `[*]`
    /// and `.*`, in order. An empty array under `[*]` gives no values, as upstream's.
    ///
    /// The VM is JSON, where a field left out may be one that Go's typed object holds anyway.
    /// `shape`, the reference VM, says which: a missing field that is a number, a string or a
    /// boolean there reads as its zero, and one that is an array as an empty array, as upstream's
    /// object has them; a missing object is a nil pointer, not found.
    ///
    /// # Errors
    /// A step finds nothing: a missing field, an index out of range, a value of another shape.
    pub fn lookup<'a>(&self, root: &'a Value) -> Result<Vec<&'a Value>, NotFound> {
        self.lookup_in(root, Some(crate::reference::reference_vm()))
    }

    fn lookup_in<'a>(&self, root: &'a Value, shape: Option<&'a Value>) -> Result<Vec<&'a Value>, NotFound> {
        let mut current = vec![(root, shape)];
        for step in &self.steps {
            let mut next = Vec::new();
            let many = current.len() > 1;
            let had_any = !current.is_empty();
            for (value, shape) in current {
                let first_of = |shape: Option<&'a Value>| shape.and_then(Value::as_array).and_then(|a| a.first());
                match (step, value) {
                    (Step::Field(name), Value::Object(map)) => {
                        let field_shape = shape.and_then(|s| s.get(name));
                        match (map.get(name), field_shape) {
                            (Some(found), _) => next.push((found, field_shape)),
                            // A plain field of Go's object: its zero.
                            (None, Some(zero @ (Value::Number(_) | Value::String(_) | Value::Bool(_)))) => {
                                next.push((zero, Some(zero)));
                            }
                            (None, Some(array @ Value::Array(_))) => next.push((&EMPTY_ARRAY, Some(array))),
                            // Of several matches, one without the field is passed over (upstream
                            // skips an element whose pointer is nil).
                            (None, _) if many => {}
                            (None, _) => return Err(NotFound),
                        }
                    }
                    (Step::Index(index), Value::Array(items)) => {
                        let at = if *index < 0 {
                            i64::try_from(items.len())
                                .ok()
                                .and_then(|len| usize::try_from(len + index).ok())
                        } else {
                            usize::try_from(*index).ok()
                        };
                        match at.and_then(|i| items.get(i)) {
                            Some(found) => next.push((found, first_of(shape))),
                            None => return Err(NotFound),
                        }
                    }
                    (Step::All, Value::Array(items)) => next.extend(items.iter().map(|item| (item, first_of(shape)))),
                    (Step::All, Value::Object(map)) => {
                        next.extend(map.iter().map(|(key, item)| (item, shape.and_then(|s| s.get(key)))));
                    }
                    (_, Value::Null) if many => {}
                    _ => return Err(NotFound),
                }
            }
            if had_any && next.is_empty() && matches!(step, Step::Field(_)) {
                // Every element was passed over: nothing has the field.
                return Err(NotFound);
            }
            current = next;
        }
        Ok(current.into_iter().map(|(value, _)| value).collect())
    }
}

/// The value of an array Go's object holds where the JSON leaves it out.
static EMPTY_ARRAY: Value = Value::Array(Vec::new());

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{PREFIX}{}", self.expr)
    }
}

/// The steps of `expr` (after the prefix and `$`).
fn parse_steps(expr: &str) -> Result<Vec<Step>, PathError> {
    let mut steps = Vec::new();
    let mut rest = expr;
    while let Some(first) = rest.chars().next() {
        match first {
            '.' => {
                let after = &rest[1..];
                if after.starts_with('.') {
                    return Err(PathError::Unsupported("recursive descent (..)"));
                }
                if let Some(tail) = after.strip_prefix('*') {
                    steps.push(Step::All);
                    rest = tail;
                    continue;
                }
                let (name, tail) = field_name(after)?;
                steps.push(Step::Field(name));
                rest = tail;
            }
            '[' => {
                let close = rest.find(']').ok_or(PathError::Invalid)?;
                let inside = rest[1..close].trim();
                steps.push(bracket(inside)?);
                rest = &rest[close + 1..];
            }
            _ => return Err(PathError::Invalid),
        }
    }
    Ok(steps)
}

/// A field name up to the next unescaped `.` or `[`; `\.` is a dot inside the name.
fn field_name(text: &str) -> Result<(String, &str), PathError> {
    let mut name = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, escaped)) => name.push(escaped),
                None => return Err(PathError::Invalid),
            },
            '.' | '[' => return non_empty(name, &text[at..]),
            c if c.is_alphanumeric() || matches!(c, '_' | '-' | '/') => name.push(c),
            '?' | '(' | ')' | '@' | ',' | ':' | '=' | '!' | '<' | '>' | '&' | '|' => {
                return Err(PathError::Unsupported("an expression in a field name"));
            }
            _ => return Err(PathError::Invalid),
        }
    }
    non_empty(name, "")
}

fn non_empty(name: String, rest: &str) -> Result<(String, &str), PathError> {
    if name.is_empty() {
        Err(PathError::Invalid)
    } else {
        Ok((name, rest))
    }
}

/// What a bracket holds: `*`, an index, or a quoted field name.
fn bracket(inside: &str) -> Result<Step, PathError> {
    if inside == "*" {
        return Ok(Step::All);
    }
    if inside.starts_with('?') {
        return Err(PathError::Unsupported("a filter ([?(...)])"));
    }
    if inside.contains(',') {
        return Err(PathError::Unsupported("a union ([a,b])"));
    }
    if inside.contains(':') {
        return Err(PathError::Unsupported("a slice ([a:b])"));
    }
    for quote in ['\'', '"'] {
        if let Some(name) = inside.strip_prefix(quote).and_then(|s| s.strip_suffix(quote)) {
            return if name.is_empty() {
                Err(PathError::Invalid)
            } else {
                Ok(Step::Field(name.to_owned()))
            };
        }
    }
    inside.parse::<i64>().map(Step::Index).map_err(|_| PathError::Invalid)
}
