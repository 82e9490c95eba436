;; call_deepfd: path_open of a directory 8 levels of 250-byte names down
;; (2007 bytes of path), then of the same path under the descriptor it gave,
;; then again: wazero joins each path onto its descriptor's name, 4015 then
;; 6023 bytes, though each is well within PATH_MAX. The result is the three
;; errnos, a byte each: the third is ENAMETOOLONG (37), past the sandbox's
;; MaxPath. Deployed with a directory at 3 in call_attack_test.go. Built
;; from the repository's root with
;;
;;   wat2wasm runtime/testdata/call_deepfd.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/call_deepfd.wasm /dev/stdin runtime/testdata/call_deepfd.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)

  ;; $open_at opens the path at 0x1000 (2007 bytes) under fd as a directory,
  ;; stores its errno at out and returns the descriptor (or fd on failure).
  (func $open_at (param $fd i32) (param $out i32) (result i32)
    (local $errno i32)
    (local.set $errno
      (call $open (local.get $fd) (i32.const 0) (i32.const 0x1000) (i32.const 2007)
        (i32.const 2) (i64.const 0) (i64.const 0) (i32.const 0) (i32.const 0x100)))  ;; O_DIRECTORY
    (i32.store8 (local.get $out) (local.get $errno))
    (if (result i32) (local.get $errno)
      (then (local.get $fd))
      (else (i32.load (i32.const 0x100)))))

  (func (export "berm_tool_open")
    (local $i i32)
    ;; ("a" x 250 "/") x 8, less the last "/": 2007 bytes at 0x1000.
    (memory.fill (i32.const 0x1000) (i32.const 0x61) (i32.const 2008))
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (i32.const 8)))
      (i32.store8 (i32.add (i32.const 0x1000) (i32.add (i32.mul (local.get $i) (i32.const 251)) (i32.const 250))) (i32.const 0x2f))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $l)))
    (drop (call $open_at (call $open_at (call $open_at (i32.const 3) (i32.const 0x200)) (i32.const 0x201)) (i32.const 0x202)))
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x200) (i32.const 3)))))  ;; berm.result
