;; Every place a module names a function, which the transform moves up by
;; one when it imports its tick: calls, call_indirect through active and
;; passive element segments, ref.func in code and in a global, the start
;; function, exports; and fill, whose fills the transform weighs. Its tool runs and returns 1166 as a string, before the
;; rewrite and after. Built by testdata/fixtures.mk with funcs.abi.json.
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (type $i2i (func (param i32) (result i32)))
  (memory (export "memory") 17)
  (table $t 4 funcref)
  (global $started (mut i32) (i32.const 0))
  (global $fref funcref (ref.func $triple))
  (elem (i32.const 0) $double $triple)
  (elem $passive funcref (ref.func $add1) (ref.func $double))
  (start $start)

  (func $add1 (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  (func $double (export "double") (param i32) (result i32) (i32.mul (local.get 0) (i32.const 2)))
  (func $triple (param i32) (result i32) (i32.mul (local.get 0) (i32.const 3)))
  (func $start (global.set $started (i32.const 1)))

  ;; run returns 1000 (the start function ran) + 10 + 21 + 101 + 2 + 8 + 6 + 18.
  (func $run (result i32)
    (local $sum i32)
    (local.set $sum (i32.mul (global.get $started) (i32.const 1000)))
    (local.set $sum (i32.add (local.get $sum) (call_indirect $t (type $i2i) (i32.const 5) (i32.const 0))))
    (local.set $sum (i32.add (local.get $sum) (call_indirect $t (type $i2i) (i32.const 7) (i32.const 1))))
    (local.set $sum (i32.add (local.get $sum) (call $add1 (i32.const 100))))
    (table.init $t $passive (i32.const 2) (i32.const 0) (i32.const 2))
    (local.set $sum (i32.add (local.get $sum) (call_indirect $t (type $i2i) (i32.const 1) (i32.const 2))))
    (local.set $sum (i32.add (local.get $sum) (call_indirect $t (type $i2i) (i32.const 4) (i32.const 3))))
    (table.set $t (i32.const 0) (global.get $fref))
    (local.set $sum (i32.add (local.get $sum) (call_indirect $t (type $i2i) (i32.const 2) (i32.const 0))))
    (table.set $t (i32.const 1) (ref.func $double))
    (i32.add (local.get $sum) (call_indirect $t (type $i2i) (i32.const 9) (i32.const 1))))

  ;; The tool writes run's result in decimal and hands it to berm.result.
  (func (export "berm_tool_run")
    (local $n i32) (local $at i32)
    (local.set $n (call $run))
    (local.set $at (i32.const 16))
    (loop $digit
      (local.set $at (i32.sub (local.get $at) (i32.const 1)))
      (i32.store8 (local.get $at) (i32.add (i32.const 48) (i32.rem_u (local.get $n) (i32.const 10))))
      (br_if $digit (local.tee $n (i32.div_u (local.get $n) (i32.const 10)))))
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $at) (i32.sub (i32.const 16) (local.get $at)))))

  ;; fill fills 1 MiB n times.
  (func (export "fill") (param $n i32)
    (loop $again
      (memory.fill (i32.const 0) (i32.const 0) (i32.const 0x100000))
      (br_if $again (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))))
