;; A module whose start function never ends, so that no tool of it is ever
;; reached: the host must stop it at the deadline all the same. Built by
;; testdata/fixtures.mk with startloop.abi.json.
(module
  (memory (export "memory") 1)
  (func $forever (loop $l (br $l)))
  (start $forever)
  (func (export "berm_tool_never")))
