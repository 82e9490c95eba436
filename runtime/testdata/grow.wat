;; grow: memory grown one page at a time to whatever limit the host sets, each
;; new page written in full, so that the host's resident memory follows its
;; committed memory. Deployed as "grow" in the runtime's tests. Built from the
;; repository's root with
;;
;;   wat2wasm runtime/testdata/grow.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/grow.wasm /dev/stdin runtime/testdata/grow.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))

  ;; The maximum is the ABI's, far over any host's limit: the host decides.
  (memory (export "memory") 1 65536)

  ;;        address  string          length
  (data (i32.const 0x100) "grow")         ;; 4
  (data (i32.const 0x110) "{}")           ;; 2
  (data (i32.const 0x120) "refused:")     ;; 8
  (data (i32.const 0x130) "dirty")        ;; 5

  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result
  (func $berm_call (param $ptr i32) (param $len i32) (result i64)
    (call $sys (i64.const 0x6410f207e9992ec1) (local.get $ptr) (local.get $len))) ;; berm.call
  (func $result_read (param $dst i32) (param $cap i32) (result i64)
    (call $sys (i64.const 0x6c92a7d946a830be) (local.get $dst) (local.get $cap))) ;; berm.result.read

  ;; $grow grows memory one page at a time until memory.grow returns -1,
  ;; filling each new page with 0xab, and returns the pages it ended with.
  (func $grow (result i32)
    (local $old i32)
    (block $full
      (loop $more
        (local.set $old (memory.grow (i32.const 1)))
        (br_if $full (i32.eq (local.get $old) (i32.const -1)))
        (memory.fill (i32.shl (local.get $old) (i32.const 16)) (i32.const 0xab) (i32.const 0x10000))
        (br $more)))
    (memory.size))

  ;; $zero reports whether the bytes from $at to $end (multiples of 8) are 0.
  (func $zero (param $at i32) (param $end i32) (result i32)
    (block $no
      (loop $more
        (if (i32.ge_u (local.get $at) (local.get $end)) (then (return (i32.const 1))))
        (br_if $no (i64.ne (i64.load (local.get $at)) (i64.const 0)))
        (local.set $at (i32.add (local.get $at) (i32.const 8)))
        (br $more)))
    (i32.const 0))

  ;; $utoa writes v in decimal at 0x200 and returns the number of digits.
  (func $utoa (param $v i32) (result i32)
    (local $n i32) (local $t i32) (local $p i32)
    (local.set $t (local.get $v))
    (loop $count
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (br_if $count (i32.ne (local.get $t) (i32.const 0))))
    (local.set $p (i32.add (i32.const 0x200) (local.get $n)))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.rem_u (local.get $v) (i32.const 10))))
      (local.set $v (i32.div_u (local.get $v) (i32.const 10)))
      (br_if $digit (i32.ne (local.get $v) (i32.const 0))))
    (local.get $n))

  ;; grow: grows to the limit; the result is the pages reached, in decimal.
  (func (export "berm_tool_grow")
    (call $result (i32.const 0x200) (call $utoa (call $grow))))

  ;; fresh: grows like grow, checking first that the memory it starts with
  ;; (past the strings) and every page it grows are zeros: "dirty" if one is
  ;; not, else the pages reached.
  (func (export "berm_tool_fresh")
    (local $old i32)
    (if (i32.eqz (call $zero (i32.const 0x200) (i32.shl (memory.size) (i32.const 16))))
      (then (call $result (i32.const 0x130) (i32.const 5)) (return)))
    (block $full
      (loop $more
        (local.set $old (memory.grow (i32.const 1)))
        (br_if $full (i32.eq (local.get $old) (i32.const -1)))
        (if (i32.eqz (call $zero (i32.shl (local.get $old) (i32.const 16))
                                 (i32.shl (i32.add (local.get $old) (i32.const 1)) (i32.const 16))))
          (then (call $result (i32.const 0x130) (i32.const 5)) (return)))
        (memory.fill (i32.shl (local.get $old) (i32.const 16)) (i32.const 0xab) (i32.const 0x10000))
        (br $more)))
    ;; and dirty page 0 for the next instance
    (memory.fill (i32.const 0x200) (i32.const 0xab) (i32.const 0xfe00))
    (call $result (i32.const 0x200) (call $utoa (memory.size))))

  ;; grow_call: grows to the limit, then calls grow.grow: the callee's result,
  ;; or "refused:" and the host's message.
  (func (export "berm_tool_grow_call")
    (local $ret i64) (local $n i32)
    (drop (call $grow))
    ;; the frame of berm.call at 0x400: "grow", "grow", "{}"
    (i32.store (i32.const 0x400) (i32.const 4))
    (memory.copy (i32.const 0x404) (i32.const 0x100) (i32.const 4))
    (i32.store (i32.const 0x408) (i32.const 4))
    (memory.copy (i32.const 0x40c) (i32.const 0x100) (i32.const 4))
    (i32.store (i32.const 0x410) (i32.const 2))
    (memory.copy (i32.const 0x414) (i32.const 0x110) (i32.const 2))
    (local.set $ret (call $berm_call (i32.const 0x400) (i32.const 0x16)))
    (local.set $n (i32.wrap_i64 (i64.and (local.get $ret) (i64.const 0x3fffffffffffffff))))
    ;; the message (at most 2 KiB of it) after "refused:" at 0x800
    (memory.copy (i32.const 0x800) (i32.const 0x120) (i32.const 8))
    (drop (call $result_read (i32.const 0x808) (i32.const 0x800)))
    (if (i64.ne (i64.and (local.get $ret) (i64.const 0x4000000000000000)) (i64.const 0))
      (then (call $result (i32.const 0x800) (i32.add (i32.const 8) (local.get $n))))
      (else (call $result (i32.const 0x808) (local.get $n))))))
