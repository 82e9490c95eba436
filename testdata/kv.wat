;; kv: the berm binary's host syscalls berm.get, berm.set, berm.delete and
;; berm.now, which the manifest declares. Deployed as "kv" in tests. Every tool
;; works on the one key "k" (but absent_raw and set_big), so that a test sees the
;; store survive calls, redeploys and restarts, and stay apart per program.
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))

  ;; Page 0 holds the strings below and a scratch area for numbers at $NUM.
  ;; Frames and values, which grow with the input, go from $BUF on.
  (memory (export "memory") 1)
  (global $NUM i32 (i32.const 0x300))
  (global $BUF i32 (i32.const 0x10000))

  ;;        address  string        length
  (data (i32.const 0x100) "k")         ;; 1
  (data (i32.const 0x110) "set")       ;; 3
  (data (i32.const 0x120) "absent")    ;; 6
  (data (i32.const 0x130) "deleted")   ;; 7
  (data (i32.const 0x140) "missing")   ;; 7
  (data (i32.const 0x150) "big")       ;; 3
  (data (i32.const 0x160) "refused:")  ;; 8
  (data (i32.const 0x170) "failed:")   ;; 7

  ;; ---- syscalls: core ----

  (func $args_len (result i64)
    (call $sys (i64.const 0x6ee73f4eae1c1535) (i32.const 0) (i32.const 0)))     ;; berm.args.len
  (func $args_read (param $dst i32) (param $cap i32) (result i64)
    (call $sys (i64.const 0x4d9b428e492faf86) (local.get $dst) (local.get $cap))) ;; berm.args.read
  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result
  (func $result_read (param $dst i32) (param $cap i32) (result i64)
    (call $sys (i64.const 0x6c92a7d946a830be) (local.get $dst) (local.get $cap))) ;; berm.result.read

  ;; ---- syscalls: the host's, declared in the manifest ----

  (func $get (param $key i32) (param $len i32) (result i64)
    (call $sys (i64.const 0xbda7ac832c28873f) (local.get $key) (local.get $len))) ;; berm.get
  (func $set (param $frame i32) (param $len i32) (result i64)
    (call $sys (i64.const 0x585dd082f38a6e6b) (local.get $frame) (local.get $len))) ;; berm.set
  (func $delete (param $key i32) (param $len i32) (result i64)
    (call $sys (i64.const 0x84a8776bcc70bc72) (local.get $key) (local.get $len))) ;; berm.delete
  (func $now (result i64)
    (call $sys (i64.const 0x83918e830bfa80df) (i32.const 0) (i32.const 0)))     ;; berm.now

  ;; ---- helpers ----

  ;; $ensure grows memory so that $BUF .. $BUF+n is inside it.
  (func $ensure (param $n i32)
    (local $want i32)
    (local.set $want
      (i32.add (i32.const 1) (i32.shr_u (i32.add (local.get $n) (i32.const 0xffff)) (i32.const 16))))
    (if (i32.gt_u (local.get $want) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $want) (memory.size))) (i32.const -1))
          (then unreachable)))))

  ;; $utoa writes v (unsigned) in decimal at dst and returns the number of digits.
  (func $utoa (param $v i64) (param $dst i32) (result i32)
    (local $n i32) (local $t i64) (local $p i32)
    (local.set $t (local.get $v))
    (loop $count
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (local.set $t (i64.div_u (local.get $t) (i64.const 10)))
      (br_if $count (i64.ne (local.get $t) (i64.const 0))))
    (local.set $p (i32.add (local.get $dst) (local.get $n)))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p)
        (i32.add (i32.const 0x30) (i32.wrap_i64 (i64.rem_u (local.get $v) (i64.const 10)))))
      (local.set $v (i64.div_u (local.get $v) (i64.const 10)))
      (br_if $digit (i32.gt_u (local.get $p) (local.get $dst))))
    (local.get $n))

  ;; $result_u64 sets the result to the decimal string of v.
  (func $result_u64 (param $v i64)
    (call $result (global.get $NUM) (call $utoa (local.get $v) (global.get $NUM))))

  ;; $result_staged sets the result to the n staged bytes.
  (func $result_staged (param $n i32)
    (call $ensure (local.get $n))
    (drop (call $result_read (global.get $BUF) (local.get $n)))
    (call $result (global.get $BUF) (local.get $n)))

  ;; $result_error sets the result to the staged error message of a staging
  ;; return, after "refused:" (bits 63 and 62: the host's) or "failed:" (bit 63).
  (func $result_error (param $ret i64)
    (local $n i32) (local $prefix i32) (local $prefix_len i32)
    (local.set $n (i32.wrap_i64 (i64.and (local.get $ret) (i64.const 0x3fffffffffffffff))))
    (if (i64.ne (i64.and (local.get $ret) (i64.const 0x4000000000000000)) (i64.const 0))
      (then (local.set $prefix (i32.const 0x160)) (local.set $prefix_len (i32.const 8)))  ;; "refused:"
      (else (local.set $prefix (i32.const 0x170)) (local.set $prefix_len (i32.const 7)))) ;; "failed:"
    (call $ensure (i32.add (local.get $prefix_len) (local.get $n)))
    (memory.copy (global.get $BUF) (local.get $prefix) (local.get $prefix_len))
    (drop (call $result_read (i32.add (global.get $BUF) (local.get $prefix_len)) (local.get $n)))
    (call $result (global.get $BUF) (i32.add (local.get $prefix_len) (local.get $n))))

  ;; $is_error: bit 63, an error message was staged.
  (func $is_error (param $ret i64) (result i32)
    (i64.ne (i64.and (local.get $ret) (i64.const 0x8000000000000000)) (i64.const 0)))
  ;; $is_refusal: bits 63 and 62, the host refused.
  (func $is_refusal (param $ret i64) (result i32)
    (i64.eq (i64.and (local.get $ret) (i64.const 0xc000000000000000)) (i64.const 0xc000000000000000)))

  ;; $set_framed calls berm.set on the frame [key, value] at $BUF, whose value
  ;; is vlen bytes long, and sets the result to "set" or the refusal.
  (func $set_framed (param $klen i32) (param $vlen i32)
    (local $ret i64)
    (local.set $ret (call $set (global.get $BUF)
      (i32.add (i32.add (i32.const 8) (local.get $klen)) (local.get $vlen))))
    (if (call $is_error (local.get $ret))
      (then (call $result_error (local.get $ret)))
      (else (call $result (i32.const 0x110) (i32.const 3)))))  ;; "set"

  ;; ---- tools ----

  ;; set: stores the call's arguments, byte for byte, under "k". The frame
  ;; [u32 1, "k", u32 n, arguments] is built at $BUF, the arguments read straight
  ;; into their place in it.
  (func (export "berm_tool_set")
    (local $n i32)
    (local.set $n (i32.wrap_i64 (call $args_len)))
    (call $ensure (i32.add (i32.const 9) (local.get $n)))
    (i32.store (global.get $BUF) (i32.const 1))
    (memory.copy (i32.add (global.get $BUF) (i32.const 4)) (i32.const 0x100) (i32.const 1))  ;; "k"
    (i32.store (i32.add (global.get $BUF) (i32.const 5)) (local.get $n))
    (drop (call $args_read (i32.add (global.get $BUF) (i32.const 9)) (local.get $n)))
    (call $set_framed (i32.const 1) (local.get $n)))

  ;; get: the value under "k", or "absent" (bit 63). The host has no reason to
  ;; refuse a get (bits 63 and 62), but should it, the result says so.
  (func (export "berm_tool_get")
    (local $ret i64)
    (local.set $ret (call $get (i32.const 0x100) (i32.const 1)))  ;; "k"
    (if (call $is_refusal (local.get $ret))
      (then (call $result_error (local.get $ret)) (return)))
    (if (call $is_error (local.get $ret))
      (then (call $result (i32.const 0x120) (i32.const 6)))       ;; "absent"
      (else (call $result_staged (i32.wrap_i64 (local.get $ret))))))

  (func (export "berm_tool_delete")
    (drop (call $delete (i32.const 0x100) (i32.const 1)))          ;; "k"
    (call $result (i32.const 0x130) (i32.const 7)))                ;; "deleted"

  ;; now: milliseconds since the Unix epoch, in decimal.
  (func (export "berm_tool_now")
    (call $result_u64 (call $now)))

  ;; absent_raw: berm.get of an absent key returns exactly 0x8000000000000000
  ;; (bit 63, zero bytes staged), so this gives "9223372036854775808".
  (func (export "berm_tool_absent_raw")
    (call $result_u64 (call $get (i32.const 0x140) (i32.const 7))))  ;; "missing"

  ;; set_big: 2 MiB of "v" under "big", to meet the host's quota: "set" or
  ;; "refused:<message>".
  (func (export "berm_tool_set_big")
    (call $ensure (i32.add (i32.const 11) (i32.const 2097152)))
    (i32.store (global.get $BUF) (i32.const 3))
    (memory.copy (i32.add (global.get $BUF) (i32.const 4)) (i32.const 0x150) (i32.const 3))  ;; "big"
    (i32.store (i32.add (global.get $BUF) (i32.const 7)) (i32.const 2097152))
    (memory.fill (i32.add (global.get $BUF) (i32.const 11)) (i32.const 0x76) (i32.const 2097152))  ;; "v"
    (call $set_framed (i32.const 3) (i32.const 2097152))))
