;; call_init_gate: a reactor whose _initialize waits at a gate the test
;; holds (gate.wait, a host function that returns when the test opens the
;; gate or its call's context is done), then sets ready. Deployed in
;; snapshot_test.go, where the first call's deadline comes while the
;; snapshot waits. Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/call_init_gate.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/call_init_gate.wasm /dev/stdin runtime/testdata/call_init_gate.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "gate" "wait" (func $wait))

  (memory (export "memory") 1)
  (global $ready (mut i32) (i32.const 0))

  (data (i32.const 0x100) "ready")      ;; 5
  (data (i32.const 0x110) "not ready")  ;; 9

  (func (export "_initialize")
    (call $wait)
    (global.set $ready (i32.const 1)))

  ;; t: "ready" when _initialize ran to its end before the call.
  (func (export "berm_tool_t")
    (if (global.get $ready)
      (then (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x100) (i32.const 5))))     ;; berm.result
      (else (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x110) (i32.const 9)))))))
