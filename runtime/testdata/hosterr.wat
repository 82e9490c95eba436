;; hosterr: host syscalls that fail, declared by the manifest and registered
;; by the test: test.oops returns a Go error, test.panic panics, test.refuse
;; refuses with RefuseHost. Deployed as "hosterr" in the runtime's tests, to
;; show that the program and its callers see the syscall's name and "host
;; error", never the error's text. Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/hosterr.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/hosterr.wasm /dev/stdin runtime/testdata/hosterr.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 1)

  ;;        address  string          length
  (data (i32.const 0x100) "hosterr")      ;; 7
  (data (i32.const 0x110) "oops")         ;; 4
  (data (i32.const 0x120) "panic")        ;; 5
  (data (i32.const 0x130) "{}")           ;; 2
  (data (i32.const 0x140) "refused:")     ;; 8
  (data (i32.const 0x150) "failed:")      ;; 7
  (data (i32.const 0x160) "survived")     ;; 8

  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result
  (func $result_read (param $dst i32) (param $cap i32) (result i64)
    (call $sys (i64.const 0x6c92a7d946a830be) (local.get $dst) (local.get $cap))) ;; berm.result.read

  ;; $outcome sets the result to what a staging syscall returned: "refused:"
  ;; or "failed:" and the staged message, or the staged bytes.
  (func $outcome (param $ret i64)
    (local $n i32) (local $at i32)
    (local.set $n (i32.wrap_i64 (i64.and (local.get $ret) (i64.const 0x3fffffffffffffff))))
    (local.set $at (i32.const 0x1000))
    (if (i64.ne (i64.and (local.get $ret) (i64.const 0x8000000000000000)) (i64.const 0))
      (then
        (if (i64.ne (i64.and (local.get $ret) (i64.const 0x4000000000000000)) (i64.const 0))
          (then
            (memory.copy (local.get $at) (i32.const 0x140) (i32.const 8))
            (local.set $at (i32.add (local.get $at) (i32.const 8))))
          (else
            (memory.copy (local.get $at) (i32.const 0x150) (i32.const 7))
            (local.set $at (i32.add (local.get $at) (i32.const 7)))))))
    ;; at most 4 KiB of the message
    (local.set $n (select (local.get $n) (i32.const 0x1000) (i32.lt_u (local.get $n) (i32.const 0x1000))))
    (drop (call $result_read (local.get $at) (local.get $n)))
    (call $result (i32.const 0x1000) (i32.sub (i32.add (local.get $at) (local.get $n)) (i32.const 0x1000))))

  ;; $call_self calls hosterr.<tool> with {}, the tool's name at $tool.
  (func $call_self (param $tool i32) (param $len i32)
    ;; the frame at 0x400: "hosterr", tool, "{}"
    (i32.store (i32.const 0x400) (i32.const 7))
    (memory.copy (i32.const 0x404) (i32.const 0x100) (i32.const 7))
    (i32.store (i32.const 0x40b) (local.get $len))
    (memory.copy (i32.const 0x40f) (local.get $tool) (local.get $len))
    (i32.store (i32.add (i32.const 0x40f) (local.get $len)) (i32.const 2))
    (memory.copy (i32.add (i32.const 0x413) (local.get $len)) (i32.const 0x130) (i32.const 2))
    (call $outcome
      (call $sys (i64.const 0x6410f207e9992ec1) (i32.const 0x400) (i32.add (i32.const 0x15) (local.get $len))))) ;; berm.call

  ;; oops: test.oops returns an error, which traps; "survived" if it did not.
  (func (export "berm_tool_oops")
    (drop (call $sys (i64.const 0x5909259f973f8b3a) (i32.const 0) (i32.const 0))) ;; test.oops
    (call $result (i32.const 0x160) (i32.const 8)))

  ;; panic: test.panic panics, which traps the same way.
  (func (export "berm_tool_panic")
    (drop (call $sys (i64.const 0xa0ae2b57748b93f0) (i32.const 0) (i32.const 0))) ;; test.panic
    (call $result (i32.const 0x160) (i32.const 8)))

  ;; refuse: test.refuse refuses with RefuseHost: "refused:" and its message.
  (func (export "berm_tool_refuse")
    (call $outcome (call $sys (i64.const 0x463ecfeba0006c21) (i32.const 0) (i32.const 0)))) ;; test.refuse

  ;; call_oops, call_panic: call oops and panic: "refused:" and the host's message.
  (func (export "berm_tool_call_oops")
    (call $call_self (i32.const 0x110) (i32.const 4)))
  (func (export "berm_tool_call_panic")
    (call $call_self (i32.const 0x120) (i32.const 5))))
