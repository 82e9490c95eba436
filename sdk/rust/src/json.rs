//! A small JSON parser and writer, enough for a tool's arguments and
//! results without serde (the crate has no dependencies).
//!
//! ```
//! use berm::json::Value;
//! let v = Value::parse(br#"{"name": "Ada", "tags": ["x", "y"], "n": 3}"#).unwrap();
//! assert_eq!(v.get("name").and_then(Value::as_str), Some("Ada"));
//! assert_eq!(v.get("n").and_then(Value::as_i64), Some(3));
//! assert_eq!(v.to_string(), r#"{"name":"Ada","tags":["x","y"],"n":3}"#);
//! let out = Value::object([("greeting", Value::from("Hello, Ada!"))]);
//! assert_eq!(out.to_string(), r#"{"greeting":"Hello, Ada!"}"#);
//! ```

use std::fmt::{self, Write};

/// A JSON value. Objects keep their members in order (duplicates too);
/// numbers keep their text, so that nothing is lost in a round trip.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// A number, as it was written (or as `Value::from` wrote it).
    Number(String),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

/// Why text is not JSON, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The byte offset where parsing stopped.
    pub offset: usize,
    pub message: &'static str,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON at byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for Error {}

/// How deep arrays and objects may nest: the parser recurses, and a
/// WebAssembly stack is small.
pub const MAX_DEPTH: usize = 256;

impl Value {
    /// Parses one JSON value, with nothing but whitespace around it.
    pub fn parse(text: &[u8]) -> Result<Value, Error> {
        let mut p = Parser { s: text, i: 0, depth: 0 };
        p.ws();
        let v = p.value()?;
        p.ws();
        if p.i != text.len() {
            return Err(p.err("text after the value"));
        }
        Ok(v)
    }

    /// An object of these members, in order.
    pub fn object<K: Into<String>>(members: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Object(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// The member `key` of an object (the last, when repeated).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The element `i` of an array.
    pub fn at(&self, i: usize) -> Option<&Value> {
        self.as_array()?.get(i)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    /// An integer that fits in an i64, written without fraction or exponent.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
    pub fn as_object(&self) -> Option<&Vec<(String, Value)>> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The value as JSON, indented by `indent` spaces a level (0: compact,
    /// as `to_string`).
    pub fn to_pretty(&self, indent: usize) -> String {
        let mut out = String::new();
        self.write(&mut out, indent, 0);
        out
    }

    fn write(&self, out: &mut String, indent: usize, level: usize) {
        let newline = |out: &mut String, level: usize| {
            if indent > 0 {
                out.push('\n');
                for _ in 0..indent * level {
                    out.push(' ');
                }
            }
        };
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => out.push_str(n),
            Value::String(s) => quote_into(out, s),
            Value::Array(a) if a.is_empty() => out.push_str("[]"),
            Value::Object(m) if m.is_empty() => out.push_str("{}"),
            Value::Array(a) => {
                out.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(out, level + 1);
                    v.write(out, indent, level + 1);
                }
                newline(out, level);
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(out, level + 1);
                    quote_into(out, k);
                    out.push(':');
                    if indent > 0 {
                        out.push(' ');
                    }
                    v.write(out, indent, level + 1);
                }
                newline(out, level);
                out.push('}');
            }
        }
    }
}

/// Compact JSON.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_pretty(0))
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}
impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Number(n.to_string())
    }
}
impl From<usize> for Value {
    fn from(n: usize) -> Value {
        Value::Number(n.to_string())
    }
}
/// A finite number; NaN and the infinities, which JSON has not, are null.
impl From<f64> for Value {
    fn from(n: f64) -> Value {
        if n.is_finite() {
            Value::Number(format!("{}", n))
        } else {
            Value::Null
        }
    }
}
impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Value {
        Value::Array(v.into_iter().map(Into::into).collect())
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// `s` as a JSON string, quoted and escaped.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    quote_into(&mut out, s);
    out
}

fn quote_into(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, message: &'static str) -> Error {
        Error { offset: self.i, message }
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn literal(&mut self, word: &'static str, v: Value) -> Result<Value, Error> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.err("not a value"))
        }
    }

    fn value(&mut self) -> Result<Value, Error> {
        match self.peek() {
            None => Err(self.err("unexpected end")),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b'-') | Some(b'0'..=b'9') => self.number(),
            Some(b'[') => {
                self.nest()?;
                let mut a = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        a.push(self.value()?);
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(self.err("want , or ] in an array")),
                        }
                    }
                }
                self.depth -= 1;
                Ok(Value::Array(a))
            }
            Some(b'{') => {
                self.nest()?;
                let mut m = Vec::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        if self.peek() != Some(b'"') {
                            return Err(self.err("want a string key"));
                        }
                        let k = self.string()?;
                        self.ws();
                        if self.peek() != Some(b':') {
                            return Err(self.err("want : after a key"));
                        }
                        self.i += 1;
                        self.ws();
                        let v = self.value()?;
                        m.push((k, v));
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(self.err("want , or } in an object")),
                        }
                    }
                }
                self.depth -= 1;
                Ok(Value::Object(m))
            }
            Some(_) => Err(self.err("not a value")),
        }
    }

    fn nest(&mut self) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err("nested too deep"));
        }
        self.i += 1;
        Ok(())
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<Value, Error> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        let n = self.digits();
        if n == 0 || (n > 1 && self.s[int_start] == b'0') {
            return Err(self.err("bad number"));
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.err("bad number"));
            }
        }
        if matches!(self.peek(), Some(b'e') | Some(b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+') | Some(b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("bad number"));
            }
        }
        // ASCII, checked above.
        Ok(Value::Number(String::from_utf8_lossy(&self.s[start..self.i]).into_owned()))
    }

    fn hex4(&mut self) -> Result<u32, Error> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return Err(self.err("bad \\u escape")),
            };
            v = v * 16 + d as u32;
            self.i += 1;
        }
        Ok(v)
    }

    fn string(&mut self) -> Result<String, Error> {
        self.i += 1; // the quote
        let mut out = Vec::new();
        loop {
            let c = match self.peek() {
                None => return Err(self.err("unterminated string")),
                Some(c) => c,
            };
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.peek().ok_or_else(|| self.err("unterminated string"))?;
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xd800..0xdc00).contains(&cp) && self.s[self.i..].starts_with(b"\\u") {
                                let save = self.i;
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xdc00..0xe000).contains(&lo) {
                                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                                } else {
                                    self.i = save;
                                }
                            }
                            char::from_u32(cp).unwrap_or('\u{fffd}')
                        }
                        _ => return Err(self.err("bad escape")),
                    };
                    let mut b = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                }
                c if c < 0x20 => return Err(self.err("control character in a string")),
                c => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| self.err("string is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let text = r#"{"a":[1,-2.5e3,0,true,false,null],"b":{"c":"x\"\\\n\u0001é😀"},"e":[],"f":{}}"#;
        let v = Value::parse(text.as_bytes()).unwrap();
        assert_eq!(v.to_string(), text.replace("\\u0001", "\\u0001"));
        assert_eq!(Value::parse(v.to_pretty(2).as_bytes()).unwrap(), v);
        assert_eq!(
            Value::parse(br#"{"k":"\ud83d\ude00 \u00e9 \ud800"}"#).unwrap().get("k").unwrap().as_str(),
            Some("😀 é \u{fffd}")
        );
        assert_eq!(
            Value::parse(b"[1,{\"a\":2}]").unwrap().to_pretty(2),
            "[\n  1,\n  {\n    \"a\": 2\n  }\n]"
        );
        assert_eq!(Value::parse(b" 12 ").unwrap().as_i64(), Some(12));
        assert_eq!(Value::parse(b"1.5").unwrap().as_i64(), None);
    }

    #[test]
    fn refused() {
        for bad in [
            "", "{", "[1,]", "{\"a\"}", "{\"a\":1,}", "01", "1.", "-", "1e", "tru", "\"\\x\"", "\"a\nb\"",
            "\"\\u12\"", "[1] x", "{1:2}",
        ] {
            assert!(Value::parse(bad.as_bytes()).is_err(), "{:?} parsed", bad);
        }
        assert!(Value::parse(&[b'"', 0xff, b'"']).is_err());
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(Value::parse(deep.as_bytes()).unwrap_err().message, "nested too deep");
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(Value::parse(ok.as_bytes()).is_ok());
    }
}
