//! The guest side of the berm program ABI (ABI.md, version 0) for Rust: what
//! a program uses to read its arguments, give its result or failure, and
//! reach the host's syscalls. It mirrors the Go SDK (`sdk/`), with std alone.
//!
//! A program is a `cdylib` built for `wasm32-unknown-unknown`, with one
//! exported function per tool, named `berm_tool_<name>` to match its
//! manifest:
//!
//! ```no_run
//! use berm::json::Value;
//!
//! #[no_mangle]
//! pub extern "C" fn berm_tool_greet() {
//!     berm::handle(greet)
//! }
//!
//! fn greet(args: &Value) -> Result<String, String> {
//!     match args.get("name").and_then(Value::as_str) {
//!         Some(name) if !name.is_empty() => Ok(format!("Hello, {}!", name)),
//!         _ => Err("name is empty".to_string()),
//!     }
//! }
//! ```
//!
//! Build it with `berm build` (a project made by `berm new NAME --lang
//! rust`), or with
//!
//! ```text
//! cargo build --release --target wasm32-unknown-unknown
//! ```
//!
//! and attach the manifest (a `.berm.abi` custom section) to make the image.
//!
//! Off WebAssembly the crate talks to a [`FakeHost`] instead, so that a
//! program's tools run under plain `cargo test`.
//!
//! The arguments are JSON; without serde (this crate has no dependencies),
//! [`json`] parses them into a [`json::Value`] and writes results.

use std::fmt;

pub mod json;

#[cfg(not(target_arch = "wasm32"))]
mod fake;
#[cfg(not(target_arch = "wasm32"))]
pub use fake::FakeHost;

/// The version of this crate.
pub const VERSION: &str = "0.1.0";
/// The version of ABI.md it speaks.
pub const ABI_VERSION: u32 = 0;

/// Numbers of the syscalls: the 64-bit FNV-1a hash of each name (ABI.md,
/// Syscalls).
pub mod sys {
    pub const ARGS_LEN: u64 = 0x6ee73f4eae1c1535; // berm.args.len
    pub const ARGS_READ: u64 = 0x4d9b428e492faf86; // berm.args.read
    pub const RESULT: u64 = 0x83ad05f161e950ac; // berm.result
    pub const FAIL: u64 = 0x71ea7deedc66e725; // berm.fail
    pub const LOG: u64 = 0x718e2c830194e059; // berm.log
    pub const CALL: u64 = 0x6410f207e9992ec1; // berm.call
    pub const RESULT_READ: u64 = 0x6c92a7d946a830be; // berm.result.read

    // The berm binary's host syscalls; a program declares those it calls
    // in its manifest's "syscalls" (berm.toml's syscalls).
    pub const NOW: u64 = 0x83918e830bfa80df; // berm.now
    pub const GET: u64 = 0xbda7ac832c28873f; // berm.get
    pub const SET: u64 = 0x585dd082f38a6e6b; // berm.set
    pub const DELETE: u64 = 0x84a8776bcc70bc72; // berm.delete
    pub const HTTP: u64 = 0xcd342abaa2542f6d; // berm.http

    /// Bit 63 of a staging return value: the staged bytes are an error
    /// message.
    pub const ERROR_BIT: u64 = 1 << 63;
    /// Bit 62, with bit 63: the outcome is the host's refusal.
    pub const HOST_BIT: u64 = 1 << 62;
    /// The other bits: the length of the staged bytes.
    pub const LENGTH_MASK: u64 = HOST_BIT - 1;

    /// The FNV-1a 64 hash of a syscall's name: its number.
    pub const fn number(name: &str) -> u64 {
        let b = name.as_bytes();
        let mut h: u64 = 0xcbf29ce484222325;
        let mut i = 0;
        while i < b.len() {
            h ^= b[i] as u64;
            h = h.wrapping_mul(0x100000001b3);
            i += 1;
        }
        h
    }
}

#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "berm")]
extern "C" {
    #[link_name = "syscall"]
    fn berm_syscall(number: u64, ptr: *const u8, len: u32) -> u64;
}

/// The ABI's one import, `berm.syscall(number, ptr, len)`: the raw call
/// every function here makes. Off WebAssembly it reaches the [`FakeHost`]
/// that is running.
///
/// # Safety
///
/// `ptr` must address `len` bytes that the syscall may read or, for the
/// `read` syscalls, write.
pub unsafe fn syscall(number: u64, ptr: *const u8, len: u32) -> u64 {
    #[cfg(target_arch = "wasm32")]
    {
        berm_syscall(number, ptr, len)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        fake::syscall(number, ptr, len)
    }
}

fn call_in(number: u64, b: &[u8]) -> u64 {
    unsafe { syscall(number, b.as_ptr(), b.len() as u32) }
}

/// The failure of a syscall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The tool reached with [`call`] failed: the message it gave
    /// `berm.fail`.
    Callee { target: String, message: String },
    /// The host refused: for `berm.call`, the target does not exist or is
    /// not declared, the call depth or the deadline ran out, the arguments
    /// were refused, or the callee trapped; for `berm.set`, a quota; for
    /// `berm.http`, the host is not granted, a bound, the network. The
    /// message is the host's own and says which.
    Refused { syscall: &'static str, message: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Callee { target, message } => write!(f, "{}: {}", target, message),
            Error::Refused { syscall, message } if message.is_empty() => {
                write!(f, "{}: refused by the host", syscall)
            }
            Error::Refused { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}

/// The call's arguments: a JSON object, byte for byte as the host received
/// it and checked it against the tool's parameters.
pub fn args() -> Vec<u8> {
    let n = unsafe { syscall(sys::ARGS_LEN, std::ptr::null(), 0) } as usize;
    let mut b = vec![0u8; n];
    unsafe { syscall(sys::ARGS_READ, b.as_mut_ptr(), n as u32) };
    b
}

/// The call's arguments, parsed.
pub fn args_json() -> Result<json::Value, json::Error> {
    json::Value::parse(&args())
}

/// Sets the call's result; a later one replaces it, and a [`fail`] in the
/// same call wins over it.
pub fn result(b: impl AsRef<[u8]>) {
    call_in(sys::RESULT, b.as_ref());
}

/// Marks the call as the program's own failure with this message, which
/// the caller (on MCP, the model) sees. It does not stop the tool: return
/// after it. The last one of a call wins.
pub fn fail(message: &str) {
    call_in(sys::FAIL, message.as_bytes());
}

/// Writes one line to the host's log of the program.
pub fn log(line: &str) {
    call_in(sys::LOG, line.as_bytes());
}

/// Runs the tool of another program, declared as `program.tool` in the
/// manifest's calls, with `args` (a JSON object), and returns its result.
pub fn call(program: &str, tool: &str, args: &[u8]) -> Result<Vec<u8>, Error> {
    let v = call_in(sys::CALL, &frame(&[program.as_bytes(), tool.as_bytes(), args]));
    let out = staged(v);
    if v & (sys::ERROR_BIT | sys::HOST_BIT) == sys::ERROR_BIT | sys::HOST_BIT {
        return Err(Error::Refused { syscall: "berm.call", message: lossy(out) });
    }
    if v & sys::ERROR_BIT != 0 {
        return Err(Error::Callee { target: format!("{}.{}", program, tool), message: lossy(out) });
    }
    Ok(out)
}

/// The value under `key` in the program's key-value store, if any. The
/// manifest must declare `berm.get`.
pub fn get(key: impl AsRef<[u8]>) -> Option<Vec<u8>> {
    let v = call_in(sys::GET, key.as_ref());
    if v & sys::ERROR_BIT != 0 {
        return None;
    }
    Some(staged(v))
}

/// Puts `value` under `key` in the program's key-value store; the error is
/// the host's refusal (a quota). The manifest must declare `berm.set`.
pub fn set(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<(), Error> {
    let v = call_in(sys::SET, &frame(&[key.as_ref(), value.as_ref()]));
    if v & sys::ERROR_BIT != 0 {
        return Err(Error::Refused { syscall: "berm.set", message: lossy(staged(v)) });
    }
    Ok(())
}

/// Removes `key` from the program's key-value store; an absent key is not
/// an error. The manifest must declare `berm.delete`.
pub fn delete(key: impl AsRef<[u8]>) {
    call_in(sys::DELETE, key.as_ref());
}

/// The host's clock, in milliseconds since the Unix epoch. The manifest
/// must declare `berm.now`.
pub fn now_ms() -> i64 {
    unsafe { syscall(sys::NOW, std::ptr::null(), 0) as i64 }
}

/// The host's clock (`std::time::SystemTime::now` is not there on
/// wasm32-unknown-unknown). The manifest must declare `berm.now`.
pub fn now() -> std::time::SystemTime {
    let ms = now_ms();
    let d = std::time::Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        std::time::UNIX_EPOCH + d
    } else {
        std::time::UNIX_EPOCH - d
    }
}

/// A response `berm.http` gave back, of any status.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpResponse {
    pub status: u16,
    /// The header block: `Name: value\r\n` lines, names sorted.
    pub headers: String,
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The value of the first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            if n.trim().eq_ignore_ascii_case(name) {
                Some(v.trim())
            } else {
                None
            }
        })
    }
}

/// Makes one request through the host's `berm.http`: `method`, an absolute
/// http or https URL, `headers` an HTTP/1 header block (`Name: value`
/// lines separated by `\r\n` or `\n`), and `body`. The host follows
/// redirects to granted hosts. A response of any status is `Ok`; the error
/// is the host's refusal. The manifest must declare `berm.http`, and the
/// deployment grant the host.
pub fn http(method: &str, url: &str, headers: &str, body: &[u8]) -> Result<HttpResponse, Error> {
    let v = call_in(sys::HTTP, &frame(&[method.as_bytes(), url.as_bytes(), headers.as_bytes(), body]));
    let out = staged(v);
    if v & sys::ERROR_BIT != 0 {
        return Err(Error::Refused { syscall: "berm.http", message: lossy(out) });
    }
    let bad = |what: &str| Error::Refused {
        syscall: "berm.http",
        message: format!("berm.http: the host's response {}", what),
    };
    let f = unframe(&out, 3).ok_or_else(|| bad("is not a frame of 3 fields"))?;
    let status = std::str::from_utf8(f[0])
        .ok()
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad("has no numeric status"))?;
    Ok(HttpResponse { status, headers: lossy(f[1].to_vec()), body: f[2].to_vec() })
}

/// Copies out the bytes a staging syscall that returned `v` left on the
/// host (`berm.result.read`).
pub fn staged(v: u64) -> Vec<u8> {
    let n = (v & sys::LENGTH_MASK) as usize;
    let mut b = vec![0u8; n];
    if n > 0 {
        unsafe { syscall(sys::RESULT_READ, b.as_mut_ptr(), n as u32) };
    }
    b
}

/// Encodes fields as ABI.md's Framing says: each a little-endian u32
/// length, then its bytes.
pub fn frame(fields: &[&[u8]]) -> Vec<u8> {
    let mut b = Vec::with_capacity(fields.iter().map(|f| 4 + f.len()).sum());
    for f in fields {
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    b
}

/// Splits a frame into exactly `n` fields.
pub fn unframe(mut b: &[u8], n: usize) -> Option<Vec<&[u8]>> {
    let mut fields = Vec::with_capacity(n);
    while !b.is_empty() {
        if b.len() < 4 {
            return None;
        }
        let size = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if size > b.len() - 4 {
            return None;
        }
        fields.push(&b[4..4 + size]);
        b = &b[4 + size..];
    }
    if fields.len() == n {
        Some(fields)
    } else {
        None
    }
}

fn lossy(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// What a tool given to [`handle`] returns: text goes out as it is, a
/// [`json::Value`] encoded.
pub trait Output {
    fn into_bytes(self) -> Vec<u8>;
}

impl Output for String {
    fn into_bytes(self) -> Vec<u8> {
        String::into_bytes(self)
    }
}
impl Output for &str {
    fn into_bytes(self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Output for Vec<u8> {
    fn into_bytes(self) -> Vec<u8> {
        self
    }
}
impl Output for json::Value {
    fn into_bytes(self) -> Vec<u8> {
        self.to_string().into_bytes()
    }
}

/// Runs one tool call through `tool`: it parses the arguments, and gives
/// the tool's result, or fails with its error's message. Call it from the
/// tool's exported function:
///
/// ```no_run
/// # fn greet(_: &berm::json::Value) -> Result<String, String> { Ok(String::new()) }
/// #[no_mangle]
/// pub extern "C" fn berm_tool_greet() {
///     berm::handle(greet)
/// }
/// ```
pub fn handle<R: Output, E: fmt::Display>(tool: impl FnOnce(&json::Value) -> Result<R, E>) {
    let args = match args_json() {
        Ok(v) => v,
        Err(e) => return fail(&format!("arguments: {}", e)),
    };
    match tool(&args) {
        Ok(r) => result(r.into_bytes()),
        Err(e) => fail(&e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_fnv1a() {
        for (name, n) in [
            ("berm.args.len", sys::ARGS_LEN),
            ("berm.args.read", sys::ARGS_READ),
            ("berm.result", sys::RESULT),
            ("berm.fail", sys::FAIL),
            ("berm.log", sys::LOG),
            ("berm.call", sys::CALL),
            ("berm.result.read", sys::RESULT_READ),
            ("berm.now", sys::NOW),
            ("berm.get", sys::GET),
            ("berm.set", sys::SET),
            ("berm.delete", sys::DELETE),
            ("berm.http", sys::HTTP),
        ] {
            assert_eq!(sys::number(name), n, "{}", name);
        }
    }

    #[test]
    fn frames() {
        let f = frame(&[b"a", b"", b"xyz"]);
        assert_eq!(f, b"\x01\0\0\0a\0\0\0\0\x03\0\0\0xyz");
        assert_eq!(unframe(&f, 3).unwrap(), vec![&b"a"[..], b"", b"xyz"]);
        assert!(unframe(&f, 2).is_none());
        assert!(unframe(&f[..f.len() - 1], 3).is_none());
        assert!(unframe(b"\x01\0", 1).is_none());
    }

    extern "C" fn greet() {
        handle(|a: &json::Value| match a.get("name").and_then(json::Value::as_str) {
            Some(n) if !n.is_empty() => Ok(format!("Hello, {}!", n)),
            _ => Err("name is empty"),
        })
    }

    extern "C" fn counter() {
        let n: i64 = get("n").and_then(|b| String::from_utf8(b).ok()?.parse().ok()).unwrap_or(0) + 1;
        if let Err(e) = set("n", n.to_string()) {
            return fail(&e.to_string());
        }
        log("counted");
        result(n.to_string());
    }

    extern "C" fn nested() {
        match call("other", "tool", b"{}") {
            Ok(r) => result(r),
            Err(e) => fail(&e.to_string()),
        }
    }

    extern "C" fn fetch() {
        match http("GET", "https://example.com/", "", b"") {
            Ok(r) => result(format!("{} {:?} {}", r.status, r.header("content-type"), String::from_utf8_lossy(&r.body))),
            Err(e) => fail(&e.to_string()),
        }
    }

    #[test]
    fn fake_host() {
        let mut h = FakeHost::new(r#"{"name":"Ada"}"#);
        h.run(greet);
        assert_eq!((h.result.as_slice(), h.failed), (&b"Hello, Ada!"[..], false));
        h.args = br#"{"name":""}"#.to_vec();
        h.run(greet);
        assert!(h.failed && h.failure == "name is empty");
        h.args = b"{".to_vec();
        h.run(greet);
        assert!(h.failed && h.failure.starts_with("arguments: "), "{}", h.failure);

        h.run(counter);
        h.run(counter);
        assert_eq!(h.result, b"2");
        assert_eq!(h.logs, vec!["counted"]);
        h.store_limit = 1;
        h.run(counter);
        assert!(h.failed && h.failure.contains("quota"), "{}", h.failure);

        h.run(nested);
        assert!(h.failed && h.failure.contains("refused"), "{}", h.failure);
        h.callees.insert("other.tool".into(), Box::new(|_| Err(Error::Callee { target: String::new(), message: "it broke".into() })));
        h.run(nested);
        assert_eq!(h.failure, "other.tool: it broke");
        h.callees.insert("other.tool".into(), Box::new(|a| Ok(a.to_vec())));
        h.run(nested);
        assert_eq!((h.result.as_slice(), h.failed), (&b"{}"[..], false));

        h.run(fetch);
        assert!(h.failed && h.failure.contains("not granted"), "{}", h.failure);
        h.http = Some(Box::new(|m, u, _, _| {
            Ok(HttpResponse { status: 200, headers: "Content-Type: text/plain\r\n".into(), body: format!("{} {}", m, u).into_bytes() })
        }));
        h.run(fetch);
        assert_eq!(String::from_utf8_lossy(&h.result), r#"200 Some("text/plain") GET https://example.com/"#);
    }
}
