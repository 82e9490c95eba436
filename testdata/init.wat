;; init: _initialize, and that every call starts afresh. Deployed as "init" in
;; tests. _initialize logs a line (berm.log is the one syscall it may make) and
;; sets $ready, which ready reports; count and memory change a global and memory
;; and return what they see, which is always "1" since no call can observe
;; anything an earlier call left. A host that snapshots after _initialize passes
;; as well as one that runs it before every call.
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))

  ;; Address 0 holds the i32 that memory counts; numbers are written at $NUM.
  (memory (export "memory") 1)
  (global $NUM i32 (i32.const 0x300))

  ;; Set by _initialize: proof that it ran before the tool.
  (global $ready (mut i32) (i32.const 0))
  ;; Counted by count: 0 in every fresh instance.
  (global $counter (mut i32) (i32.const 0))

  ;;        address  string           length
  (data (i32.const 0x100) "initializing")  ;; 12
  (data (i32.const 0x110) "ready")         ;;  5
  (data (i32.const 0x120) "not ready")     ;;  9

  (func $result (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (local.get $ptr) (local.get $len)))) ;; berm.result
  (func $log (param $ptr i32) (param $len i32)
    (drop (call $sys (i64.const 0x718e2c830194e059) (local.get $ptr) (local.get $len)))) ;; berm.log

  ;; $result_u32 sets the result to the decimal string of v.
  (func $result_u32 (param $v i32)
    (local $n i32) (local $t i32) (local $p i32)
    ;; count the digits, then write them from the last one back
    (local.set $t (local.get $v))
    (loop $count
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (br_if $count (local.get $t)))
    (local.set $p (i32.add (global.get $NUM) (local.get $n)))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 0x30) (i32.rem_u (local.get $v) (i32.const 10))))
      (local.set $v (i32.div_u (local.get $v) (i32.const 10)))
      (br_if $digit (i32.gt_u (local.get $p) (global.get $NUM))))
    (call $result (global.get $NUM) (local.get $n)))

  (func (export "_initialize")
    (call $log (i32.const 0x100) (i32.const 12))  ;; "initializing"
    (global.set $ready (i32.const 1)))

  (func (export "berm_tool_ready")
    (if (i32.eq (global.get $ready) (i32.const 1))
      (then (call $result (i32.const 0x110) (i32.const 5)))    ;; "ready"
      (else (call $result (i32.const 0x120) (i32.const 9)))))  ;; "not ready"

  ;; count: "1" every time, the global starting at 0 in each instance.
  (func (export "berm_tool_count")
    (global.set $counter (i32.add (global.get $counter) (i32.const 1)))
    (call $result_u32 (global.get $counter)))

  ;; memory: "1" every time, memory starting as the module declares it.
  (func (export "berm_tool_memory")
    (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1)))
    (call $result_u32 (i32.load (i32.const 0)))))
