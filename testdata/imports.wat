;; imports: imports from modules other than berm. env.missing is provided by no
;; host: the module still links, and traps naming the import only when missing
;; calls it. wasi_snapshot_preview1.random_get is provided by a host that offers
;; WASI (the berm binary does), and links to a trap like env.missing on a host
;; that does not.
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "env" "missing" (func $missing (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))

  ;; random_get writes 16 bytes at $RANDOM; "errno <n>" is built at $ERRNO.
  (memory (export "memory") 1)
  (global $RANDOM i32 (i32.const 0x400))
  (global $ERRNO i32 (i32.const 0x500))

  ;;        address  string                 length
  (data (i32.const 0x100) "linked")              ;;  6
  (data (i32.const 0x110) "random ok")           ;;  9
  (data (i32.const 0x120) "env.missing returned") ;; 20
  (data (i32.const 0x140) "before exit")          ;; 11
  (data (i32.const 0x500) "errno ")              ;;  6, at $ERRNO

  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result

  ;; ok: both imports are linked, and neither is called.
  (func (export "berm_tool_ok")
    (call $result (i32.const 0x100) (i32.const 6)))  ;; "linked"

  ;; missing: traps in env.missing, on every host that does not provide it.
  (func (export "berm_tool_missing")
    (drop (call $missing (i32.const 0)))
    (call $result (i32.const 0x120) (i32.const 20)))  ;; "env.missing returned"

  ;; exit0: sets "before exit", then WASI proc_exit(0): the program ended, and
  ;; its outcome is what it set.
  (func (export "berm_tool_exit0")
    (call $result (i32.const 0x140) (i32.const 11))
    (call $proc_exit (i32.const 0)))

  ;; exit3: proc_exit(3): a program that exits with a failing code trapped.
  (func (export "berm_tool_exit3")
    (call $result (i32.const 0x140) (i32.const 11))
    (call $proc_exit (i32.const 3)))

  ;; _start is never run (ABI.md): were it, every call would trap.
  (func (export "_start")
    unreachable)

  ;; random: "random ok" when random_get returns errno 0, else "errno <n>".
  (func (export "berm_tool_random")
    (local $errno i32) (local $n i32) (local $t i32) (local $p i32)
    (local.set $errno (call $random_get (global.get $RANDOM) (i32.const 16)))
    (if (i32.eqz (local.get $errno))
      (then
        (call $result (i32.const 0x110) (i32.const 9))  ;; "random ok"
        (return)))
    ;; write the errno in decimal after "errno ": count the digits, then write
    ;; them from the last one back
    (local.set $t (local.get $errno))
    (loop $count
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (br_if $count (local.get $t)))
    (local.set $p (i32.add (i32.add (global.get $ERRNO) (i32.const 6)) (local.get $n)))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 0x30) (i32.rem_u (local.get $errno) (i32.const 10))))
      (local.set $errno (i32.div_u (local.get $errno) (i32.const 10)))
      (br_if $digit (i32.gt_u (local.get $p) (i32.add (global.get $ERRNO) (i32.const 6)))))
    (call $result (global.get $ERRNO) (i32.add (i32.const 6) (local.get $n)))))
