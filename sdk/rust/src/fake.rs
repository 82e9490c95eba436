//! The fake host: tools run natively, under `cargo test`.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};

use crate::{frame, sys, unframe, Error, HttpResponse};

/// A callee of `berm.call` under the fake host: its error is its failure,
/// unless it is [`Error::Refused`], which is the host's.
pub type Callee = Box<dyn Fn(&[u8]) -> Result<Vec<u8>, Error>>;

/// What answers `berm.http` under the fake host: method, URL, header block
/// and body in; a response, or the host's refusal message.
pub type HttpHandler = Box<dyn Fn(&str, &str, &str, &[u8]) -> Result<HttpResponse, String>>;

/// FakeHost stands in for a berm host off WebAssembly, so that a program's
/// tools run under plain `cargo test`. Set the fields that are the call's
/// input, [`run`](FakeHost::run) the tool, then read the fields that are its
/// outcome:
///
/// ```
/// # #[no_mangle] pub extern "C" fn berm_tool_greet() { berm::result("Hello, Ada!") }
/// let mut h = berm::FakeHost::new(r#"{"name":"Ada"}"#);
/// h.run(berm_tool_greet);
/// assert_eq!(h.result, b"Hello, Ada!");
/// ```
///
/// It links every syscall, declared or not, and checks no schema.
#[derive(Default)]
pub struct FakeHost {
    /// The call's arguments; empty stands for `{}`.
    pub args: Vec<u8>,
    /// The program's key-value store, which outlives the call.
    pub store: BTreeMap<Vec<u8>, Vec<u8>>,
    /// When positive, bounds the bytes of keys and values in the store: a
    /// set past it is refused.
    pub store_limit: usize,
    /// What `berm.now` returns; 0 stands for the real clock.
    pub now_ms: i64,
    /// The tools `berm.call` can reach, by "program.tool"; it refuses any
    /// other.
    pub callees: HashMap<String, Callee>,
    /// Answers `berm.http`; `None` refuses every request, as a deployment
    /// that grants no host does.
    pub http: Option<HttpHandler>,

    /// The outcome of the last run: what the tool last gave `berm.result`;
    /// whether it called `berm.fail`, and the last message.
    pub result: Vec<u8>,
    pub failed: bool,
    pub failure: String,
    /// The lines the tool logged, in order.
    pub logs: Vec<String>,

    staged: Vec<u8>,
}

thread_local! {
    static CURRENT: Cell<*mut FakeHost> = Cell::new(std::ptr::null_mut());
}

impl FakeHost {
    /// A host whose call has these arguments.
    pub fn new(args: &str) -> FakeHost {
        FakeHost { args: args.as_bytes().to_vec(), ..FakeHost::default() }
    }

    /// Runs `tool`, a tool's exported function, as one call to this host:
    /// it clears the outcome of the previous run and keeps the store. A
    /// callee must not run.
    pub fn run(&mut self, tool: extern "C" fn()) {
        self.result.clear();
        self.failed = false;
        self.failure.clear();
        self.logs.clear();
        self.staged.clear();
        struct Reset(*mut FakeHost);
        impl Drop for Reset {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let previous = CURRENT.with(|c| c.replace(self as *mut FakeHost));
        let _reset = Reset(previous);
        tool();
    }

    fn stage(&mut self, b: &[u8]) -> u64 {
        self.staged = b.to_vec();
        b.len() as u64
    }

    fn refuse(&mut self, message: &str) -> u64 {
        self.stage(message.as_bytes()) | sys::ERROR_BIT | sys::HOST_BIT
    }

    fn handle(&mut self, number: u64, mem: &mut [u8]) -> u64 {
        let args: &[u8] = if self.args.is_empty() { b"{}" } else { &self.args };
        match number {
            sys::ARGS_LEN => args.len() as u64,
            sys::ARGS_READ => {
                let n = mem.len().min(args.len());
                mem[..n].copy_from_slice(&args[..n]);
                args.len() as u64
            }
            sys::RESULT => {
                self.result = mem.to_vec();
                0
            }
            sys::FAIL => {
                self.failed = true;
                self.failure = String::from_utf8_lossy(mem).into_owned();
                0
            }
            sys::LOG => {
                self.logs.push(String::from_utf8_lossy(mem).into_owned());
                0
            }
            sys::RESULT_READ => {
                let n = mem.len().min(self.staged.len());
                mem[..n].copy_from_slice(&self.staged[..n]);
                self.staged.len() as u64
            }
            sys::NOW => {
                if self.now_ms != 0 {
                    return self.now_ms as u64;
                }
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or(0)
            }
            sys::GET => match self.store.get(&*mem).cloned() {
                Some(v) => self.stage(&v),
                None => self.stage(b"") | sys::ERROR_BIT,
            },
            sys::SET => {
                let f = fields(mem, 2);
                let (key, value) = (f[0].to_vec(), f[1].to_vec());
                if self.store_limit > 0 {
                    let others: usize =
                        self.store.iter().filter(|(k, _)| **k != key).map(|(k, v)| k.len() + v.len()).sum();
                    if others + key.len() + value.len() > self.store_limit {
                        return self.refuse("berm.set: refused: the store would exceed its quota");
                    }
                }
                self.store.insert(key, value);
                0
            }
            sys::DELETE => {
                self.store.remove(&*mem);
                0
            }
            sys::CALL => {
                let f = fields(mem, 3);
                let target = format!("{}.{}", String::from_utf8_lossy(f[0]), String::from_utf8_lossy(f[1]));
                let out = match self.callees.get(&target) {
                    None => return self.refuse(&format!("berm.call {}: refused: no such program or tool", target)),
                    Some(callee) => callee(f[2]),
                };
                match out {
                    Ok(r) => self.stage(&r),
                    Err(e @ Error::Refused { .. }) => self.refuse(&e.to_string()),
                    Err(Error::Callee { message, .. }) => self.stage(message.as_bytes()) | sys::ERROR_BIT,
                }
            }
            sys::HTTP => {
                let f = fields(mem, 4);
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                let out = match &self.http {
                    None => Err("berm.http: refused: the host is not granted".to_string()),
                    Some(h) => h(&text(f[0]), &text(f[1]), &text(f[2]), f[3]),
                };
                match out {
                    Ok(r) => {
                        let framed = frame(&[r.status.to_string().as_bytes(), r.headers.as_bytes(), &r.body]);
                        self.stage(&framed)
                    }
                    Err(m) => self.refuse(&m),
                }
            }
            _ => panic!("berm: syscall {:#x}: nothing is registered for it", number),
        }
    }
}

// fields splits a frame, panicking as a host traps.
fn fields(b: &[u8], n: usize) -> Vec<&[u8]> {
    unframe(b, n).unwrap_or_else(|| panic!("berm: malformed frame: a host traps"))
}

pub(crate) unsafe fn syscall(number: u64, ptr: *const u8, len: u32) -> u64 {
    let h = CURRENT.with(|c| c.get());
    if h.is_null() {
        panic!("berm: no host: off WebAssembly, call tools inside FakeHost::run");
    }
    let reads = number == sys::ARGS_READ || number == sys::RESULT_READ;
    // The host works on a copy, written back for the read syscalls only
    // (whose pointer the crate took from a mutable buffer).
    let mut buf = if reads || len == 0 {
        vec![0u8; len as usize]
    } else {
        std::slice::from_raw_parts(ptr, len as usize).to_vec()
    };
    let v = (*h).handle(number, &mut buf);
    if reads && len > 0 {
        std::slice::from_raw_parts_mut(ptr as *mut u8, len as usize).copy_from_slice(&buf);
    }
    v
}
