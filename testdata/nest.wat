;; nest: berm.call, the nested call. Deployed as "nest" in tests, it calls itself
;; (and two targets that are not there) to show what a caller sees of each
;; outcome of its callee: a result, a failure (bit 63), and every refusal of the
;; host (bits 63 and 62): call depth, a trap, the deadline, a target the manifest
;; does not declare, no such program, no such tool, refused arguments.
;;
;; Each call_* tool sets its result to what $call made of the outcome:
;;   the callee's result (then the suffix: see down)
;;   "failed:" + the callee's failure message
;;   "refused:" + the host's message
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))

  ;; Page 0 holds the strings below and, at $FRAME, the frame of a berm.call.
  ;; What the callee returns is copied out from $BUF on, in pages grown on demand.
  (memory (export "memory") 1)
  (global $FRAME i32 (i32.const 0x1000))
  (global $BUF i32 (i32.const 0x10000))

  ;;        address  string             length
  (data (i32.const 0x100) "nest")           ;;  4
  (data (i32.const 0x110) "down")           ;;  4
  (data (i32.const 0x120) "echo")           ;;  4
  (data (i32.const 0x130) "fail")           ;;  4
  (data (i32.const 0x140) "trap")           ;;  4
  (data (i32.const 0x150) "spin")           ;;  4
  (data (i32.const 0x160) "strict")         ;;  6
  (data (i32.const 0x170) "nope")           ;;  4
  (data (i32.const 0x180) "other")          ;;  5
  (data (i32.const 0x190) "ghost")          ;;  5
  (data (i32.const 0x1a0) "tool")           ;;  4
  (data (i32.const 0x200) "{}")             ;;  2
  (data (i32.const 0x210) "{\"via\":\"nest\"}") ;; 14
  (data (i32.const 0x230) "{\"n\":\"x\"}")  ;;  9
  (data (i32.const 0x240) "[1]")            ;;  3
  (data (i32.const 0x250) "{\"n\":3}")      ;;  7
  (data (i32.const 0x300) "+")              ;;  1
  (data (i32.const 0x310) "refused:")       ;;  8
  (data (i32.const 0x320) "failed:")        ;;  7
  (data (i32.const 0x330) "callee failed")  ;; 13
  (data (i32.const 0x340) "ok")             ;;  2

  ;; ---- the core syscalls this module uses ----

  (func $args_len (result i64)
    (call $sys (i64.const 0x6ee73f4eae1c1535) (i32.const 0) (i32.const 0)))     ;; berm.args.len
  (func $args_read (param $dst i32) (param $cap i32) (result i64)
    (call $sys (i64.const 0x4d9b428e492faf86) (local.get $dst) (local.get $cap))) ;; berm.args.read
  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result
  (func $fail (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x71ea7deedc66e725) (local.get $ptr) (local.get $len)))) ;; berm.fail
  (func $berm_call (param $ptr i32) (param $len i32) (result i64)
    (call $sys (i64.const 0x6410f207e9992ec1) (local.get $ptr) (local.get $len))) ;; berm.call
  (func $result_read (param $dst i32) (param $cap i32) (result i64)
    (call $sys (i64.const 0x6c92a7d946a830be) (local.get $dst) (local.get $cap))) ;; berm.result.read

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

  ;; $field writes one frame field at dst (a little-endian u32 length, which is
  ;; how i32.store lays it out, then the bytes) and returns where the next goes.
  (func $field (param $dst i32) (param $src i32) (param $len i32) (result i32)
    (i32.store (local.get $dst) (local.get $len))
    (memory.copy (i32.add (local.get $dst) (i32.const 4)) (local.get $src) (local.get $len))
    (i32.add (local.get $dst) (i32.add (i32.const 4) (local.get $len))))

  ;; $call calls prog.tool with args and sets this call's result to the outcome:
  ;; bits 63 and 62 set: "refused:" + the staged message (the host's);
  ;; bit 63 alone:       "failed:" + the staged message (the callee's failure);
  ;; neither:            the staged bytes (the callee's result), then suffix.
  (func $call
    (param $prog i32) (param $prog_len i32)
    (param $tool i32) (param $tool_len i32)
    (param $args i32) (param $args_len i32)
    (param $suffix i32) (param $suffix_len i32)
    (local $end i32) (local $ret i64) (local $n i32) (local $at i32)
    (local.set $end
      (call $field
        (call $field
          (call $field (global.get $FRAME) (local.get $prog) (local.get $prog_len))
          (local.get $tool) (local.get $tool_len))
        (local.get $args) (local.get $args_len)))
    (local.set $ret (call $berm_call (global.get $FRAME) (i32.sub (local.get $end) (global.get $FRAME))))
    ;; the low 62 bits are the length of what was staged
    (local.set $n (i32.wrap_i64 (i64.and (local.get $ret) (i64.const 0x3fffffffffffffff))))
    (local.set $at (global.get $BUF))
    (call $ensure (i32.add (i32.const 8) (i32.add (local.get $n) (local.get $suffix_len))))
    (if (i64.ne (i64.and (local.get $ret) (i64.const 0x8000000000000000)) (i64.const 0))
      (then
        ;; an error message: the prefix, and never the suffix
        (local.set $suffix_len (i32.const 0))
        (if (i64.ne (i64.and (local.get $ret) (i64.const 0x4000000000000000)) (i64.const 0))
          (then
            (memory.copy (local.get $at) (i32.const 0x310) (i32.const 8))  ;; "refused:"
            (local.set $at (i32.add (local.get $at) (i32.const 8))))
          (else
            (memory.copy (local.get $at) (i32.const 0x320) (i32.const 7))  ;; "failed:"
            (local.set $at (i32.add (local.get $at) (i32.const 7)))))))
    (drop (call $result_read (local.get $at) (local.get $n)))
    (local.set $at (i32.add (local.get $at) (local.get $n)))
    (memory.copy (local.get $at) (local.get $suffix) (local.get $suffix_len))
    (local.set $at (i32.add (local.get $at) (local.get $suffix_len)))
    (call $result (global.get $BUF) (i32.sub (local.get $at) (global.get $BUF))))

  ;; ---- tools called by the others ----

  ;; down: calls itself until the host refuses the depth; each level that gets
  ;; its callee's result appends "+". With the default depth limit of 4 the
  ;; top-level result is "refused:<message>++++" (depths 0 to 3 each add one;
  ;; the call from depth 4 is refused).
  (func (export "berm_tool_down")
    (call $call (i32.const 0x100) (i32.const 4)   ;; nest
                (i32.const 0x110) (i32.const 4)   ;; down
                (i32.const 0x200) (i32.const 2)   ;; {}
                (i32.const 0x300) (i32.const 1))) ;; +

  ;; echo: returns its arguments.
  (func (export "berm_tool_echo")
    (local $n i32)
    (local.set $n (i32.wrap_i64 (call $args_len)))
    (call $ensure (local.get $n))
    (drop (call $args_read (global.get $BUF) (local.get $n)))
    (call $result (global.get $BUF) (local.get $n)))

  (func (export "berm_tool_fail")
    (call $fail (i32.const 0x330) (i32.const 13)))  ;; "callee failed"

  (func (export "berm_tool_trap")
    unreachable)

  (func (export "berm_tool_spin")
    (loop $forever (br $forever)))

  ;; strict: its parameters refuse anything but {"n": <integer>}.
  (func (export "berm_tool_strict")
    (call $result (i32.const 0x340) (i32.const 2)))  ;; "ok"

  ;; ---- tools that call ----

  ;; call_echo: the callee's result, {"via":"nest"}.
  (func (export "berm_tool_call_echo")
    (call $call (i32.const 0x100) (i32.const 4)   ;; nest
                (i32.const 0x120) (i32.const 4)   ;; echo
                (i32.const 0x210) (i32.const 14)  ;; {"via":"nest"}
                (i32.const 0) (i32.const 0)))

  ;; call_fail: "failed:callee failed".
  (func (export "berm_tool_call_fail")
    (call $call (i32.const 0x100) (i32.const 4)   ;; nest
                (i32.const 0x130) (i32.const 4)   ;; fail
                (i32.const 0x200) (i32.const 2)   ;; {}
                (i32.const 0) (i32.const 0)))

  ;; call_trap: the callee trapped: "refused:...".
  (func (export "berm_tool_call_trap")
    (call $call (i32.const 0x100) (i32.const 4)   ;; nest
                (i32.const 0x140) (i32.const 4)   ;; trap
                (i32.const 0x200) (i32.const 2)   ;; {}
                (i32.const 0) (i32.const 0)))

  ;; call_spin: the callee runs out of the shared deadline: "refused:..." to
  ;; this caller, which then meets the same deadline itself.
  (func (export "berm_tool_call_spin")
    (call $call (i32.const 0x100) (i32.const 4)   ;; nest
                (i32.const 0x150) (i32.const 4)   ;; spin
                (i32.const 0x200) (i32.const 2)   ;; {}
                (i32.const 0) (i32.const 0)))

  ;; call_undeclared: other.tool is not in the manifest's calls: "refused:...",
  ;; and nothing runs.
  (func (export "berm_tool_call_undeclared")
    (call $call (i32.const 0x180) (i32.const 5)   ;; other
                (i32.const 0x1a0) (i32.const 4)   ;; tool
                (i32.const 0x200) (i32.const 2)   ;; {}
                (i32.const 0) (i32.const 0)))

  ;; call_missing: ghost.tool is declared but nothing is deployed as ghost.
  (func (export "berm_tool_call_missing")
    (call $call (i32.const 0x190) (i32.const 5)   ;; ghost
                (i32.const 0x1a0) (i32.const 4)   ;; tool
                (i32.const 0x200) (i32.const 2)   ;; {}
                (i32.const 0) (i32.const 0)))

  ;; call_notool: nest.nope is declared but nest has no tool nope.
  (func (export "berm_tool_call_notool")
    (call $call (i32.const 0x100) (i32.const 4)   ;; nest
                (i32.const 0x170) (i32.const 4)   ;; nope
                (i32.const 0x200) (i32.const 2)   ;; {}
                (i32.const 0) (i32.const 0)))

  ;; call_badargs: {"n":"x"} is not valid against nest.strict's parameters.
  (func (export "berm_tool_call_badargs")
    (call $call (i32.const 0x100) (i32.const 4)   ;; nest
                (i32.const 0x160) (i32.const 6)   ;; strict
                (i32.const 0x230) (i32.const 9)   ;; {"n":"x"}
                (i32.const 0) (i32.const 0)))

  ;; call_notobject: [1] is JSON but not an object.
  (func (export "berm_tool_call_notobject")
    (call $call (i32.const 0x100) (i32.const 4)   ;; nest
                (i32.const 0x120) (i32.const 4)   ;; echo
                (i32.const 0x240) (i32.const 3)   ;; [1]
                (i32.const 0) (i32.const 0)))

  ;; call_ok_strict: {"n":3} is valid: "ok".
  (func (export "berm_tool_call_ok_strict")
    (call $call (i32.const 0x100) (i32.const 4)   ;; nest
                (i32.const 0x160) (i32.const 6)   ;; strict
                (i32.const 0x250) (i32.const 7)   ;; {"n":3}
                (i32.const 0) (i32.const 0))))
