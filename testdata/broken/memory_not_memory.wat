;; memory_not_memory: the export named memory is a function, and the memory
;; itself is not exported: refused as a module without memory.
(module
  (memory 1)
  (func (export "memory"))
  (func (export "berm_tool_x")))
