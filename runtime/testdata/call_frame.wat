;; call_frame: berm.call frames whose names are no names: a program name
;; of 64 MiB, a tool name of 64 MiB, and a short program name with a
;; control character in it. Each tool returns the refusal it was staged,
;; or fails when that is over 1024 bytes: a refusal quotes at most a
;; prefix of a name (call.go), and the host copies no more of one than
;; that. Deployed in call_attack_test.go. Built from the repository's root
;; with
;;
;;   wat2wasm runtime/testdata/call_frame.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/call_frame.wasm /dev/stdin runtime/testdata/call_frame.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 1)

  (data (i32.const 0x100) "refusal over 1024 bytes")  ;; 23
  (data (i32.const 0x120) "not refused")              ;; 11
  ;; [u32 8]"Bad\nname"[u32 1]"t"[u32 2]"{}": 23 bytes
  (data (i32.const 0x140) "\08\00\00\00Bad\0aname\01\00\00\00t\02\00\00\00{}")

  ;; $big grows memory by 64 MiB and a page, and fills it with 'a' from 0x10000 + at:
  ;; the name a frame's field holds.
  (func $big (param $at i32)
    (drop (memory.grow (i32.const 1025)))
    (memory.fill (i32.add (i32.const 0x10000) (local.get $at)) (i32.const 0x61) (i32.const 0x4000000)))

  ;; $report returns the refusal staged by the berm.call that returned rv.
  (func $report (param $rv i64)
    (local $n i32)
    (if (i64.eqz (i64.and (local.get $rv) (i64.const 0x8000000000000000)))
      (then
        (drop (call $sys (i64.const 0x71ea7deedc66e725) (i32.const 0x120) (i32.const 11)))  ;; berm.fail
        (return)))
    (local.set $n (i32.wrap_i64 (i64.and (local.get $rv) (i64.const 0x3fffffffffffffff))))
    (if (i32.gt_u (local.get $n) (i32.const 1024))
      (then
        (drop (call $sys (i64.const 0x71ea7deedc66e725) (i32.const 0x100) (i32.const 23)))  ;; berm.fail
        (return)))
    (drop (call $sys (i64.const 0x6c92a7d946a830be) (i32.const 0x400) (local.get $n)))  ;; berm.result.read
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x400) (local.get $n))))  ;; berm.result

  ;; program: [u32 64 MiB]"aaa…"[u32 1]"t"[u32 2]"{}" at 0x10000.
  (func (export "berm_tool_program")
    (local $end i32)
    (call $big (i32.const 4))
    (i32.store (i32.const 0x10000) (i32.const 0x4000000))
    (local.set $end (i32.const 0x4010004))
    (i32.store (local.get $end) (i32.const 1))
    (i32.store8 (i32.add (local.get $end) (i32.const 4)) (i32.const 0x74))
    (i32.store (i32.add (local.get $end) (i32.const 5)) (i32.const 2))
    (i32.store16 (i32.add (local.get $end) (i32.const 9)) (i32.const 0x7d7b))
    (call $report (call $sys (i64.const 0x6410f207e9992ec1) (i32.const 0x10000) (i32.const 0x400000f))))  ;; berm.call

  ;; tool: [u32 4]"nest"[u32 64 MiB]"aaa…"[u32 2]"{}" at 0x10000.
  (func (export "berm_tool_tool")
    (local $end i32)
    (call $big (i32.const 12))
    (i32.store (i32.const 0x10000) (i32.const 4))
    (i32.store (i32.const 0x10004) (i32.const 0x7473656e))  ;; "nest"
    (i32.store (i32.const 0x10008) (i32.const 0x4000000))
    (local.set $end (i32.const 0x401000c))
    (i32.store (local.get $end) (i32.const 2))
    (i32.store16 (i32.add (local.get $end) (i32.const 4)) (i32.const 0x7d7b))
    (call $report (call $sys (i64.const 0x6410f207e9992ec1) (i32.const 0x10000) (i32.const 0x4000012))))  ;; berm.call

  ;; short: a program name of 8 bytes with a newline in it.
  (func (export "berm_tool_short")
    (call $report (call $sys (i64.const 0x6410f207e9992ec1) (i32.const 0x140) (i32.const 23)))))  ;; berm.call
