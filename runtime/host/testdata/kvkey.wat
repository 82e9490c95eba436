;; kvkey: berm.get and berm.delete of a key that is the call's arguments,
;; byte for byte, whatever their length: a key over store.MaxKey can be in
;; no store, and is answered without asking one (host.go). Deployed as
;; "kvkey" in host_test.go. Built from the repository's root with
;;
;;   wat2wasm runtime/host/testdata/kvkey.wat --output=- | go run ./testdata/mkimage -o runtime/host/testdata/kvkey.wasm /dev/stdin runtime/host/testdata/kvkey.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 17)  ;; the arguments, up to 1 MiB, from 0x10000

  (data (i32.const 0x100) "absent")   ;; 6
  (data (i32.const 0x110) "found")    ;; 5
  (data (i32.const 0x120) "deleted")  ;; 7

  ;; $key reads the arguments to 0x10000 and returns their length.
  (func $key (result i32)
    (i32.wrap_i64 (call $sys (i64.const 0x4d9b428e492faf86) (i32.const 0x10000) (i32.const 0x100000))))  ;; berm.args.read

  (func (export "berm_tool_get")
    (if (i64.eqz (i64.and (call $sys (i64.const 0xbda7ac832c28873f) (i32.const 0x10000) (call $key))  ;; berm.get
                          (i64.const 0x8000000000000000)))
      (then (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x110) (i32.const 5))))   ;; berm.result
      (else (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x100) (i32.const 6))))))

  (func (export "berm_tool_delete")
    (drop (call $sys (i64.const 0x84a8776bcc70bc72) (i32.const 0x10000) (call $key)))  ;; berm.delete
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x120) (i32.const 7)))))
