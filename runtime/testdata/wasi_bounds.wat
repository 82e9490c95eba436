;; wasi_bounds: WASI calls at the bounds berm holds them to, and one past:
;; iovecs (IOV_MAX, 1024), a path's length (PATH_MAX, 4096), poll_oneoff's
;; subscriptions (4096), the descriptor fd_renumber renumbers to (65535).
;; NAME_at asks for the bound and answers the errno, 4 bytes little-endian;
;; NAME_past asks for one more, which traps. Deployed as "bounds" with a
;; directory at 3 holding a file "f", in wasi_bounds_test.go. Built from
;; the repository's root with
;;
;;   wat2wasm runtime/testdata/wasi_bounds.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/wasi_bounds.wasm /dev/stdin runtime/testdata/wasi_bounds.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_filestat_get"
    (func $stat (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff"
    (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_renumber"
    (func $renumber (param i32 i32) (result i32)))

  ;; Page 0 holds the strings, the results and 1025 empty iovecs (at
  ;; 0x1000, all zeros); pages 1 to 3 the subscriptions (all zeros: a clock
  ;; of no timeout each) and the path; pages 4 and 5 the events.
  (memory (export "memory") 6)

  ;;        address  string      length
  (data (i32.const 0x110) "f")        ;; 1

  ;; $answer sets the result to errno, 4 bytes little-endian.
  (func $answer (param $errno i32)
    (i32.store (i32.const 0x600) (local.get $errno))
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x600) (i32.const 4)))) ;; berm.result

  (func $iovecs (param $n i32)
    (call $answer (call $write (i32.const 1) (i32.const 0x1000) (local.get $n) (i32.const 0x900))))
  (func (export "berm_tool_iovecs_at") (call $iovecs (i32.const 1024)))
  (func (export "berm_tool_iovecs_past") (call $iovecs (i32.const 1025)))

  ;; $path stats a name of n bytes of "a" in the directory at 3.
  (func $path (param $n i32)
    (memory.fill (i32.const 0x10000) (i32.const 0x61) (local.get $n))
    (call $answer (call $stat (i32.const 3) (i32.const 0) (i32.const 0x10000) (local.get $n) (i32.const 0x800))))
  (func (export "berm_tool_path_at") (call $path (i32.const 4096)))
  (func (export "berm_tool_path_past") (call $path (i32.const 4097)))

  (func $subscriptions (param $n i32)
    (call $answer (call $poll (i32.const 0x10000) (i32.const 0x40000) (local.get $n) (i32.const 0x900))))
  (func (export "berm_tool_poll_at") (call $subscriptions (i32.const 4096)))
  (func (export "berm_tool_poll_past") (call $subscriptions (i32.const 4097)))

  ;; $renumber opens f at 3 and renumbers its descriptor to.
  (func $renumber_to (param $to i32)
    (drop (call $open (i32.const 3) (i32.const 0) (i32.const 0x110) (i32.const 1)
      (i32.const 0) (i64.const 2) (i64.const 2) (i32.const 0) (i32.const 0x500)))
    (call $answer (call $renumber (i32.load (i32.const 0x500)) (local.get $to))))
  (func (export "berm_tool_renumber_at") (call $renumber_to (i32.const 65535)))
  (func (export "berm_tool_renumber_past") (call $renumber_to (i32.const 65536))))
