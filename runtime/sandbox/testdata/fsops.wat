;; fsops.wat: a WASI command that tries one file-system operation by calling
;; wasi_snapshot_preview1 directly on the first preopen (fd 3), passing its
;; paths to the host exactly as given ("..", absolute, through links), for
;; the sandbox's escape tests and its read benchmark:
;;
;;   fsops OP PATH [PATH2]
;;
;; OP is one letter: r read (to stdout), o open to read, w create or
;; truncate and write, c create exclusively, a append, t open with O_TRUNC,
;; T truncate through fd_filestat_set_size, n rename PATH to PATH2, u unlink,
;; d rmdir, m mkdir, s symlink PATH2 -> PATH, l link PATH2 to PATH, L the same
;; following links, k readlink (to stdout), x set times, f stat.
;; It exits 0, or with the WASI errno of the call that failed (125: bad usage).
;; build.sh beside it builds fsops_wat.wasm.
(module
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open" (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_close" (func $fd_close (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_filestat_set_size" (func $fd_filestat_set_size (param i32 i64) (result i32)))
  (import "wasi_snapshot_preview1" "path_create_directory" (func $path_create_directory (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_remove_directory" (func $path_remove_directory (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_unlink_file" (func $path_unlink_file (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_rename" (func $path_rename (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_symlink" (func $path_symlink (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_link" (func $path_link (param i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_readlink" (func $path_readlink (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_filestat_set_times" (func $path_filestat_set_times (param i32 i32 i32 i32 i64 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_filestat_get" (func $path_filestat_get (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))

  ;; 0: an opened fd; 8: an iovec; 16: a count; 32, 36: argc and the
  ;; arguments' size; 128: the text written; 1024: argv; 2048: the arguments;
  ;; 65536: the read buffer (64 KiB).
  (memory (export "memory") 2)
  (data (i32.const 128) "written by fsops")

  (global $p (mut i32) (i32.const 0))
  (global $plen (mut i32) (i32.const 0))
  (global $q (mut i32) (i32.const 0))
  (global $qlen (mut i32) (i32.const 0))

  (func $strlen (param $s i32) (result i32)
    (local $n i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (i32.load8_u (i32.add (local.get $s) (local.get $n)))))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $next)))
    (local.get $n))

  ;; check exits with errno unless it is 0.
  (func $check (param $errno i32)
    (if (local.get $errno) (then (call $proc_exit (local.get $errno)) (unreachable))))

  ;; open opens PATH under fd 3, following links.
  (func $open (param $oflags i32) (param $rights i64) (param $fdflags i32) (result i32)
    (call $check (call $path_open (i32.const 3) (i32.const 1) (global.get $p) (global.get $plen)
      (local.get $oflags) (local.get $rights) (i64.const 0) (local.get $fdflags) (i32.const 0)))
    (i32.load (i32.const 0)))

  ;; write writes len bytes at buf to fd, whole.
  (func $write (param $fd i32) (param $buf i32) (param $len i32)
    (block $done
      (loop $more
        (br_if $done (i32.eqz (local.get $len)))
        (i32.store (i32.const 8) (local.get $buf))
        (i32.store (i32.const 12) (local.get $len))
        (call $check (call $fd_write (local.get $fd) (i32.const 8) (i32.const 1) (i32.const 16)))
        (local.set $buf (i32.add (local.get $buf) (i32.load (i32.const 16))))
        (local.set $len (i32.sub (local.get $len) (i32.load (i32.const 16))))
        (br $more))))

  (func $cat (param $fd i32)
    (local $n i32)
    (block $eof
      (loop $more
        (i32.store (i32.const 8) (i32.const 65536))
        (i32.store (i32.const 12) (i32.const 65536))
        (call $check (call $fd_read (local.get $fd) (i32.const 8) (i32.const 1) (i32.const 16)))
        (local.set $n (i32.load (i32.const 16)))
        (br_if $eof (i32.eqz (local.get $n)))
        (call $write (i32.const 1) (i32.const 65536) (local.get $n))
        (br $more)))
    (call $check (call $fd_close (local.get $fd))))

  (func $written (param $fd i32)
    (call $write (local.get $fd) (i32.const 128) (i32.const 16))
    (call $check (call $fd_close (local.get $fd))))

  (func (export "_start")
    (local $op i32)
    (local $n i32)
    (call $check (call $args_sizes_get (i32.const 32) (i32.const 36)))
    (if (i32.or (i32.lt_u (i32.load (i32.const 32)) (i32.const 3))
                (i32.or (i32.gt_u (i32.load (i32.const 32)) (i32.const 8))
                        (i32.gt_u (i32.load (i32.const 36)) (i32.const 60000))))
      (then (call $proc_exit (i32.const 125)) (unreachable)))
    (call $check (call $args_get (i32.const 1024) (i32.const 2048)))
    (local.set $op (i32.load8_u (i32.load (i32.const 1028))))
    (global.set $p (i32.load (i32.const 1032)))
    (global.set $plen (call $strlen (global.get $p)))
    (global.set $q (global.get $p))
    (if (i32.gt_u (i32.load (i32.const 32)) (i32.const 3))
      (then (global.set $q (i32.load (i32.const 1036)))))
    (global.set $qlen (call $strlen (global.get $q)))

    ;; Rights: fd_read 2, fd_write 64. Oflags: creat 1, excl 4, trunc 8.
    ;; Fdflags: append 1.
    (if (i32.eq (local.get $op) (i32.const 0x72)) ;; r
      (then (call $cat (call $open (i32.const 0) (i64.const 2) (i32.const 0))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x6f)) ;; o
      (then (call $check (call $fd_close (call $open (i32.const 0) (i64.const 2) (i32.const 0)))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x77)) ;; w
      (then (call $written (call $open (i32.const 9) (i64.const 64) (i32.const 0))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x63)) ;; c
      (then (call $written (call $open (i32.const 5) (i64.const 66) (i32.const 0))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x61)) ;; a
      (then (call $written (call $open (i32.const 0) (i64.const 64) (i32.const 1))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x74)) ;; t
      (then (call $check (call $fd_close (call $open (i32.const 8) (i64.const 64) (i32.const 0)))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x54)) ;; T
      (then
        (local.set $n (call $open (i32.const 0) (i64.const 64) (i32.const 0)))
        (call $check (call $fd_filestat_set_size (local.get $n) (i64.const 0)))
        (call $check (call $fd_close (local.get $n)))
        (return)))
    (if (i32.eq (local.get $op) (i32.const 0x6e)) ;; n
      (then (call $check (call $path_rename (i32.const 3) (global.get $p) (global.get $plen)
        (i32.const 3) (global.get $q) (global.get $qlen))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x75)) ;; u
      (then (call $check (call $path_unlink_file (i32.const 3) (global.get $p) (global.get $plen))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x64)) ;; d
      (then (call $check (call $path_remove_directory (i32.const 3) (global.get $p) (global.get $plen))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x6d)) ;; m
      (then (call $check (call $path_create_directory (i32.const 3) (global.get $p) (global.get $plen))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x73)) ;; s
      (then (call $check (call $path_symlink (global.get $p) (global.get $plen)
        (i32.const 3) (global.get $q) (global.get $qlen))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x6c)) ;; l
      (then (call $check (call $path_link (i32.const 3) (i32.const 0) (global.get $p) (global.get $plen)
        (i32.const 3) (global.get $q) (global.get $qlen))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x4c)) ;; L
      (then (call $check (call $path_link (i32.const 3) (i32.const 1) (global.get $p) (global.get $plen)
        (i32.const 3) (global.get $q) (global.get $qlen))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x6b)) ;; k
      (then
        (call $check (call $path_readlink (i32.const 3) (global.get $p) (global.get $plen)
          (i32.const 65536) (i32.const 4096) (i32.const 16)))
        (call $write (i32.const 1) (i32.const 65536) (i32.load (i32.const 16)))
        (return)))
    (if (i32.eq (local.get $op) (i32.const 0x78)) ;; x: atim and mtim 1 s
      (then (call $check (call $path_filestat_set_times (i32.const 3) (i32.const 1) (global.get $p) (global.get $plen)
        (i64.const 1000000000) (i64.const 1000000000) (i32.const 5))) (return)))
    (if (i32.eq (local.get $op) (i32.const 0x66)) ;; f
      (then (call $check (call $path_filestat_get (i32.const 3) (i32.const 1) (global.get $p) (global.get $plen)
        (i32.const 256))) (return)))
    (call $proc_exit (i32.const 125))))
