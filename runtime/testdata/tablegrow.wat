;; tablegrow: table.grow on a table declared without a maximum, which the
;; host bounds when it compiles the program. Deployed as "tablegrow" in the
;; runtime's tests. Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/tablegrow.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/tablegrow.wasm /dev/stdin runtime/testdata/tablegrow.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 1)

  ;; No maximum, as Go's linker declares its table.
  (table $t 1 funcref)

  ;;        address  string          length
  (data (i32.const 0x100) "grow=")        ;; 5
  (data (i32.const 0x108) " full=")       ;; 6
  (data (i32.const 0x110) " past=")       ;; 6
  (data (i32.const 0x118) " size=")       ;; 6

  ;; $str copies $len bytes from $src to $at and returns where they end.
  (func $str (param $at i32) (param $src i32) (param $len i32) (result i32)
    (memory.copy (local.get $at) (local.get $src) (local.get $len))
    (i32.add (local.get $at) (local.get $len)))

  ;; $itoa writes $v, signed, in decimal at $at and returns where it ends.
  (func $itoa (param $at i32) (param $v i32) (result i32)
    (local $n i32) (local $t i32)
    (if (i32.lt_s (local.get $v) (i32.const 0))
      (then
        (i32.store8 (local.get $at) (i32.const 45)) ;; '-'
        (local.set $at (i32.add (local.get $at) (i32.const 1)))
        (local.set $v (i32.sub (i32.const 0) (local.get $v)))))
    (local.set $t (local.get $v))
    (loop $count
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (br_if $count (i32.ne (local.get $t) (i32.const 0))))
    (local.set $at (i32.add (local.get $at) (local.get $n)))
    (local.set $t (local.get $at))
    (loop $digit
      (local.set $t (i32.sub (local.get $t) (i32.const 1)))
      (i32.store8 (local.get $t) (i32.add (i32.const 48) (i32.rem_u (local.get $v) (i32.const 10))))
      (local.set $v (i32.div_u (local.get $v) (i32.const 10)))
      (br_if $digit (i32.ne (local.get $v) (i32.const 0))))
    (local.get $at))

  ;; grow: table.grow by 250,000,000 entries (2 GB in wazero), then to
  ;; 2^20 entries, then by one more; the results and the size reached, as
  ;; "grow=G full=F past=P size=S".
  (func (export "berm_tool_grow")
    (local $at i32)
    (local.set $at (call $str (i32.const 0x200) (i32.const 0x100) (i32.const 5)))
    (local.set $at (call $itoa (local.get $at) (table.grow $t (ref.null func) (i32.const 250000000))))
    (local.set $at (call $str (local.get $at) (i32.const 0x108) (i32.const 6)))
    (local.set $at (call $itoa (local.get $at)
      (table.grow $t (ref.null func) (i32.sub (i32.const 0x100000) (table.size $t)))))
    (local.set $at (call $str (local.get $at) (i32.const 0x110) (i32.const 6)))
    (local.set $at (call $itoa (local.get $at) (table.grow $t (ref.null func) (i32.const 1))))
    (local.set $at (call $str (local.get $at) (i32.const 0x118) (i32.const 6)))
    (local.set $at (call $itoa (local.get $at) (table.size $t)))
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x200) (i32.sub (local.get $at) (i32.const 0x200))))) ;; berm.result
)
