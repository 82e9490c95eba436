;; berm_syscall_type: imports berm.syscall as (i32) -> i32; it must be
;; (i64 i32 i32) -> i64: refused.
(module
  (import "berm" "syscall" (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "berm_tool_x")))
