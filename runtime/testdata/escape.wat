;; escape: work that no loop header counts, each tool its own kind, looping
;; until the deadline; the runtime's deadline tests want each stopped at it.
;; Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/escape.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/escape.wasm /dev/stdin runtime/testdata/escape.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  ;; 16 MiB: the fills and copies take it all.
  (memory (export "memory") 256)
  (table 524288 funcref)

  ;; berm.call's input: escape.busy with {}, framed.
  (data (i32.const 0x10) "\06\00\00\00escape\04\00\00\00busy\02\00\00\00{}")
  ;; poll_oneoff's one subscription at 0x100: userdata 0, tag 0 (a clock),
  ;; the monotonic clock (1), a relative timeout of 10 s, precision 0.
  (data (i32.const 0x110) "\01\00\00\00")
  (data (i32.const 0x118) "\00\e4\0b\54\02\00\00\00")

  ;; fill fills all 16 MiB, again and again.
  (func (export "berm_tool_fill")
    (loop $again
      (memory.fill (i32.const 0) (i32.const 7) (i32.const 0x1000000))
      (br $again)))

  ;; copy copies 8 MiB over the other 8, again and again.
  (func (export "berm_tool_copy")
    (loop $again
      (memory.copy (i32.const 0x800000) (i32.const 0) (i32.const 0x800000))
      (br $again)))

  ;; tablefill fills the table's 512 Ki entries, again and again.
  (func (export "berm_tool_tablefill")
    (loop $again
      (table.fill 0 (i32.const 0) (ref.null func) (i32.const 524288))
      (br $again)))

  ;; slow calls the host syscall test.slow, again and again.
  (func (export "berm_tool_slow")
    (loop $again
      (drop (call $sys (i64.const 0x28e419b656a4b83c) (i32.const 0) (i32.const 0)))
      (br $again)))

  ;; callloop calls escape.busy, again and again: each callee runs fewer
  ;; turns than a tick's period, and starts its own count.
  (func (export "berm_tool_callloop")
    (loop $again
      (drop (call $sys (i64.const 0x6410f207e9992ec1) (i32.const 0x10) (i32.const 24)))
      (br $again)))

  ;; busy fills 4 KiB less a byte, 8,000 times: a few ms of work in fewer
  ;; turns than a tick's period (two each).
  (func (export "berm_tool_busy")
    (local $i i32)
    (loop $again
      (memory.fill (i32.const 0x1000) (i32.const 1) (i32.const 4095))
      (br_if $again (i32.ne (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 8000)))))

  ;; random asks WASI for 1 MiB of random bytes, again and again.
  (func (export "berm_tool_random")
    (loop $again
      (drop (call $random_get (i32.const 0x100000) (i32.const 0x100000)))
      (br $again)))

  ;; randoms asks WASI for 8 random bytes 10,000 times, and ends: a call of
  ;; many cheap WASI calls, for BenchmarkWASICalls.
  (func (export "berm_tool_randoms")
    (local $i i32)
    (loop $again
      (drop (call $random_get (i32.const 0x100000) (i32.const 8)))
      (br_if $again (i32.ne (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 10000)))))

  ;; write writes 8 MiB of newlines to stdout, again and again: one iovec
  ;; at 0x500.
  (func (export "berm_tool_write")
    (memory.fill (i32.const 0x100000) (i32.const 10) (i32.const 0x800000))
    (i32.store (i32.const 0x500) (i32.const 0x100000))
    (i32.store (i32.const 0x504) (i32.const 0x800000))
    (loop $again
      (drop (call $fd_write (i32.const 1) (i32.const 0x500) (i32.const 1) (i32.const 0x508)))
      (br $again)))

  ;; sleep asks WASI for a sleep of 10 s, then returns "slept".
  (func (export "berm_tool_sleep")
    (drop (call $poll_oneoff (i32.const 0x100) (i32.const 0x200) (i32.const 1) (i32.const 0x300)))
    (i32.store (i32.const 0x400) (i32.const 0x70656c73)) ;; "slep"
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x400) (i32.const 4)))))
