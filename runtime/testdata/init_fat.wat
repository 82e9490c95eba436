;; init_fat: a reactor whose _initialize grows memory by 320 pages and
;; fills 20 MiB of them, the image a snapshot would hold. Deployed in the
;; runtime's tests (snapshot_test.go). Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/init_fat.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/init_fat.wasm /dev/stdin runtime/testdata/init_fat.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))

  (memory (export "memory") 1)

  (data (i32.const 0x100) "filled")    ;; 6
  (data (i32.const 0x110) "empty")     ;; 5

  (func (export "_initialize")
    (drop (memory.grow (i32.const 320)))
    (memory.fill (i32.const 0x10000) (i32.const 1) (i32.const 0x1400000)))

  ;; t: "filled" when the first and last bytes _initialize filled are 1.
  (func (export "berm_tool_t")
    (if (i32.and (i32.eq (i32.load8_u (i32.const 0x10000)) (i32.const 1))
                 (i32.eq (i32.load8_u (i32.const 0x140ffff)) (i32.const 1)))
      (then (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x100) (i32.const 6))))    ;; berm.result
      (else (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x110) (i32.const 5)))))))
