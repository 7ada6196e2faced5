// fa4-verify-protocol accepts correct protocols and changes nothing; on errors it attaches the
// witness: the steps of the explored schedule that touch the barrier.
// RUN: fa4-opt %s -p 'fa4-verify-protocol' | FileCheck %s
// RUN: fa4-opt %S/../../examples/pair_mma.mlir -p 'fa4-verify-protocol' | FileCheck %s --check-prefix=PAIR
// RUN: not fa4-opt %S/fa4-verify-protocol-errors.mlir --split-input-file -p 'fa4-verify-protocol{witness=4}' 2>&1 | FileCheck %s --check-prefix=WITNESS
// RUN: not fa4-opt %s -p 'fa4-verify-protocol{max_errors=0}' 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not fa4-opt %s -p 'fa4-verify-protocol{witness=-1}' 2>&1 | FileCheck %s --check-prefix=WITNESS-OPTION

// CHECK-LABEL: func.func @wgmma_ring
// CHECK: "fa4.wgmma"
// CHECK: "fa4.wgmma_wait"() {pending = 0 : i64}
// CHECK: "fa4.pipeline_consumer_release"
// CHECK-LABEL: func.func @peeled
// CHECK-LABEL: func.func @prologue_fills_min_stages
// CHECK-LABEL: func.func @one_condition_written_twice
// CHECK-LABEL: func.func @argument_range_first_acquire_skipped
// CHECK-LABEL: func.func @argument_range_peeled
// CHECK-LABEL: func.func @warp0_writes_then_barrier
// CHECK-LABEL: func.func @tma_store_after_proxy_fence
// CHECK: nvvm.fence.proxy
// CHECK-LABEL: func.func @invariant_uniform_load
// CHECK-LABEL: func.func @warp_scan_uniform
// CHECK-LABEL: func.func @multicast_release
// CHECK-LABEL: func.func @one_role_two_warpgroups
// CHECK: arith.divui
// PAIR: gpu.func @pair_mma
// PAIR: "fa4.mma_commit"(%{{.*}}, %{{.*}}) {multicast_mask = 3 : i64}

// WITNESS: error: protocol error [under-arrival]: ready[0] phase 0 gets 32 of its 64 arrivals
// WITNESS-NEXT: note: witness: step {{[0-9]+}}: kernel: fa4.mbarrier_init at {{.*}}: the cta barrier after fa4.mbarrier_init: arrive 64 (64 of 64)
// WITNESS-NEXT: note: witness: step {{[0-9]+}}: writer: fa4.mbarrier_arrive at {{.*}}: ready[0] phase 0 arrive 32

// OPTION: error: option 'max_errors' of fa4-verify-protocol must be >= 1, got 0
// WITNESS-OPTION: error: option 'witness' of fa4-verify-protocol must be >= 0, got -1

// An sm_90a ring: one elected lane of the load warp fills each stage; the consumer warpgroup runs
// wgmma on it, waits for the group, then every thread releases the stage.
func.func @wgmma_ring(%map: !fa4.tensormap, %tiles: i32) attributes {fa4.target = "sm_90a"} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 12288, align = 1024, swizzle = "64B"} : () -> !fa4.smem
  %bt = "fa4.smem_region"() {sym_name = "b", bytes = 2048, align = 1024, swizzle = "64B"} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 3, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 3, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 3} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        %end:2 = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 4096} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 4096} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %n:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %n#0, %n#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 4>, registers = 40} : () -> ()
    "fa4.warp_role"() ({
      %zero = llvm.mlir.zero : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %end:2 = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        %buf = "fa4.smem_stage"(%ring, %s) {bytes = 4096} : (!fa4.smem, i32) -> !fa4.smem
        %acc = "fa4.wgmma"(%buf, %bt, %zero) {n = 16, ab_type = "bf16", accumulate = 0} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
        "fa4.wgmma_commit"() : () -> ()
        "fa4.wgmma_wait"() {pending = 0} : () -> ()
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %n:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %n#0, %n#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "mma", warps = array<i32: 0, 1, 2, 3>, registers = 232} : () -> ()
    gpu.yield
  }) {num_warps = 8} : () -> ()
  return
}

// A producer that peels its first stage (1 + loop 1 to N) and a consumer that does not (loop 0 to
// N) cover the same N tiles: an unknown bound N takes one value in every role.
func.func @peeled(%map: !fa4.tensormap, %tiles: i32) attributes {fa4.target = "sm_90a"} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 8192, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        "fa4.pipeline_producer_acquire"(%pipe, %s0#0, %s0#1) : (!fa4.pipeline, i32, i32) -> ()
        "fa4.pipeline_producer_commit"(%pipe, %s0#0) {tx_bytes = 4096} : (!fa4.pipeline, i32) -> ()
        %b0 = "fa4.smem_stage"(%ring, %s0#0) {bytes = 4096} : (!fa4.smem, i32) -> !fa4.smem
        "fa4.tma_load"(%map, %b0, %full, %s0#0, %c0, %c0) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
        %s1:2 = "fa4.pipeline_advance"(%pipe, %s0#0, %s0#1) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        %end:2 = scf.for %t = %c1 to %tiles step %c1 iter_args(%s = %s1#0, %p = %s1#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 4096} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 4096} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %n:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %n#0, %n#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %end:2 = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %n:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %n#0, %n#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "use", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// False alarms no more (issue 19, g). A CUTLASS-style prologue: the producer fills min(S, n) stages of the fresh ring without
// acquiring, then acquires in its steady loop from min(S, n) to n; the consumer walks 0 to n.
func.func @prologue_fills_min_stages(%map: !fa4.tensormap, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 2048, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %fill = arith.minsi %n, %c2 : i32
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        %pro:2 = scf.for %t = %c0 to %fill step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %nx#0, %nx#1 : i32, i32
        }
        %end:2 = scf.for %t = %fill to %n step %c1 iter_args(%s = %pro#0, %p = %pro#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %nx#0, %nx#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "producer", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %end:2 = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
        %a = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>
        %x = llvm.load %a : !llvm.ptr<3> -> i32
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %nx#0, %nx#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "consumer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// Two roles test one condition, written two ways: the writer arrives when %flag > 0, the
// reader waits unless %flag <= 0. Every run takes both branches the same way.
func.func @one_condition_written_twice(%flag: i32) {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  %on = arith.cmpi sgt, %flag, %c0 : i32
  %off = arith.cmpi sle, %flag, %c0 : i32
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      scf.if %on {
        "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      scf.if %off {
      } else {
        "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// Both roles loop over [%start, %end) given by kernel arguments; the producer skips the
// acquire of its first iteration (the ring is fresh: it would pass at once).
func.func @argument_range_first_acquire_skipped(%map: !fa4.tensormap, %start: i32, %end: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 2048, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        %r:2 = scf.for %t = %start to %end step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
          %later = arith.cmpi ne, %t, %start : i32
          scf.if %later {
            "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          }
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %nx#0, %nx#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "producer", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %r:2 = scf.for %t = %start to %end step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
        %a = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>
        %x = llvm.load %a : !llvm.ptr<3> -> i32
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %nx#0, %nx#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "consumer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// The same range with the producer's first iteration peeled (loop from %start + 1): the peel
// says every launch has %end > %start.
func.func @argument_range_peeled(%map: !fa4.tensormap, %start: i32, %end: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 2048, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        "fa4.pipeline_producer_commit"(%pipe, %s0#0) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
        %b0 = "fa4.smem_stage"(%ring, %s0#0) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
        "fa4.tma_load"(%map, %b0, %full, %s0#0, %c0, %start) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
        %s1:2 = "fa4.pipeline_advance"(%pipe, %s0#0, %s0#1) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        %next = arith.addi %start, %c1 : i32
        %r:2 = scf.for %t = %next to %end step %c1 iter_args(%s = %s1#0, %p = %s1#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %nx#0, %nx#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "producer", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %r:2 = scf.for %t = %start to %end step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
        %a = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>
        %x = llvm.load %a : !llvm.ptr<3> -> i32
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %nx#0, %nx#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "consumer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// Warp 0 writes a scratch word and the role's four warps read it after a named barrier they all meet at.
func.func @warp0_writes_then_barrier() {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %scratch = "fa4.smem_region"() {sym_name = "scratch", bytes = 128} : () -> !fa4.smem
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %warp = arith.divui %tid, %c32 : i32
      %w0 = arith.cmpi eq, %warp, %c0 : i32
      %a = "fa4.smem_address"(%scratch) : (!fa4.smem) -> !llvm.ptr<3>
      scf.if %w0 {
        llvm.store %tid, %a : i32, !llvm.ptr<3>
      }
      "fa4.named_barrier"() {sym_name = "scratch_written", threads = 128} : () -> ()
      %x = llvm.load %a : !llvm.ptr<3> -> i32
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "team", warps = array<i32: 0, 1, 2, 3>} : () -> ()
    gpu.yield
  }) {num_warps = 4} : () -> ()
  return
}

// Every thread fences its generic-proxy stores before the barrier that hands the tile to the TMA store.
func.func @tma_store_after_proxy_fence(%map: !fa4.tensormap) {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %out = "fa4.smem_region"() {sym_name = "out", bytes = 2048, align = 1024} : () -> !fa4.smem
  %done = "fa4.mbarrier_alloc"() {sym_name = "done", num_barriers = 1, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%done) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %me = arith.remui %tid, %c128 : i32
      %lead = arith.cmpi eq, %me, %c0 : i32
      %a = "fa4.smem_address"(%out) : (!fa4.smem) -> !llvm.ptr<3>
      %p = llvm.getelementptr %a[%me] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %tid, %p : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      "fa4.named_barrier"() {sym_name = "tile_written", threads = 128} : () -> ()
      scf.if %lead {
        "fa4.tma_store"(%map, %out, %c0, %c0) {bytes = 2048} : (!fa4.tensormap, !fa4.smem, i32, i32) -> ()
        "fa4.tma_store_wait"() {pending = 0} : () -> ()
      }
      "fa4.mbarrier_arrive"(%done, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "epilogue", warps = array<i32: 0, 1, 2, 3>} : () -> ()
    gpu.yield
  }) {num_warps = 4} : () -> ()
  return
}

// Both roles branch on a value loaded from one address off a kernel argument, read-only in the
// kernel (``invariant``: a packed batch's cu_seqlens): the same in every thread, so the writer's
// arrivals and the reader's wait are taken together.
func.func @invariant_uniform_load(%lengths: !llvm.ptr<1>) {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  %b = nvvm.read.ptx.sreg.ctaid.z : i32
  %p = llvm.getelementptr %lengths[%b] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
  %n = llvm.load %p invariant : !llvm.ptr<1> -> i32
  %on = arith.cmpi sgt, %n, %c0 : i32
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      scf.if %on {
        "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      scf.if %on {
        "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// Each role scans 32 lengths a round (the packed kernels' tile schedule, varlen_schedule): a lane loads
// one (invariant, at a lane address: a function of the lane), shfl.sync.up forms prefix sums (still of the
// lane), shfl.sync.idx from lane 31 and a ballot's popc make the round's values the same in every thread
// (protocol.uniformity). The two roles' loops are two copies of one computation on the same inputs: one
// value, so the writer's arrivals and the reader's wait are taken together.
func.func @warp_scan_uniform(%lengths: !llvm.ptr<1>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %c32 = arith.constant 32 : i32
      %sum = scf.for %first = %c0 to %n step %c32 iter_args(%acc = %c0) -> (i32) : i32 {
        %full = arith.constant -1 : i32
        %one = arith.constant 1 : i32
        %zero = arith.constant 0 : i32
        %last = arith.constant 31 : i32
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %i = arith.addi %first, %lane : i32
        %p = llvm.getelementptr %lengths[%i] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        %v = llvm.load %p invariant : !llvm.ptr<1> -> i32
        %up = nvvm.shfl.sync up %full, %v, %one, %zero : i32 -> i32
        %prefix = arith.addi %v, %up : i32
        %total = nvvm.shfl.sync idx %full, %prefix, %last, %last : i32 -> i32
        %small = arith.cmpi sle, %prefix, %acc : i32
        %below = nvvm.vote.sync ballot %full, %small -> i32
        %at = llvm.intr.ctpop(%below) : (i32) -> i32
        %next = arith.addi %total, %at : i32
        scf.yield %next : i32
      }
      %on = arith.cmpi sgt, %sum, %c0 : i32
      scf.if %on {
        "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      %c32 = arith.constant 32 : i32
      %sum = scf.for %first = %c0 to %n step %c32 iter_args(%acc = %c0) -> (i32) : i32 {
        %full = arith.constant -1 : i32
        %one = arith.constant 1 : i32
        %zero = arith.constant 0 : i32
        %last = arith.constant 31 : i32
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %i = arith.addi %first, %lane : i32
        %p = llvm.getelementptr %lengths[%i] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        %v = llvm.load %p invariant : !llvm.ptr<1> -> i32
        %up = nvvm.shfl.sync up %full, %v, %one, %zero : i32 -> i32
        %prefix = arith.addi %v, %up : i32
        %total = nvvm.shfl.sync idx %full, %prefix, %last, %last : i32 -> i32
        %small = arith.cmpi sle, %prefix, %acc : i32
        %below = nvvm.vote.sync ballot %full, %small -> i32
        %at = llvm.intr.ctpop(%below) : (i32) -> i32
        %next = arith.addi %total, %at : i32
        scf.yield %next : i32
      }
      %on = arith.cmpi sgt, %sum, %c0 : i32
      scf.if %on {
        "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// multicast_mask: the writer warp of each CTA of the cluster arrives on the barrier of both, which counts 64;
// each CTA's reader waits for the phase, so neither exits while the other may still arrive on it
func.func @multicast_release() attributes {nvvm.cluster_dim = array<i32: 2, 1, 1>} {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 64, arrival = "threads", multicast_mask = 3} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// One role over two warpgroups (verified per warpgroup, its warpgroup index known in each): each waits at its
// member of the family `turn`; warpgroup 1 hands warpgroup 0 the first turn, which hands warpgroup 1 the second.
func.func @one_role_two_warpgroups() {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %t = nvvm.read.ptx.sreg.tid.x : i32
      %c128 = arith.constant 128 : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %w = arith.divui %t, %c128 : i32
      %other = arith.subi %c1, %w : i32
      %is1 = arith.cmpi eq, %w, %c1 : i32
      scf.if %is1 {
        "fa4.named_barrier"(%other) {sym_name = "turn", threads = 256, count = 2, kind = "arrive"} : (i32) -> ()
      }
      "fa4.named_barrier"(%w) {sym_name = "turn", threads = 256, count = 2} : (i32) -> ()
      %is0 = arith.cmpi eq, %w, %c0 : i32
      scf.if %is0 {
        "fa4.named_barrier"(%other) {sym_name = "turn", threads = 256, count = 2, kind = "arrive"} : (i32) -> ()
      }
      gpu.yield
    }) {sym_name = "pair", warps = array<i32: 0, 1, 2, 3, 4, 5, 6, 7>} : () -> ()
    gpu.yield
  }) {num_warps = 8} : () -> ()
  return
}
