;; init_open: a reactor whose _initialize opens f.txt in the directory
;; preopened at descriptor 3 and whose tool reads it through the descriptor
;; it got: the descriptor is state outside memory, which a snapshot does not
;; hold. Deployed in the runtime's tests (snapshot_test.go). Built from the
;; repository's root with
;;
;;   wat2wasm runtime/testdata/init_open.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/init_open.wasm /dev/stdin runtime/testdata/init_open.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $read (param i32 i32 i32 i32) (result i32)))

  (memory (export "memory") 1)
  (global $fd (mut i32) (i32.const -1))

  (data (i32.const 0x10) "f.txt")    ;; 5
  (data (i32.const 0x30) "read failed")    ;; 11

  ;; _initialize: path_open(3, 0, "f.txt", no oflags, rights fd_read) into
  ;; 0x20, kept in $fd.
  (func (export "_initialize")
    (if (i32.eqz (call $open (i32.const 3) (i32.const 0) (i32.const 0x10) (i32.const 5)
                             (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 0x20)))
      (then (global.set $fd (i32.load (i32.const 0x20))))))

  ;; read: what $fd reads (64 bytes at most), or "read failed".
  (func (export "berm_tool_read")
    (i32.store (i32.const 0x40) (i32.const 0x100))  ;; iovec: buffer
    (i32.store (i32.const 0x44) (i32.const 64))     ;; and its length
    (if (i32.eqz (call $read (global.get $fd) (i32.const 0x40) (i32.const 1) (i32.const 0x48)))
      (then (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x100) (i32.load (i32.const 0x48)))))  ;; berm.result
      (else (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x30) (i32.const 11)))))))
