;; trap_panic: WASI programs that write a line of Go's panic or fatal error
;; to stderr or stdout, then trap (unreachable) or exit, to show that the
;; trap's message quotes the first such line of the call's output; and
;; programs whose output says no such thing, or says it and returns, to show
;; that nothing else changes. Deployed as "trap" in trap_test.go. Built from
;; the repository's root with
;;
;;   wat2wasm runtime/testdata/trap_panic.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/trap_panic.wasm /dev/stdin runtime/testdata/trap_panic.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))

  ;; Page 0 holds the strings, one iovec at 0x800 and its count at 0x810,
  ;; the frame of a berm.call at 0x900 and what it staged from 0x1000.
  (memory (export "memory") 1)

  (data (i32.const 0x100) "panic: ") ;; panic, 7
  (data (i32.const 0x120) "assignment to entry in nil map") ;; msg, 30
  (data (i32.const 0x140) "\0a") ;; nl, 1
  (data (i32.const 0x160) "\0agoroutine 1 [running]:\0amain.boom()\0a\09main.go:79 +0x2\0a") ;; trace, 53
  (data (i32.const 0x1a0) "panic: on stdout\0a") ;; stdout, 17
  (data (i32.const 0x1c0) "runtime: out of memory: cannot allocate 1048576-byte block (130383872 in use)\0afatal error: out of memory\0a\0agoroutine 1 [running]:\0a") ;; oom, 129
  (data (i32.const 0x260) "panic: exit\0a") ;; exit, 12
  (data (i32.const 0x280) "a\0ab\0ac\0apanic: past the budget\0a") ;; flood, 29
  (data (i32.const 0x2a0) "just a line\0a") ;; quiet, 12
  (data (i32.const 0x2c0) "log: panic: not at the start\0a") ;; notstart, 29
  (data (i32.const 0x2e0) "panic: but it returns\0a") ;; survives, 22
  (data (i32.const 0x300) "ok") ;; ok, 2
  (data (i32.const 0x320) "fatal error: all goroutines are asleep - deadlock!\0a") ;; fatal, 51
  (data (i32.const 0x360) "panic: first [recovered]\0a\09panic: second\0a") ;; twice, 40
  (data (i32.const 0x3a0) "panic: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9\c3\a9") ;; long, 279
  (data (i32.const 0x900) "\04\00\00\00\74\72\61\70\05\00\00\00\70\61\6e\69\63\02\00\00\00\7b\7d") ;; [trap, panic, {}], 23

  ;; $out writes the len bytes at ptr to fd in one fd_write.
  (func $out (param $fd i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0x800) (local.get $ptr))
    (i32.store (i32.const 0x804) (local.get $len))
    (drop (call $write (local.get $fd) (i32.const 0x800) (i32.const 1) (i32.const 0x810))))

  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result

  ;; $call_panic calls trap.panic and copies what was staged to 0x1000,
  ;; returning its length.
  (func $call_panic (result i32)
    (local $n i64)
    (local.set $n (i64.and
      (call $sys (i64.const 0x6410f207e9992ec1) (i32.const 0x900) (i32.const 23)) ;; berm.call
      (i64.const 0x3fffffffffffffff)))
    (drop (call $sys (i64.const 0x6c92a7d946a830be) (i32.const 0x1000) (i32.const 0x1000))) ;; berm.result.read
    (i32.wrap_i64 (local.get $n)))

  ;; panic: Go's panic, in the pieces Go's runtime writes it in, and the
  ;; start of its goroutine trace; then unreachable.
  (func (export "berm_tool_panic")
    (call $out (i32.const 2) (i32.const 0x100) (i32.const 7))
    (call $out (i32.const 2) (i32.const 0x120) (i32.const 30))
    (call $out (i32.const 2) (i32.const 0x140) (i32.const 1))
    (call $out (i32.const 2) (i32.const 0x160) (i32.const 53))
    unreachable)

  ;; stdout: a panic line on stdout.
  (func (export "berm_tool_stdout")
    (call $out (i32.const 1) (i32.const 0x1a0) (i32.const 17))
    unreachable)

  ;; oom: Go's out of memory, after the line that says what it could not
  ;; allocate.
  (func (export "berm_tool_oom")
    (call $out (i32.const 2) (i32.const 0x1c0) (i32.const 129))
    unreachable)

  ;; fatal: another fatal error of Go's runtime.
  (func (export "berm_tool_fatal")
    (call $out (i32.const 2) (i32.const 0x320) (i32.const 51))
    unreachable)

  ;; twice: a panic in a deferred function after a recovered one: the first
  ;; line is quoted.
  (func (export "berm_tool_twice")
    (call $out (i32.const 2) (i32.const 0x360) (i32.const 40))
    unreachable)

  ;; exit: a panic line, then proc_exit(2), as Go's exit after a panic.
  (func (export "berm_tool_exit")
    (call $out (i32.const 2) (i32.const 0x260) (i32.const 12))
    (call $exit (i32.const 2)))

  ;; long: a panic line of 279 bytes, no newline, ending in é's.
  (func (export "berm_tool_long")
    (call $out (i32.const 2) (i32.const 0x3a0) (i32.const 279))
    unreachable)

  ;; flood: three lines, then a panic line, in one write.
  (func (export "berm_tool_flood")
    (call $out (i32.const 2) (i32.const 0x280) (i32.const 29))
    unreachable)

  ;; quiet: a line that is no panic.
  (func (export "berm_tool_quiet")
    (call $out (i32.const 2) (i32.const 0x2a0) (i32.const 12))
    unreachable)

  ;; notstart: "panic: " not at the start of its line.
  (func (export "berm_tool_notstart")
    (call $out (i32.const 2) (i32.const 0x2c0) (i32.const 29))
    unreachable)

  ;; survives: a panic line, and then the result "ok".
  (func (export "berm_tool_survives")
    (call $out (i32.const 2) (i32.const 0x2e0) (i32.const 22))
    (call $result (i32.const 0x300) (i32.const 2)))

  ;; nested: calls trap.panic; its result is the refusal staged.
  (func (export "berm_tool_nested")
    (call $result (i32.const 0x1000) (call $call_panic)))

  ;; nested_trap: calls trap.panic, then traps itself, with nothing written.
  (func (export "berm_tool_nested_trap")
    (drop (call $call_panic))
    unreachable))
