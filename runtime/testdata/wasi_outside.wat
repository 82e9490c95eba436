;; wasi_outside: a path outside every grant, as Go's os asks for it: with
;; descriptor -1 (no preopen's name is a prefix of the path) and the path
;; without its leading slash. Deployed as "outside" in wasi_outside_test.go,
;; with directories granted and without. Built from the repository's root
;; with
;;
;;   wat2wasm runtime/testdata/wasi_outside.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/wasi_outside.wasm /dev/stdin runtime/testdata/wasi_outside.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "path_filestat_get"
    (func $stat (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))

  (memory (export "memory") 1)

  ;;        address  string            length
  (data (i32.const 0x100) "etc")            ;; 3
  (data (i32.const 0x110) "x\nberm: forged") ;; 14

  ;; $answer sets the result to errno, 4 bytes little-endian.
  (func $answer (param $errno i32)
    (i32.store (i32.const 0x600) (local.get $errno))
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x600) (i32.const 4)))) ;; berm.result

  (func $stat_etc (result i32)
    (call $stat (i32.const -1) (i32.const 1) (i32.const 0x100) (i32.const 3) (i32.const 0x400)))

  ;; stat_etc: answers the errno of the stat of /etc.
  (func (export "berm_tool_stat_etc")
    (call $answer (call $stat_etc)))

  ;; stat_many: stats /etc 15 times; answers the last errno.
  (func (export "berm_tool_stat_many")
    (local $i i32) (local $errno i32)
    (loop $more
      (local.set $errno (call $stat_etc))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $more (i32.lt_u (local.get $i) (i32.const 15))))
    (call $answer (local.get $errno)))

  ;; open_odd: opens a path with a newline in it.
  (func (export "berm_tool_open_odd")
    (call $answer (call $open (i32.const -1) (i32.const 0) (i32.const 0x110) (i32.const 14)
      (i32.const 0) (i64.const 2) (i64.const 2) (i32.const 0) (i32.const 0x500))))

  ;; noop: does nothing.
  (func (export "berm_tool_noop")))
