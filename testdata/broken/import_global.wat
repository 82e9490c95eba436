;; import_global: imports env.g, a global i32. The ABI links only functions
;; from modules other than berm, so the host refuses the deployment;
;; manifest.Read accepts the image.
(module
  (import "env" "g" (global i32))
  (memory (export "memory") 1)
  (func (export "berm_tool_x")))
