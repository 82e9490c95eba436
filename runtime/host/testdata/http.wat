;; http: berm.http on a frame the test writes. The tool's arguments are
;; {"x":"HEX"}, HEX the frame [method, url, headers, body] in lowercase hex,
;; so that a test can send any request, a malformed frame included. The
;; result is "ok:", "error:" or "refused:" (plain, bit 63, bits 63+62), then
;; the staged bytes as they came.
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))

  ;; Page 0 holds the prefixes; the arguments go at $BUF, the frame after
  ;; them, the result after the frame.
  (memory (export "memory") 1)
  (global $BUF i32 (i32.const 0x10000))

  (data (i32.const 0x100) "ok:")       ;; 3
  (data (i32.const 0x110) "error:")    ;; 6
  (data (i32.const 0x120) "refused:")  ;; 8

  ;; $ensure grows memory so that 0 .. end is inside it.
  (func $ensure (param $end i32)
    (local $want i32)
    (local.set $want (i32.shr_u (i32.add (local.get $end) (i32.const 0xffff)) (i32.const 16)))
    (if (i32.gt_u (local.get $want) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $want) (memory.size))) (i32.const -1))
          (then unreachable)))))

  ;; $nibble is the value of one lowercase hex digit.
  (func $nibble (param $c i32) (result i32)
    (if (result i32) (i32.le_u (local.get $c) (i32.const 0x39))
      (then (i32.sub (local.get $c) (i32.const 0x30)))
      (else (i32.sub (local.get $c) (i32.const 0x57)))))

  (func (export "berm_tool_fetch")
    (local $n i32) (local $src i32) (local $end i32) (local $frame i32) (local $dst i32)
    (local $v i64) (local $len i32) (local $prefix i32) (local $plen i32) (local $out i32)
    ;; the arguments, at $BUF
    (local.set $n (i32.wrap_i64 (call $sys (i64.const 0x6ee73f4eae1c1535) (i32.const 0) (i32.const 0)))) ;; berm.args.len
    (call $ensure (i32.add (global.get $BUF) (local.get $n)))
    (drop (call $sys (i64.const 0x4d9b428e492faf86) (global.get $BUF) (local.get $n)))        ;; berm.args.read
    ;; the hex between {"x":" (6 bytes) and "} (2 bytes), decoded after them
    (local.set $src (i32.add (global.get $BUF) (i32.const 6)))
    (local.set $end (i32.sub (i32.add (global.get $BUF) (local.get $n)) (i32.const 2)))
    (local.set $frame (i32.add (global.get $BUF) (local.get $n)))
    (local.set $dst (local.get $frame))
    (call $ensure (i32.add (local.get $frame) (local.get $n)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $src) (local.get $end)))
        (i32.store8 (local.get $dst)
          (i32.or
            (i32.shl (call $nibble (i32.load8_u (local.get $src))) (i32.const 4))
            (call $nibble (i32.load8_u (i32.add (local.get $src) (i32.const 1))))))
        (local.set $src (i32.add (local.get $src) (i32.const 2)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 1)))
        (br $next)))
    (local.set $v (call $sys (i64.const 0xcd342abaa2542f6d) (local.get $frame)
      (i32.sub (local.get $dst) (local.get $frame))))                                       ;; berm.http
    (local.set $len (i32.wrap_i64 (i64.and (local.get $v) (i64.const 0x3fffffffffffffff))))
    (local.set $prefix (i32.const 0x100))
    (local.set $plen (i32.const 3))
    (if (i64.ne (i64.and (local.get $v) (i64.const 0x8000000000000000)) (i64.const 0))
      (then (local.set $prefix (i32.const 0x110)) (local.set $plen (i32.const 6))))
    (if (i64.ne (i64.and (local.get $v) (i64.const 0x4000000000000000)) (i64.const 0))
      (then (local.set $prefix (i32.const 0x120)) (local.set $plen (i32.const 8))))
    ;; the result: the prefix, then the staged bytes
    (local.set $out (local.get $dst))
    (call $ensure (i32.add (i32.add (local.get $out) (local.get $plen)) (local.get $len)))
    (memory.copy (local.get $out) (local.get $prefix) (local.get $plen))
    (drop (call $sys (i64.const 0x6c92a7d946a830be)
      (i32.add (local.get $out) (local.get $plen)) (local.get $len)))                     ;; berm.result.read
    (call $sys (i64.const 0x83ad05f161e950ac) (local.get $out)
      (i32.add (local.get $plen) (local.get $len)))                                        ;; berm.result
    drop)
)
