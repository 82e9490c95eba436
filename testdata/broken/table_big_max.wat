;; table_big_max: a table of one entry whose maximum, 4294967295 entries, is
;; over the host's limit of 1048576, so that table.grow could take it to
;; 32 GiB: the host refuses it at deploy; manifest.Read accepts the image.
(module
  (memory (export "memory") 1)
  (table $t 1 4294967295 funcref)
  (func (export "berm_tool_x")
    (drop (table.grow $t (ref.null func) (i32.const 250000000)))))
