;; export_type: berm_tool_x takes an i32; a tool export must be [] -> []: refused.
(module
  (memory (export "memory") 1)
  (func (export "berm_tool_x") (param i32)))
