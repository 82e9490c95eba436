;; berm_import_other: imports berm.log as a function. The one import module
;; berm offers is syscall (berm.log is a syscall number, not an import): refused.
(module
  (import "berm" "log" (func (param i32 i32) (result i64)))
  (memory (export "memory") 1)
  (func (export "berm_tool_x")))
