;; warm_table: a reactor that writes its table (table.set), which no snapshot
;; of memory and globals can carry: its _initialize runs at each call, and
;; its memory still starts from the image of its data. Deployed as
;; "warm-table" in the runtime's tests (snapshot_test.go). Built from the
;; repository's root with
;;
;;   wat2wasm runtime/testdata/warm_table.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/warm_table.wasm /dev/stdin runtime/testdata/warm_table.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 1)

  (type $answer (func (result i32)))
  (table 1 funcref)
  (elem (i32.const 0) $one)
  (elem declare func $two)
  (func $one (result i32) (i32.const 1))
  (func $two (result i32) (i32.const 2))

  ;; Counted by _initialize: 1 in every instance.
  (global $inits (mut i32) (i32.const 0))

  ;;        address  string      length
  (data (i32.const 0x100) "clean")    ;; 5
  (data (i32.const 0x110) "dirty")    ;; 5
  (data (i32.const 0x120) "data")     ;; 4: overwritten by a call, never seen by the next

  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result

  (func (export "_initialize")
    (global.set $inits (i32.add (global.get $inits) (i32.const 1))))

  ;; leak: "clean" when the table holds $one, _initialize ran once and the
  ;; data is there; then it points the table at $two.
  (func (export "berm_tool_leak")
    (local $ok i32)
    (local.set $ok
      (i32.and
        (i32.and (i32.eq (call_indirect (type $answer) (i32.const 0)) (i32.const 1))
                 (i32.eq (global.get $inits) (i32.const 1)))
        (i32.eq (i32.load (i32.const 0x120)) (i32.const 0x61746164))))  ;; "data"
    (table.set 0 (i32.const 0) (ref.func $two))
    (i32.store (i32.const 0x120) (i32.const 0))
    (if (local.get $ok)
      (then (call $result (i32.const 0x100) (i32.const 5)))
      (else (call $result (i32.const 0x110) (i32.const 5))))))
