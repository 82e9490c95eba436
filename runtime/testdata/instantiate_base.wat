;; instantiate_base: the smallest program: one tool says it ran, another traps
;; before it does anything (so a call that gets that far shows it). The
;; runtime's tests (instantiate_test.go) splice into it what else an instance
;; is made of (globals, tables, element and data segments, functions, imports),
;; up to millions of each, to hold each to its bound at deploy and count it at
;; every call. Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/instantiate_base.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/instantiate_base.wasm /dev/stdin runtime/testdata/instantiate_base.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 1)

  ;; No data segment of its own, so that a test's may take the section's
  ;; place: "ran" is stored by the tool.
  (func (export "berm_tool_ran")
    (i32.store (i32.const 0x100) (i32.const 0x6e6172)) ;; "ran", little-endian
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x100) (i32.const 3)))) ;; berm.result
  (func (export "berm_tool_trap") unreachable)
)
