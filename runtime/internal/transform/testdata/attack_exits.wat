;; Ways out of a function that counts its deadline in a local (it has a
;; loop), for transform's attack tests: each export (param $n i32) (result
;; i32) turns its loop $n times, then leaves its own way with a result the
;; test compares with the original module's. The turns must reach the
;; global whichever way it leaves, or the host, calling it again and again,
;; would never see a tick. Built by testdata/fixtures.mk with
;; attack_exits.abi.json.
(module
  (type $ii (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (table 2 funcref)
  (elem (i32.const 0) $id $br_deep)
  (global $g (mut i32) (i32.const 0))

  (func $id (param i32) (result i32) (local.get 0))

  ;; br to the function's label from three blocks deep, with a result.
  (func $br_deep (export "br_deep") (param $n i32) (result i32)
    (loop $l
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n)))
    (block (result i32)
      (block
        (if (i32.eqz (local.get $n))
          (then (br 3 (i32.const 7))))
        (unreachable))
      (i32.const 0)))

  ;; return from an else arm, with code after it that never runs.
  (func (export "return_else") (param $n i32) (result i32)
    (loop $l
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n)))
    (if (local.get $n)
      (then (nop))
      (else (return (i32.const 11)) (drop (i32.const 1)) (br 0)))
    (i32.const 12))

  ;; br_table inside the loop, in a block: one label the loop's, one the
  ;; block's, the default the function's; each takes the value the loop
  ;; carries.
  (func (export "br_table_mixed") (param $n i32) (result i32)
    (i32.const 13)
    (loop $l (param i32) (result i32)
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (block $inner (param i32) (result i32)
        ;; n != 0: 0, the loop's; n == 0: 5, the default, the function's.
        (br_table 1 0 2 (select (i32.const 0) (i32.const 5) (local.get $n))))
      (i32.add (i32.const 1))))

  ;; br_if to the function's label with two results, from a block with a
  ;; parameter.
  (func (export "br_if_multi") (param $n i32) (result i32)
    (call $pair (local.get $n)) (i32.add))
  (func $pair (param $n i32) (result i32 i32)
    (i32.const 20)
    (block (param i32) (result i32 i32)
      (loop $l
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br_if $l (local.get $n)))
      (i32.const 1)
      (br_if 1 (i32.eqz (local.get $n)))
      (unreachable)))

  ;; The loop calls through the table, and ends at the function's end with
  ;; the sum of the results.
  (func (export "indirect") (param $n i32) (result i32)
    (local $s i32)
    (loop $l
      (local.set $s (i32.add (local.get $s)
        (call_indirect (type $ii) (i32.const 1) (i32.const 0))))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n)))
    (local.get $s))

  ;; Recursion from inside the loop: the callee counts too.
  (func $rec (export "recurse") (param $n i32) (result i32)
    (local $i i32)
    (local.set $i (local.get $n))
    (loop $l
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (br_if $l (local.get $i)))
    (if (result i32) (i32.gt_u (local.get $n) (i32.const 1))
      (then (i32.add (i32.const 1) (call $rec (i32.shr_u (local.get $n) (i32.const 1)))))
      (else (i32.const 0))))

  ;; The last thing is a br to the function label with an empty stack made
  ;; polymorphic by unreachable code before it.
  (func (export "unreachable_br") (param $n i32) (result i32)
    (loop $l
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n)))
    (block
      (br 1 (i32.const 30))
      (br 0))
    (unreachable))

  ;; The tool a manifest needs: every export once, for a few turns.
  (func (export "berm_tool_run")
    (drop (call $br_deep (i32.const 3)))))
