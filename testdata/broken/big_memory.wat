;; big_memory: declares a minimum of 3000 pages (187.5 MiB), over the host's
;; default limit of 2048 pages (128 MiB): the host refuses it at deploy;
;; manifest.Read accepts the image.
(module
  (memory (export "memory") 3000)
  (func (export "berm_tool_x")))
