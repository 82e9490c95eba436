;; tool_name_long: the tool's name is 65 characters, one over the limit of 64.
;; The module exports the matching berm_tool_ function, so that the length is
;; the only fault: refused.
(module
  (memory (export "memory") 1)
  (func (export "berm_tool_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")))
