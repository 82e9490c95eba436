//! jsonfmt: formats and queries JSON given in the arguments. berm's example
//! of a program in Rust: a cdylib for wasm32-unknown-unknown with the crate
//! in sdk/rust and std alone. See build.sh and examples/README.md.

use berm::json::Value;

#[no_mangle]
pub extern "C" fn berm_tool_format() {
    berm::handle(format)
}

#[no_mangle]
pub extern "C" fn berm_tool_query() {
    berm::handle(query)
}

/// The document in the json member, parsed.
fn document(args: &Value) -> Result<Value, String> {
    let text = args.get("json").and_then(Value::as_str).ok_or("json: a string is required")?;
    Value::parse(text.as_bytes()).map_err(|e| format!("json: {}", e))
}

/// format: {"json": "...", "indent": 2, "sort_keys": false} -> the document,
/// re-indented (indent 0: compact on one line).
fn format(args: &Value) -> Result<String, String> {
    let mut doc = document(args)?;
    let indent = match args.get("indent") {
        None => 2,
        Some(v) => match v.as_i64() {
            Some(n) if (0..=8).contains(&n) => n as usize,
            _ => return Err("indent: an integer from 0 to 8".into()),
        },
    };
    if args.get("sort_keys").and_then(Value::as_bool).unwrap_or(false) {
        sort_keys(&mut doc);
    }
    let mut out = doc.to_pretty(indent);
    if indent > 0 {
        out.push('\n');
    }
    Ok(out)
}

fn sort_keys(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.sort_by(|a, b| a.0.cmp(&b.0));
            m.iter_mut().for_each(|(_, v)| sort_keys(v));
        }
        Value::Array(a) => a.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// query: {"json": "...", "path": "items[0].name"} -> the value at path,
/// as compact JSON. Members are reached by name (a.b), elements by index
/// (a[0]; a negative index counts from the end).
fn query(args: &Value) -> Result<String, String> {
    let doc = document(args)?;
    let path = args.get("path").and_then(Value::as_str).unwrap_or("");
    let mut here = &doc;
    let mut at = String::new();
    for step in steps(path)? {
        here = match step {
            Step::Member(name) => {
                let m = here.as_object().ok_or_else(|| format!("{}: not an object, no member {:?}", where_(&at), name))?;
                let v = m.iter().rev().find(|(k, _)| *k == name).map(|(_, v)| v);
                at.push_str(&(if at.is_empty() { String::new() } else { ".".into() } + &name));
                v.ok_or_else(|| format!("{}: no such member", at))?
            }
            Step::Index(i) => {
                let a = here.as_array().ok_or_else(|| format!("{}: not an array, no element [{}]", where_(&at), i))?;
                let j = if i < 0 { a.len() as i64 + i } else { i };
                at.push_str(&format!("[{}]", i));
                if j < 0 || j as usize >= a.len() {
                    return Err(format!("{}: out of range (the array has {} elements)", at, a.len()));
                }
                &a[j as usize]
            }
        };
    }
    Ok(here.to_string())
}

fn where_(at: &str) -> &str {
    if at.is_empty() {
        "the document"
    } else {
        at
    }
}

enum Step {
    Member(String),
    Index(i64),
}

fn steps(path: &str) -> Result<Vec<Step>, String> {
    let bad = || format!("path {:?}: want names and [index]es, as in items[0].name", path);
    let mut out = Vec::new();
    let s = path.strip_prefix('.').unwrap_or(path);
    if s.is_empty() {
        return Ok(out);
    }
    for part in s.split('.') {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if name.is_empty() && rest.is_empty() {
            return Err(bad());
        }
        if !name.is_empty() {
            out.push(Step::Member(name.to_string()));
        }
        while !rest.is_empty() {
            let end = rest.find(']').ok_or_else(bad)?;
            if !rest.starts_with('[') {
                return Err(bad());
            }
            out.push(Step::Index(rest[1..end].parse().map_err(|_| bad())?));
            rest = &rest[end + 1..];
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use berm::FakeHost;

    fn run(tool: extern "C" fn(), args: Value) -> FakeHost {
        let mut h = FakeHost::new(&args.to_string());
        h.run(tool);
        h
    }

    fn args(json: &str, more: Vec<(&str, Value)>) -> Value {
        let mut m = vec![("json", Value::from(json))];
        m.extend(more);
        Value::object(m)
    }

    #[test]
    fn formats() {
        let doc = r#"{"b":[1,{"d":null,"c":"é"}],"a":true}"#;
        let h = run(berm_tool_format, args(doc, vec![]));
        assert_eq!(
            String::from_utf8(h.result).unwrap(),
            "{\n  \"b\": [\n    1,\n    {\n      \"d\": null,\n      \"c\": \"é\"\n    }\n  ],\n  \"a\": true\n}\n"
        );
        let h = run(berm_tool_format, args(doc, vec![("indent", 0i64.into()), ("sort_keys", true.into())]));
        assert_eq!(String::from_utf8(h.result).unwrap(), r#"{"a":true,"b":[1,{"c":"é","d":null}]}"#);
        let h = run(berm_tool_format, args("{\"a\":", vec![]));
        assert!(h.failed && h.failure == "json: invalid JSON at byte 5: unexpected end", "{}", h.failure);
        let h = run(berm_tool_format, args("1", vec![("indent", 9i64.into())]));
        assert!(h.failed && h.failure.starts_with("indent"), "{}", h.failure);
    }

    #[test]
    fn queries() {
        let doc = r#"{"items":[{"name":"a","tags":["x","y"]},{"name":"b"}],"n":1}"#;
        for (path, want) in [
            ("", doc),
            ("n", "1"),
            ("items[1].name", r#""b""#),
            (".items[0].tags[-1]", r#""y""#),
            ("items[0]", r#"{"name":"a","tags":["x","y"]}"#),
        ] {
            let h = run(berm_tool_query, args(doc, vec![("path", path.into())]));
            assert!(!h.failed, "{}: {}", path, h.failure);
            assert_eq!(String::from_utf8(h.result).unwrap(), want, "{}", path);
        }
        for (path, want) in [
            ("items[2]", "items[2]: out of range (the array has 2 elements)"),
            ("items[0].nope", "items[0].nope: no such member"),
            ("n.x", "n: not an object, no member \"x\""),
            ("[0]", "the document: not an array, no element [0]"),
            ("items[x]", "path \"items[x]\": want names and [index]es, as in items[0].name"),
            ("a..b", "path \"a..b\": want names and [index]es, as in items[0].name"),
        ] {
            let h = run(berm_tool_query, args(doc, vec![("path", path.into())]));
            assert!(h.failed, "{}: no failure", path);
            assert_eq!(h.failure, want, "{}", path);
        }
    }
}
