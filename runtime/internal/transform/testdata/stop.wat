;; Programs that never end, each in its own way, for the deadline transform's
;; tests: the host must stop every one. Built by testdata/fixtures.mk with
;; stop.abi.json.
(module
  (memory (export "memory") 1)
  (global $n (mut i32) (i32.const 0))
  ;; A loop with nothing in it.
  (func (export "berm_tool_loop")
    (loop $l (br $l)))
  ;; Recursion without a loop: each call is bounded, but they never end, and
  ;; the stack never overflows (a tail of calls that return).
  (func $fib (param i32) (result i32)
    (if (result i32) (i32.lt_u (local.get 0) (i32.const 2))
      (then (local.get 0))
      (else (i32.add
        (call $fib (i32.sub (local.get 0) (i32.const 1)))
        (call $fib (i32.sub (local.get 0) (i32.const 2)))))))
  (func (export "berm_tool_recurse")
    (global.set $n (call $fib (i32.const 60))))
  ;; A loop in a leaf function, called from a loop.
  (func $spin (loop $l (br_if $l (i32.eqz (global.get $n)))))
  (func (export "berm_tool_nested")
    (loop $l (call $spin) (br $l))))
