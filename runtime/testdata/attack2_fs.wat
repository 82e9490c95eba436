;; attack2_fs: a granted directory's preopen, opened lazily by wazero at its
;; first use and then held by the instance, and its cursor of fd_readdir:
;; state outside memory that WASI functions which fail leave behind, and
;; which the pool does not count as a change.
;; Deployed as "fsleak" with a directory at 3 holding a file "f", in
;; isolation_attack_test.go. Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/attack2_fs.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/attack2_fs.wasm /dev/stdin runtime/testdata/attack2_fs.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_readdir"
    (func $readdir (param i32 i32 i32 i64 i32) (result i32)))

  (memory (export "memory") 1)

  ;;        address  string      length
  (data (i32.const 0x100) "missing")  ;; 7
  (data (i32.const 0x110) "f")        ;; 1
  ;; The frame of berm.call fsleak.touch {}: three fields.
  (data (i32.const 0x200) "\06\00\00\00fsleak\05\00\00\00touch\02\00\00\00{}") ;; 25

  (func $open_at3 (param $name i32) (param $len i32) (result i32)
    (call $open (i32.const 3) (i32.const 0) (local.get $name) (local.get $len)
      (i32.const 0) (i64.const 2) (i64.const 2) (i32.const 0) (i32.const 0x500))) ;; rights: fd_read

  ;; touch: opens a file that is not there, which fails (ENOENT) after
  ;; wazero opened the preopen itself; the instance is kept.
  (func (export "berm_tool_touch")
    (drop (call $open_at3 (i32.const 0x100) (i32.const 7))))

  ;; nest: calls fsleak.touch, which runs in a second instance.
  (func (export "berm_tool_nest")
    (drop (call $sys (i64.const 0x6410f207e9992ec1) (i32.const 0x200) (i32.const 25)))) ;; berm.call

  ;; count: opens f until the directory's bound on open files refuses, and
  ;; returns how many it opened, 4 bytes little-endian.
  (func (export "berm_tool_count")
    (local $n i32)
    (block $full
      (loop $more
        (br_if $full (call $open_at3 (i32.const 0x110) (i32.const 1)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $more)))
    (i32.store (i32.const 0x600) (local.get $n))
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x600) (i32.const 4)))) ;; berm.result

  ;; readdir_fault: reads the directory at 3 into a buffer past memory's
  ;; end: wazero reads the entries (".", "..", "f") into the descriptor's
  ;; cursor, then fails to write them (EFAULT).
  (func (export "berm_tool_readdir_fault")
    (drop (call $readdir (i32.const 3) (i32.const 0xfff0) (i32.const 0x1000) (i64.const 0) (i32.const 0x700))))

  ;; readdir_probe: reads the directory at 3 from cookie 3, past its three
  ;; entries, and returns the errno, 4 bytes little-endian: ENOENT (44) in a
  ;; descriptor nothing was read from, 0 in one read to its end.
  (func (export "berm_tool_readdir_probe")
    (i32.store (i32.const 0x600)
      (call $readdir (i32.const 3) (i32.const 0x800) (i32.const 0x100) (i64.const 3) (i32.const 0x700)))
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x600) (i32.const 4))))) ;; berm.result
