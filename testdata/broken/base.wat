;; base: a sound module with one tool, x. Every broken image whose fault lies in
;; its manifest alone (or in the section that carries it) is this module with
;; that manifest, so that the fault is the only one. It is never an image itself.
(module
  (memory (export "memory") 1)
  (func (export "berm_tool_x")))
