;; warm: a reactor whose calls start from the snapshot _initialize leaves, and
;; that tries every way for one call to see what another left. Deployed as
;; "warm" in the runtime's tests (snapshot_test.go). Built from the
;; repository's root with
;;
;;   wat2wasm runtime/testdata/warm.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/warm.wasm /dev/stdin runtime/testdata/warm.abi.json
;;
;; _initialize reads the clock and 8 random bytes into 0x200, sets both
;; mutable globals (one exported, one not), grows memory to 2 pages and marks
;; the second. Every tool then sees that state, whatever the calls before it
;; did.
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))

  (memory (export "memory") 1 4)

  ;; Set by _initialize to 7 and 9; every tool expects exactly that.
  (global $shown (export "shown") (mut i32) (i32.const 0))
  (global $hidden (mut i64) (i64.const 0))

  (type $answer (func (result i32)))
  (table 2 funcref)
  (elem (i32.const 0) $one $two)
  (func $one (result i32) (i32.const 1))
  (func $two (result i32) (i32.const 2))

  ;;        address  string      length
  (data (i32.const 0x100) "clean")    ;; 5
  (data (i32.const 0x110) "dirty")    ;; 5
  (data (i32.const 0x120) "data")     ;; 4: overwritten by a call, never seen by the next

  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result

  (func (export "_initialize")
    (drop (call $clock (i32.const 1) (i64.const 0) (i32.const 0x200)))  ;; monotonic
    (drop (call $random (i32.const 0x208) (i32.const 8)))
    (global.set $shown (i32.const 7))
    (global.set $hidden (i64.const 9))
    (drop (memory.grow (i32.const 1)))
    (i32.store (i32.const 0x10000) (i32.const 0x5a5a5a5a)))

  ;; init: the 16 bytes _initialize read from the host.
  (func (export "berm_tool_init")
    (call $result (i32.const 0x200) (i32.const 16)))

  ;; random: 8 random bytes read now.
  (func (export "berm_tool_random")
    (drop (call $random (i32.const 0x300) (i32.const 8)))
    (call $result (i32.const 0x300) (i32.const 8)))

  ;; leak: "clean" when the state is _initialize's (globals, memory, its
  ;; size, the data, the table, a cell no one wrote), "dirty" otherwise;
  ;; then it changes all of it.
  (func (export "berm_tool_leak")
    (local $ok i32)
    (local.set $ok
      (i32.and
        (i32.and
          (i32.and (i32.eq (global.get $shown) (i32.const 7))
                   (i64.eq (global.get $hidden) (i64.const 9)))
          (i32.and (i32.eq (memory.size) (i32.const 2))
                   (i32.eq (i32.load (i32.const 0x10000)) (i32.const 0x5a5a5a5a))))
        (i32.and
          (i32.and (i32.eq (i32.load (i32.const 0x120)) (i32.const 0x61746164))  ;; "data"
                   (i32.eqz (i32.load (i32.const 0x400))))
          (i32.and (i32.eq (call_indirect (type $answer) (i32.const 0)) (i32.const 1))
                   (i32.eq (call_indirect (type $answer) (i32.const 1)) (i32.const 2))))))
    (global.set $shown (i32.add (global.get $shown) (i32.const 1)))
    (global.set $hidden (i64.add (global.get $hidden) (i64.const 1)))
    (i32.store (i32.const 0x120) (i32.const 0))
    (i32.store (i32.const 0x400) (i32.const 1))
    (i32.store (i32.const 0x10000) (i32.const 0))
    (if (i32.ne (memory.grow (i32.const 1)) (i32.const -1))
      (then (i32.store (i32.const 0x20000) (i32.const 1))))
    (if (local.get $ok)
      (then (call $result (i32.const 0x100) (i32.const 5)))
      (else (call $result (i32.const 0x110) (i32.const 5))))))
