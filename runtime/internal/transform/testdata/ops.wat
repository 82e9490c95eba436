;; One instruction of each shape of immediates wazero 1.12 accepts by default
;; (WebAssembly 2.0), with loops and calls to test around: the transform's
;; walker must step over every one of them. Its tool runs without trapping.
;; Built by testdata/fixtures.mk with ops.abi.json.
(module
  (type $pair (func (param i32) (result i32 i32)))
  (memory 1)
  (table $t 4 funcref)
  (table $u 2 externref)
  (global $g (mut i32) (i32.const 0))
  (global $h (mut i64) (i64.const -1))
  (data $d "abcdefgh")
  (elem $e func $leaf $multi)
  (elem declare func $simd)
  (func $leaf (param i32) (result i32)
    local.get 0
    i32.const 1
    i32.add
    i32.extend8_s)
  (func $multi (type $pair)
    (local $x i64) (local f32 f64 v128 externref funcref)
    local.get 0
    local.get 0
    block $b (param i32 i32) (result i32 i32)
      loop $l (param i32 i32) (result i32 i32)
        global.get $g
        i32.eqz
        br_if $b
        br 0
      end
    end)
  (func $simd (result i32)
    (local v128)
    i32.const 0
    v128.load offset=16 align=1
    v128.const i32x4 1 2 3 4
    i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 31
    local.tee 0
    drop
    i32.const 8
    local.get 0
    v128.load8_lane 3
    i32x4.extract_lane 2
    drop
    i32.const 0
    v128.load32_zero
    f64x2.promote_low_f32x4
    local.get 0
    i32x4.add
    i32x4.extract_lane 1)
  (func $bulk (param i32)
    (memory.init $d (i32.const 0) (i32.const 0) (i32.const 4))
    data.drop $d
    (memory.copy (i32.const 8) (i32.const 0) (i32.const 4))
    (memory.fill (i32.const 0) (i32.const 0) (i32.const 2))
    (table.init $t $e (i32.const 0) (i32.const 0) (i32.const 2))
    elem.drop $e
    (table.copy $t $t (i32.const 2) (i32.const 0) (i32.const 2))
    (drop (table.grow $t (ref.null func) (i32.const 1)))
    (drop (table.size $u))
    (table.fill $t (i32.const 0) (ref.func $simd) (i32.const 1))
    (table.set $t (i32.const 0) (table.get $t (i32.const 1)))
    (drop (ref.is_null (ref.null extern)))
    (drop (i32.trunc_sat_f32_s (f32.const 1.5)))
    (drop (i64.trunc_sat_f64_u (f64.const 2.5)))
    (drop (select (result i64) (i64.const 1) (i64.const 2) (local.get 0)))
    (drop (select (i32.const 1) (i32.const 2) (local.get 0)))
    (drop (memory.grow (memory.size)))
    (i64.store32 offset=4 (i32.const 0) (i64.const 0x7fffffffffff))
    (global.set $h (i64.load16_s (i32.const 2))))
  (func $calls (param i32) (result i32)
    (local $i i32)
    loop $again
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (local.get 0)))
    end
    block $out
      block $one
        block $two
          (br_table $one $two $out (local.get 0))
        end
      end
    end
    (if (result i32) (local.get 0)
      (then (call_indirect $t (type $pair) (i32.const 1) (i32.const 1)) (drop))
      (else (call $leaf (i32.const 2)))))
  (func (export "berm_tool_ops")
    (call $bulk (i32.const 0))
    (drop (call $calls (i32.const 3)))
    (drop (call $simd)))
  (export "memory" (memory 0)))
