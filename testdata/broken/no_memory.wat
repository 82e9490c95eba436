;; no_memory: a module with no memory at all, so no memory export: refused.
(module
  (func (export "berm_tool_x")))
