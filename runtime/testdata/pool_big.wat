;; pool_big: pool.wat with memory of 5 pages and an image of 4 (a segment
;; near its end), large enough to be mapped into each instance rather than
;; copied, which a reset restores page by page. Deployed as "pool-big" in the
;; runtime's tests (pool_test.go). Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/pool_big.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/pool_big.wasm /dev/stdin runtime/testdata/pool_big.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "fd_fdstat_get" (func $fdstat (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_close" (func $close (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_seek" (func $seek (param i32 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))

  (memory (export "memory") 5 8)
  (data (i32.const 0x3fff0) "big")     ;; 3: the end of the image, 4 pages

  (global $shown (export "shown") (mut i32) (i32.const 7))
  (global $hidden (mut i64) (i64.const 9))

  (type $answer (func (result i32)))
  (table 2 funcref)
  (elem (i32.const 0) $one $two)
  (func $one (result i32) (i32.const 1))
  (func $two (result i32) (i32.const 2))

  ;;        address  string      length
  (data (i32.const 0x100) "clean")    ;; 5
  (data (i32.const 0x110) "dirty")    ;; 5
  (data (i32.const 0x120) "data")     ;; 4: overwritten by calls, never seen by the next
  (data (i32.const 0x130) "f")        ;; 1: the file fds opens
  (data (i32.const 0x140) "printed\n") ;; 8
  (data (i32.const 0x150) "done")     ;; 4

  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result

  ;; $scribble changes everything a call can change but memory's size.
  (func $scribble
    (global.set $shown (i32.add (global.get $shown) (i32.const 1)))
    (global.set $hidden (i64.add (global.get $hidden) (i64.const 1)))
    (i32.store (i32.const 0x120) (i32.const 0))
    (i32.store (i32.const 0x400) (i32.const 1))
    (i32.store (i32.const 0x4fffc) (i32.const 1))
    (i32.store (i32.const 0x3fff0) (i32.const 0))
    (i32.store (i32.const 0x20000) (i32.const 1)))

  ;; leak: "clean" when the instance is as new (globals, memory, its size,
  ;; the data, the table, cells no one wrote, stdout open and no descriptor
  ;; past the preopens), "dirty" otherwise; then it changes all it can
  ;; without growing memory, so that the instance is reused.
  (func (export "berm_tool_leak")
    (local $ok i32)
    (local.set $ok
      (i32.and
        (i32.and
          (i32.and (i32.eq (global.get $shown) (i32.const 7))
                   (i64.eq (global.get $hidden) (i64.const 9)))
          (i32.and (i32.eq (memory.size) (i32.const 5))
                   (i32.and (i32.eqz (i32.load (i32.const 0x4fffc)))
                        (i32.eq (i32.load (i32.const 0x3fff0)) (i32.const 0x676962))))) ;; "big"
        (i32.and
          (i32.and (i32.eq (i32.load (i32.const 0x120)) (i32.const 0x61746164))  ;; "data"
                   (i32.eqz (i32.load (i32.const 0x400))))
          (i32.and (i32.eq (call_indirect (type $answer) (i32.const 0)) (i32.const 1))
                   (i32.eq (call_indirect (type $answer) (i32.const 1)) (i32.const 2))))))
    ;; stdout (1) open; 4, the first descriptor past a preopen at 3, not.
    (local.set $ok (i32.and (local.get $ok)
      (i32.and (i32.eqz (call $fdstat (i32.const 1) (i32.const 0x600)))
               (i32.eq (call $fdstat (i32.const 4) (i32.const 0x600)) (i32.const 8)))))  ;; EBADF
    (call $scribble)
    (if (local.get $ok)
      (then (call $result (i32.const 0x100) (i32.const 5)))
      (else (call $result (i32.const 0x110) (i32.const 5)))))

  ;; grow: scribbles and grows memory by a page, marking it.
  (func (export "berm_tool_grow")
    (call $scribble)
    (if (i32.ne (memory.grow (i32.const 1)) (i32.const -1))
      (then (i32.store (i32.const 0x50000) (i32.const 1))))
    (call $result (i32.const 0x150) (i32.const 4)))

  ;; trap: scribbles, then traps.
  (func (export "berm_tool_trap")
    (call $scribble)
    unreachable)

  ;; spin: scribbles, then loops until its deadline.
  (func (export "berm_tool_spin")
    (call $scribble)
    (loop $forever (br $forever)))

  ;; fds: scribbles, opens (creating) f in the directory preopened at 3
  ;; when there is one and seeks in it, leaving it open (at 4), then closes
  ;; stdout.
  (func (export "berm_tool_fds")
    (call $scribble)
    (if (i32.eqz (call $open (i32.const 3) (i32.const 0) (i32.const 0x130) (i32.const 1)
                   (i32.const 1) (i64.const 0x1fffffff) (i64.const 0x1fffffff) (i32.const 0) (i32.const 0x500)))
      (then (drop (call $seek (i32.load (i32.const 0x500)) (i64.const 5) (i32.const 0) (i32.const 0x508)))))
    (drop (call $close (i32.const 1)))
    (call $result (i32.const 0x150) (i32.const 4)))

  ;; print: writes "printed\n" to stdout.
  (func (export "berm_tool_print")
    (i32.store (i32.const 0x700) (i32.const 0x140))
    (i32.store (i32.const 0x704) (i32.const 8))
    (drop (call $write (i32.const 1) (i32.const 0x700) (i32.const 1) (i32.const 0x708)))
    (call $result (i32.const 0x150) (i32.const 4))))
