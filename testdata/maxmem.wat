;; maxmem: declares a memory maximum of 4 GiB, far over the host's limit. It
;; deploys all the same (ABI.md refuses only a minimum over the limit), and
;; its memory.grow past the limit returns -1.
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 1 65536)
  (data (i32.const 16) "refused")
  (data (i32.const 32) "grew")
  ;; grow: 4096 pages (256 MiB); "refused" when memory.grow returns -1.
  (func (export "berm_tool_grow")
    (if (i32.eq (memory.grow (i32.const 4096)) (i32.const -1))
      (then (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 16) (i32.const 7))))
      (else (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 32) (i32.const 4)))))))
