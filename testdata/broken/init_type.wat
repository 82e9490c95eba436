;; init_type: _initialize takes an i32; it must be [] -> []: refused.
(module
  (memory (export "memory") 1)
  (func (export "_initialize") (param i32))
  (func (export "berm_tool_x")))
