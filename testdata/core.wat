;; core: the core syscalls and the outcome of one call, tool by tool. Deployed as
;; "core" in tests. Each tool shows one rule of ABI.md: results and failures and
;; which wins, traps (unreachable, unknown and undeclared syscalls, memory out of
;; bounds, a malformed frame), the deadline, the memory limit, the size limit of a
;; result, the arguments as the program reads them, and logging. It declares no
;; syscalls beyond the core ones.
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))

  ;; Page 0 holds the strings below, a scratch area for numbers at 0x300 and one
  ;; for berm.result.read at 0x400. Whatever grows with the input (echo, the big
  ;; result) goes from $BUF on, in pages grown on demand.
  (memory (export "memory") 1)
  (global $BUF i32 (i32.const 0x10000))
  (global $NUM i32 (i32.const 0x300))
  (global $READ i32 (i32.const 0x400))
  ;; Far past any memory this module could have: 16 bytes below 4 GiB.
  (global $OOB i32 (i32.const 0xfffffff0))

  ;;        address  string                      length
  (data (i32.const 0x100) "it failed on purpose")  ;; 20
  (data (i32.const 0x120) "partial")               ;;  7
  (data (i32.const 0x130) "failure wins")          ;; 12
  (data (i32.const 0x140) "failed first")          ;; 12
  (data (i32.const 0x150) "late result")           ;; 11
  (data (i32.const 0x160) "first")                 ;;  5
  (data (i32.const 0x170) "second")                ;;  6
  (data (i32.const 0x180) "k")                     ;;  1
  (data (i32.const 0x190) "zero bytes never trap") ;; 21
  (data (i32.const 0x1b0) "refused")               ;;  7
  (data (i32.const 0x1c0) "grew")                  ;;  4
  (data (i32.const 0x1d0) "hello from core")       ;; 15
  (data (i32.const 0x1e0) "second line")           ;; 11
  (data (i32.const 0x1f0) "logged")                ;;  6
  (data (i32.const 0x200) "ok")                    ;;  2
  ;; A frame of one field whose u32 length (100) runs past the 2 bytes that
  ;; follow it: 6 bytes in all.
  (data (i32.const 0x210) "\64\00\00\00ab")
  (data (i32.const 0x230) "busy")
  ;; Four bytes that are not UTF-8.
  (data (i32.const 0x220) "\ff\fe\00\01")

  ;; ---- the core syscalls, one helper each (numbers: FNV-1a 64 of the name) ----

  (func $args_len (result i64)
    (call $sys (i64.const 0x6ee73f4eae1c1535) (i32.const 0) (i32.const 0)))     ;; berm.args.len
  (func $args_read (param $dst i32) (param $cap i32) (result i64)
    (call $sys (i64.const 0x4d9b428e492faf86) (local.get $dst) (local.get $cap))) ;; berm.args.read
  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result
  (func $fail (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x71ea7deedc66e725) (local.get $ptr) (local.get $len)))) ;; berm.fail
  (func $log (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x718e2c830194e059) (local.get $ptr) (local.get $len)))) ;; berm.log
  (func $call (param $ptr i32) (param $len i32) (result i64)
    (call $sys (i64.const 0x6410f207e9992ec1) (local.get $ptr) (local.get $len))) ;; berm.call
  (func $result_read (param $dst i32) (param $cap i32) (result i64)
    (call $sys (i64.const 0x6c92a7d946a830be) (local.get $dst) (local.get $cap))) ;; berm.result.read

  ;; ---- helpers ----

  ;; $ensure grows memory so that $BUF .. $BUF+n is inside it.
  (func $ensure (param $n i32)
    (local $want i32)
    ;; pages wanted: page 0, then ceil(n / 64 KiB) from $BUF on
    (local.set $want
      (i32.add (i32.const 1) (i32.shr_u (i32.add (local.get $n) (i32.const 0xffff)) (i32.const 16))))
    (if (i32.gt_u (local.get $want) (memory.size))
      (then
        ;; the fixtures never ask for more than the host allows: fail loudly if so
        (if (i32.eq (memory.grow (i32.sub (local.get $want) (memory.size))) (i32.const -1))
          (then unreachable)))))

  ;; $utoa writes v (unsigned) in decimal at dst and returns the number of digits.
  (func $utoa (param $v i64) (param $dst i32) (result i32)
    (local $n i32) (local $t i64) (local $p i32)
    ;; count the digits first, then write them from the last one back
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

  ;; ---- tools ----

  ;; echo: the arguments, byte for byte (up to the host's 1 MiB, so grow first).
  (func (export "berm_tool_echo")
    (local $n i32)
    (local.set $n (i32.wrap_i64 (call $args_len)))
    (call $ensure (local.get $n))
    (drop (call $args_read (global.get $BUF) (local.get $n)))
    (call $result (global.get $BUF) (local.get $n)))

  (func (export "berm_tool_fail")
    (call $fail (i32.const 0x100) (i32.const 20)))          ;; "it failed on purpose"

  ;; A failure wins over a result, in either order.
  (func (export "berm_tool_result_then_fail")
    (call $result (i32.const 0x120) (i32.const 7))          ;; "partial"
    (call $fail (i32.const 0x130) (i32.const 12)))          ;; "failure wins"
  (func (export "berm_tool_fail_then_result")
    (call $fail (i32.const 0x140) (i32.const 12))           ;; "failed first"
    (call $result (i32.const 0x150) (i32.const 11)))        ;; "late result"

  ;; The last result, and the last failure message, is the one that counts.
  (func (export "berm_tool_result_twice")
    (call $result (i32.const 0x160) (i32.const 5))          ;; "first"
    (call $result (i32.const 0x170) (i32.const 6)))         ;; "second"
  (func (export "berm_tool_fail_twice")
    (call $fail (i32.const 0x160) (i32.const 5))            ;; "first"
    (call $fail (i32.const 0x170) (i32.const 6)))           ;; "second"

  ;; empty: never calls berm.result, so the result is empty.
  (func (export "berm_tool_empty"))

  (func (export "berm_tool_trap")
    unreachable)

  ;; loop: runs until the host's deadline stops it.
  (func (export "berm_tool_loop")
    (loop $forever (br $forever)))

  ;; unknown_syscall: 0x1234 is in no host's table; the trap names it in hex.
  (func (export "berm_tool_unknown_syscall")
    (drop (call $sys (i64.const 0x1234) (i32.const 0) (i32.const 0))))

  ;; undeclared_syscall: berm.get of "k". core's manifest declares no syscalls,
  ;; so it traps even on a host that has berm.get.
  (func (export "berm_tool_undeclared_syscall")
    (drop (call $sys (i64.const 0xbda7ac832c28873f) (i32.const 0x180) (i32.const 1))))

  ;; oob_result: 100 bytes from 16 below 4 GiB are outside memory: a trap.
  (func (export "berm_tool_oob_result")
    (call $result (global.get $OOB) (i32.const 100)))

  ;; oob_args: berm.args.read writes min(100, length) bytes there, so it traps
  ;; whenever the arguments are not empty (and they never are: "{}" at least).
  (func (export "berm_tool_oob_args")
    (drop (call $args_read (global.get $OOB) (i32.const 100))))

  ;; zero_oob: zero bytes never trap, wherever they point.
  (func (export "berm_tool_zero_oob")
    (call $result (global.get $OOB) (i32.const 0))
    (drop (call $args_read (global.get $OOB) (i32.const 0)))
    (call $result (i32.const 0x190) (i32.const 21)))        ;; "zero bytes never trap"

  ;; grow: 4096 pages is 256 MiB, over the default limit of 128 MiB. Growing past
  ;; the limit is not a trap: memory.grow returns -1 and the program decides.
  (func (export "berm_tool_grow")
    (if (i32.eq (memory.grow (i32.const 4096)) (i32.const -1))
      (then (call $result (i32.const 0x1b0) (i32.const 7)))  ;; "refused"
      (else (call $result (i32.const 0x1c0) (i32.const 4)))));; "grew"

  (func (export "berm_tool_log")
    (call $log (i32.const 0x1d0) (i32.const 15))            ;; "hello from core"
    (call $log (i32.const 0x1e0) (i32.const 11))            ;; "second line"
    (call $result (i32.const 0x1f0) (i32.const 6)))         ;; "logged"

  (func (export "berm_tool_args_len")
    (call $result_u64 (call $args_len)))

  ;; read_partial: berm.args.read copies min(3, length) bytes and returns the
  ;; full length. The result is the bytes copied, ":", then that length, so
  ;; {"a":1} gives {"a:7.
  (func (export "berm_tool_read_partial")
    (local $full i64) (local $copied i32) (local $p i32)
    (local.set $full (call $args_read (global.get $NUM) (i32.const 3)))
    (local.set $copied
      (select (i32.const 3) (i32.wrap_i64 (local.get $full))
        (i64.ge_u (local.get $full) (i64.const 3))))
    (local.set $p (i32.add (global.get $NUM) (local.get $copied)))
    (i32.store8 (local.get $p) (i32.const 0x3a))            ;; ":"
    (local.set $p (i32.add (local.get $p) (i32.const 1)))
    (local.set $p (i32.add (local.get $p) (call $utoa (local.get $full) (local.get $p))))
    (call $result (global.get $NUM) (i32.sub (local.get $p) (global.get $NUM))))

  ;; result_read_empty: nothing was staged yet, so berm.result.read returns 0.
  (func (export "berm_tool_result_read_empty")
    (call $result_u64 (call $result_read (global.get $READ) (i32.const 16))))

  ;; bad_frame: a malformed frame traps (the field claims 100 bytes, 2 follow).
  (func (export "berm_tool_bad_frame")
    (drop (call $call (i32.const 0x210) (i32.const 6))))

  ;; strict: its parameters refuse anything but {"n": <integer>}, before it runs.
  (func (export "berm_tool_strict")
    (call $result (i32.const 0x200) (i32.const 2)))         ;; "ok"

  ;; big_result: 17 MiB of "x", over the default result limit of 16 MiB: the
  ;; host's error, not the program's result.
  (func (export "berm_tool_big_result")
    (call $ensure (i32.const 17825792))
    (memory.fill (global.get $BUF) (i32.const 0x78) (i32.const 17825792))
    (call $result (global.get $BUF) (i32.const 17825792)))

  ;; binary: a result that is not UTF-8 (ff fe 00 01).
  (func (export "berm_tool_binary")
    (call $result (i32.const 0x220) (i32.const 4)))

  ;; busy: logs "busy", so that a test knows it is in flight, then counts to
  ;; 5 million (about 100 ms) and returns "ok".
  (func (export "berm_tool_busy")
    (local $i i32)
    (call $log (i32.const 0x230) (i32.const 4))
    (loop $count
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $count (i32.lt_u (local.get $i) (i32.const 5000000))))
    (call $result (i32.const 0x200) (i32.const 2))))
