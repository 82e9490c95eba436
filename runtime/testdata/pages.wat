;; pages: touches memory page by page, for the tests that a reset leaves an
;; instance's pages as a new instance's, whatever a call read or wrote
;; (pool_memory_test.go). Its image is 4 MiB, mapped into each instance;
;; pages_small.wat is the same with an image of 64 KiB, copied. Memory is
;; 64 MiB. Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/pages.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/pages.wasm /dev/stdin runtime/testdata/pages.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 1024 1024)
  (data (i32.const 0x3ffff0) "end")    ;; the end of the image: 4 MiB

  (data (i32.const 0x100) "done")
  (global $sum (mut i32) (i32.const 0))

  (func $done
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x100) (i32.const 4)))) ;; berm.result

  ;; $read reads a byte of each page in [from, to).
  (func $read (param $from i32) (param $to i32)
    (block $end (loop $next
      (br_if $end (i32.ge_u (local.get $from) (local.get $to)))
      (global.set $sum (i32.add (global.get $sum) (i32.load8_u (local.get $from))))
      (local.set $from (i32.add (local.get $from) (i32.const 4096)))
      (br $next))))

  ;; $write writes a byte of every other page in [from, to).
  (func $write (param $from i32) (param $to i32)
    (block $end (loop $next
      (br_if $end (i32.ge_u (local.get $from) (local.get $to)))
      (i32.store8 (local.get $from) (i32.const 1))
      (local.set $from (i32.add (local.get $from) (i32.const 8192)))
      (br $next))))

  ;; read: reads pages in the image and past it.
  (func (export "berm_tool_read")
    (call $read (i32.const 0x10000) (i32.const 0x30000))
    (call $read (i32.const 0x200000) (i32.const 0x280000))
    (call $read (i32.const 0x500000) (i32.const 0x580000))
    (call $done))

  ;; write: writes pages in the image and past it, and reads others.
  (func (export "berm_tool_write")
    (call $write (i32.const 0x10000) (i32.const 0x30000))
    (call $write (i32.const 0x200000) (i32.const 0x280000))
    (call $write (i32.const 0x500000) (i32.const 0x580000))
    (call $read (i32.const 0x600000) (i32.const 0x640000))
    (call $done))

  ;; fill: writes all 64 MiB.
  (func (export "berm_tool_fill")
    (memory.fill (i32.const 0) (i32.const 0x5a) (i32.const 0x4000000))
    (i32.store (i32.const 0x100) (i32.const 0x656e6f64)) ;; "done"
    (call $done))

  ;; none: touches nothing.
  (func (export "berm_tool_none")
    (call $done)))
