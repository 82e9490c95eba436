;; attack2_tick: the deadline's countdown (transform.Deadline's counter, a
;; global the rewrite adds) left by one call and found by the next in a
;; pooled instance. Neither tool calls the host: "probe" is run with its
;; context already cancelled, so it returns well only when no tick (which
;; checks the context) falls within its loop, which depends on what the
;; instance's earlier calls counted. Deployed as "tick" in
;; isolation_attack_test.go. Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/attack2_tick.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/attack2_tick.wasm /dev/stdin runtime/testdata/attack2_tick.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 1)

  ;; $spin turns a loop of one turn $n times.
  (func $spin (param $n i32)
    (loop $again
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $again (i32.gt_s (local.get $n) (i32.const 0)))))

  ;; burn: 10,000 turns, which leaves the countdown about 6,400 short of
  ;; its period (16,384) in a new instance.
  (func (export "berm_tool_burn") (call $spin (i32.const 10000)))

  ;; probe: 10,000 turns, within a period of a new instance's countdown.
  (func (export "berm_tool_probe") (call $spin (i32.const 10000))))
