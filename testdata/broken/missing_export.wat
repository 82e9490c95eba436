;; missing_export: the manifest names tool x, but the module has no
;; berm_tool_x (only berm_tool_y, which no tool names): refused.
(module
  (memory (export "memory") 1)
  (func (export "berm_tool_y")))
