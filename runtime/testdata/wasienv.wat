;; wasienv: what a WASI program sees of its arguments and environment, and
;; what it writes to stdout and stderr. Deployed as "wasienv" in the
;; runtime's tests of grants. Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/wasienv.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/wasienv.wasm /dev/stdin runtime/testdata/wasienv.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_get" (func $environ_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  ;; 0x000-0x0ff: counts and iovecs; 0x100-0x1ff: strings; 0x1000: the
  ;; pointers WASI writes; 0x2000-0xffff: the strings it writes; page 1: the
  ;; lines of flood.
  (memory (export "memory") 2)

  ;;        address  string                          length
  (data (i32.const 0x100) "out one\nout two\n")        ;; 16
  (data (i32.const 0x120) "err one\nerr without end")  ;; 23
  (data (i32.const 0x140) "done")                      ;; 4

  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result

  ;; $write writes the len bytes at ptr to fd, in one fd_write.
  (func $write (param $fd i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0x20) (local.get $ptr))
    (i32.store (i32.const 0x24) (local.get $len))
    (drop (call $fd_write (local.get $fd) (i32.const 0x20) (i32.const 1) (i32.const 0x28))))

  ;; args: the arguments, each ended by a NUL byte, as WASI gives them.
  (func (export "berm_tool_args")
    (drop (call $args_sizes_get (i32.const 0x0) (i32.const 0x4)))
    (drop (call $args_get (i32.const 0x1000) (i32.const 0x2000)))
    (call $result (i32.const 0x2000) (i32.load (i32.const 0x4))))

  ;; environ: the environment, NAME=VALUE each ended by a NUL byte.
  (func (export "berm_tool_environ")
    (drop (call $environ_sizes_get (i32.const 0x0) (i32.const 0x4)))
    (drop (call $environ_get (i32.const 0x1000) (i32.const 0x2000)))
    (call $result (i32.const 0x2000) (i32.load (i32.const 0x4))))

  ;; print: two lines to stdout, a line and a line without its newline to
  ;; stderr: "done".
  (func (export "berm_tool_print")
    (call $write (i32.const 1) (i32.const 0x100) (i32.const 16))
    (call $write (i32.const 2) (i32.const 0x120) (i32.const 23))
    (call $result (i32.const 0x140) (i32.const 4)))

  ;; flood: 5000 lines "x" to stdout in one write: "done".
  (func (export "berm_tool_flood")
    (local $i i32)
    (block $done
      (loop $more
        (br_if $done (i32.eq (local.get $i) (i32.const 5000)))
        (i32.store16 (i32.add (i32.const 0x10000) (i32.shl (local.get $i) (i32.const 1))) (i32.const 0x0a78)) ;; "x\n"
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $more)))
    (call $write (i32.const 1) (i32.const 0x10000) (i32.const 10000))
    (call $result (i32.const 0x140) (i32.const 4))))
