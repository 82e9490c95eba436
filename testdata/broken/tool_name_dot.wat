;; tool_name_dot: the tool is named a.b; a tool name is [A-Za-z0-9_-] only. The
;; module exports berm_tool_a.b (export names may hold a dot), so that the name
;; is the only fault: refused.
(module
  (memory (export "memory") 1)
  (func (export "berm_tool_a.b")))
