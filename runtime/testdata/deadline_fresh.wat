;; deadline_fresh: work over all of a fresh memory, where the first write of
;; each page costs the kernel's fault (8 to 30 us a page): bulk operations,
;; each one instruction, which a check before it cannot bound, and a store in
;; each page. Each tool grows the memory to the host's limit, then does its
;; work over all of it again and again, until the deadline. The runtime's
;; deadline tests want each stopped at it. Built by testdata/fixtures.mk with
;; deadline_fresh.abi.json.
(module
  ;; The maximum is the ABI's, far over any host's limit: the host decides.
  (memory (export "memory") 1 65536)

  ;; $grow grows the memory as far as the host lets it, by halves, and
  ;; returns its size in bytes less one (the whole 4 GiB does not fit an
  ;; i32).
  (func $grow (result i32)
    (local $n i32)
    (local.set $n (i32.const 0x8000))
    (loop $again
      (if (i32.eq (memory.grow (local.get $n)) (i32.const -1))
        (then (local.set $n (i32.shr_u (local.get $n) (i32.const 1)))))
      (br_if $again (local.get $n)))
    (i32.sub (i32.shl (memory.size) (i32.const 16)) (i32.const 1)))

  ;; fill fills all of memory but its last byte.
  (func (export "berm_tool_fill")
    (local $n i32)
    (local.set $n (call $grow))
    (loop $again
      (memory.fill (i32.const 0) (i32.const 7) (local.get $n))
      (br $again)))

  ;; copy copies all of memory but its last byte one byte up: the copy overlaps
  ;; its source, so it runs from the end down.
  (func (export "berm_tool_copy")
    (local $n i32)
    (local.set $n (call $grow))
    (loop $again
      (memory.copy (i32.const 1) (i32.const 0) (local.get $n))
      (br $again)))

  ;; copydown copies all of memory but its first byte one byte down, from the
  ;; start up.
  (func (export "berm_tool_copydown")
    (local $n i32)
    (local.set $n (call $grow))
    (loop $again
      (memory.copy (i32.const 0) (i32.const 1) (local.get $n))
      (br $again)))

  ;; touch stores a byte in each page, from the first up.
  (func (export "berm_tool_touch")
    (local $n i32)
    (local $at i32)
    (local.set $n (call $grow))
    (loop $again
      (local.set $at (i32.const 0))
      (loop $page
        (i32.store8 (local.get $at) (i32.const 1))
        (br_if $page (i32.le_u
          (local.tee $at (i32.add (local.get $at) (i32.const 0x1000)))
          (local.get $n))))
      (br $again)))

  ;; read loads a byte from each page, three pages a turn, from the first
  ;; up: the first read of a page maps the kernel's page of zeros.
  (func (export "berm_tool_read")
    (local $n i32)
    (local $at i32)
    (local $sum i32)
    (local.set $n (i32.sub (call $grow) (i32.const 0x3000)))
    (loop $again
      (local.set $at (i32.const 0))
      (loop $page
        (local.set $sum (i32.add (local.get $sum) (i32.add
          (i32.load8_u (local.get $at))
          (i32.add (i32.load8_u offset=0x1000 (local.get $at)) (i32.load8_u offset=0x2000 (local.get $at))))))
        (br_if $page (i32.le_u
          (local.tee $at (i32.add (local.get $at) (i32.const 0x3000)))
          (local.get $n))))
      (br $again))))
