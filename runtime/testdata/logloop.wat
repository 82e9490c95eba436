;; logloop: berm.log in a loop, to show the bounds on what one call logs.
;; Deployed as "logloop" in the runtime's tests. Built from the repository's
;; root with
;;
;;   wat2wasm runtime/testdata/logloop.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/logloop.wasm /dev/stdin runtime/testdata/logloop.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  ;; Page 0 holds the strings; page 1 is the 64 KiB line of big.
  (memory (export "memory") 2)

  ;;        address  string          length
  (data (i32.const 0x100) "logloop")      ;; 7
  (data (i32.const 0x110) "spam")         ;; 4
  (data (i32.const 0x120) "{}")           ;; 2
  (data (i32.const 0x130) "done")         ;; 4

  (func $log (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x718e2c830194e059) (local.get $ptr) (local.get $len)))) ;; berm.log
  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result

  ;; $times logs the len bytes at ptr n times.
  (func $times (param $n i32) (param $ptr i32) (param $len i32)
    (block $done
      (loop $more
        (br_if $done (i32.eqz (local.get $n)))
        (call $log (local.get $ptr) (local.get $len))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $more))))

  ;; spam: logs "spam" 5000 times.
  (func (export "berm_tool_spam")
    (call $times (i32.const 5000) (i32.const 0x110) (i32.const 4))
    (call $result (i32.const 0x130) (i32.const 4)))

  ;; big: logs 100 lines of 64 KiB of "x".
  (func (export "berm_tool_big")
    (memory.fill (i32.const 0x10000) (i32.const 0x78) (i32.const 0x10000))
    (call $times (i32.const 100) (i32.const 0x10000) (i32.const 0x10000))
    (call $result (i32.const 0x130) (i32.const 4)))

  ;; spam_call: logs "spam" 600 times, then calls logloop.spam.
  (func (export "berm_tool_spam_call")
    (call $times (i32.const 600) (i32.const 0x110) (i32.const 4))
    ;; the frame at 0x400: "logloop", "spam", "{}"
    (i32.store (i32.const 0x400) (i32.const 7))
    (memory.copy (i32.const 0x404) (i32.const 0x100) (i32.const 7))
    (i32.store (i32.const 0x40b) (i32.const 4))
    (memory.copy (i32.const 0x40f) (i32.const 0x110) (i32.const 4))
    (i32.store (i32.const 0x413) (i32.const 2))
    (memory.copy (i32.const 0x417) (i32.const 0x120) (i32.const 2))
    (drop (call $sys (i64.const 0x6410f207e9992ec1) (i32.const 0x400) (i32.const 0x19))) ;; berm.call
    (call $result (i32.const 0x130) (i32.const 4))))
