;; wasi_flood: one WASI call that asks the host for much work, each a tool,
;; to show that no host function runs far past the call's deadline: fd_write
;; and fd_pwrite of many iovecs over the same 50 MiB, to stdout or to a file
;; of the granted directory at 3; fd_read and fd_pread of a sparse file into
;; them; random_get of 50 MiB. Deployed as "flood" in wasi_deadline_test.go. Built from the repository's root with
;;
;;   wat2wasm runtime/testdata/wasi_flood.wat --output=- | go run ./testdata/mkimage -o runtime/testdata/wasi_flood.wasm /dev/stdin runtime/testdata/wasi_flood.abi.json
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_pwrite"
    (func $pwrite (param i32 i32 i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read"
    (func $read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_pread"
    (func $pread (param i32 i32 i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_filestat_set_size"
    (func $truncate (param i32 i64) (result i32)))
  (import "wasi_snapshot_preview1" "random_get"
    (func $random (param i32 i32) (result i32)))

  ;; Page 0 holds the strings, the iovecs (at 0x1000, up to 1024 of them)
  ;; and the results; the buffer of 50 MiB at 0x10000 is grown by $buffer.
  (memory (export "memory") 1)

  ;;        address  string      length
  (data (i32.const 0x100) "out")      ;; 3

  (global $size i32 (i32.const 0x3200000)) ;; 50 MiB

  ;; $buffer grows memory to hold the buffer and fills it with byte.
  (func $buffer (param $byte i32)
    (drop (memory.grow (i32.const 801)))
    (memory.fill (i32.const 0x10000) (local.get $byte) (global.get $size)))

  ;; $iovecs writes n iovecs at 0x1000, each the whole buffer.
  (func $iovecs (param $n i32)
    (local $at i32)
    (local.set $at (i32.const 0x1000))
    (block $done
      (loop $more
        (br_if $done (i32.eqz (local.get $n)))
        (i32.store (local.get $at) (i32.const 0x10000))
        (i32.store offset=4 (local.get $at) (global.get $size))
        (local.set $at (i32.add (local.get $at) (i32.const 8)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $more))))

  ;; $answer sets the result to the errno and the count at 0x900, 8 bytes
  ;; little-endian.
  (func $answer (param $errno i32)
    (i32.store (i32.const 0x904) (i32.load (i32.const 0x900)))
    (i32.store (i32.const 0x900) (local.get $errno))
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0x900) (i32.const 8)))) ;; berm.result

  ;; $file opens "out" in the directory at 3 (created, truncated when
  ;; oflags say so) and returns its descriptor.
  (func $file (param $oflags i32) (result i32)
    (drop (call $open (i32.const 3) (i32.const 0) (i32.const 0x100) (i32.const 3)
      (local.get $oflags) (i64.const 0x7f) (i64.const 0x7f) (i32.const 0) (i32.const 0x800)))
    (i32.load (i32.const 0x800)))

  ;; stdout: one fd_write to stdout of 10 iovecs, each the same 50 MiB of
  ;; newlines.
  (func (export "berm_tool_stdout")
    (call $buffer (i32.const 0x0a))
    (call $iovecs (i32.const 10))
    (call $answer (call $write (i32.const 1) (i32.const 0x1000) (i32.const 10) (i32.const 0x900))))

  ;; stdout_max: the same with 1024 iovecs (IOV_MAX), 50 GiB in all.
  (func (export "berm_tool_stdout_max")
    (call $buffer (i32.const 0x0a))
    (call $iovecs (i32.const 1024))
    (call $answer (call $write (i32.const 1) (i32.const 0x1000) (i32.const 1024) (i32.const 0x900))))

  ;; file_write: one fd_write of 10 iovecs of 50 MiB to "out", created.
  (func (export "berm_tool_file_write")
    (local $fd i32)
    (local.set $fd (call $file (i32.const 9))) ;; O_CREAT|O_TRUNC
    (call $buffer (i32.const 0x78))
    (call $iovecs (i32.const 10))
    (call $answer (call $write (local.get $fd) (i32.const 0x1000) (i32.const 10) (i32.const 0x900))))

  ;; file_pwrite: the same with fd_pwrite at offset 0.
  (func (export "berm_tool_file_pwrite")
    (local $fd i32)
    (local.set $fd (call $file (i32.const 9)))
    (call $buffer (i32.const 0x78))
    (call $iovecs (i32.const 10))
    (call $answer (call $pwrite (local.get $fd) (i32.const 0x1000) (i32.const 10) (i64.const 0) (i32.const 0x900))))

  ;; file_read: "out" made a sparse file of 64 GiB, then one fd_read of
  ;; 1024 iovecs of 50 MiB from it.
  (func (export "berm_tool_file_read")
    (local $fd i32)
    (local.set $fd (call $file (i32.const 9)))
    (drop (call $truncate (local.get $fd) (i64.const 0x1000000000)))
    (call $buffer (i32.const 0))
    (call $iovecs (i32.const 1024))
    (call $answer (call $read (local.get $fd) (i32.const 0x1000) (i32.const 1024) (i32.const 0x900))))

  ;; file_pread: the same with fd_pread at offset 0.
  (func (export "berm_tool_file_pread")
    (local $fd i32)
    (local.set $fd (call $file (i32.const 9)))
    (drop (call $truncate (local.get $fd) (i64.const 0x1000000000)))
    (call $buffer (i32.const 0))
    (call $iovecs (i32.const 1024))
    (call $answer (call $pread (local.get $fd) (i32.const 0x1000) (i32.const 1024) (i64.const 0) (i32.const 0x900))))

  ;; random: one random_get of 50 MiB.
  (func (export "berm_tool_random")
    (call $buffer (i32.const 0))
    (call $answer (call $random (i32.const 0x10000) (global.get $size)))))
