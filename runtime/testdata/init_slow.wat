;; init_slow: a reactor whose _initialize takes 2 seconds by the clock,
;; whatever the machine's speed: longer than a snapshot may run
;; (snapshotDeadline), well within a call's deadline. Deployed in the
;; runtime's tests (snapshot_test.go). Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/init_slow.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/init_slow.wasm /dev/stdin runtime/testdata/init_slow.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))

  (memory (export "memory") 1)
  (global $ready (mut i32) (i32.const 0))

  (data (i32.const 0x100) "ready")    ;; 5
  (data (i32.const 0x110) "not ready")    ;; 9

  (func $now (result i64)
    (drop (call $clock (i32.const 1) (i64.const 1) (i32.const 0)))  ;; monotonic
    (i64.load (i32.const 0)))

  (func (export "_initialize")
    (local $until i64)
    (local.set $until (i64.add (call $now) (i64.const 2000000000)))
    (loop $spin (br_if $spin (i64.lt_u (call $now) (local.get $until))))
    (global.set $ready (i32.const 1)))

  ;; t: "ready" when _initialize ran to its end before the call.
  (func (export "berm_tool_t")
    (if (global.get $ready)
      (then (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x100) (i32.const 5))))     ;; berm.result
      (else (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x110) (i32.const 9)))))))
