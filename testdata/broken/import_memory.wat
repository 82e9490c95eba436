;; import_memory: imports its memory from env.memory (and exports it). The
;; ABI allows it, but this host provides no memory to import, so it refuses the
;; deployment; manifest.Read accepts the image.
(module
  (import "env" "memory" (memory 1))
  (export "memory" (memory 0))
  (func (export "berm_tool_x")))
