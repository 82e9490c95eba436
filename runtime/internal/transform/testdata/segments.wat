;; segments: active and passive data segments that memory.init names by
;; index, which needs a data count section: transform.Snapshot keeps each
;; active one, emptied, so that the indices stay. Built from the repository's
;; root with
;;
;;   wat2wasm runtime/internal/transform/testdata/segments.wat --output=- | go run ./testdata/mkimage -o runtime/internal/transform/testdata/segments.wasm /dev/stdin runtime/internal/transform/testdata/segments.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (global $g (export "berm.global.0") (mut i32) (i32.const 5))
  (data (i32.const 0x100) "active")  ;; 6
  (data "passive")                   ;; 7
  (data (i32.const 0x200) "later")   ;; 5

  ;; t: memory.init of the passive segment (index 1) at 0x300, then the
  ;; result of the 7 bytes there.
  (func (export "berm_tool_t")
    (memory.init 1 (i32.const 0x300) (i32.const 0) (i32.const 7))
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x300) (i32.const 7)))))  ;; berm.result
