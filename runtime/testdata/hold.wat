;; hold: the echo that waits. Its one tool calls test.hold, which the
;; benchmark registers and which blocks until the benchmark lets it go, then
;; returns its arguments as testdata/echo.wasm does. It holds calls in flight
;; at once, for what they weigh together (BenchmarkWarmInFlight). Built from
;; the repository's root with
;;
;;   wat2wasm runtime/testdata/hold.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/hold.wasm /dev/stdin runtime/testdata/hold.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (func (export "berm_tool_echo")
    (local $n i32)
    (drop (call $sys (i64.const 0x29241e75df82ab7c) (i32.const 0) (i32.const 0))) ;; test.hold
    ;; n = berm.args.len; the arguments go at 1024, and must fit in the page
    (local.set $n (i32.wrap_i64 (call $sys (i64.const 0x6ee73f4eae1c1535) (i32.const 0) (i32.const 0))))
    (if (i32.gt_u (local.get $n) (i32.const 64512)) (then unreachable))
    ;; berm.args.read, then berm.result from the same bytes
    (drop (call $sys (i64.const 0x4d9b428e492faf86) (i32.const 1024) (local.get $n)))
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 1024) (local.get $n)))))
