;; table_big_min: a table whose minimum is 100 million entries (800 MiB; it
;; has no maximum), over the host's limit of 1048576 entries: the host refuses
;; it at deploy; manifest.Read accepts the image.
(module
  (memory (export "memory") 1)
  (table 100000000 funcref)
  (func (export "berm_tool_x")))
