// Round-trip of every fa4 op and type: parse, verify, print, parse the print, print again.
// RUN: fa4-opt %s | fa4-opt | FileCheck %s
// RUN: fa4-opt %s > %t.once.mlir
// RUN: fa4-opt %t.once.mlir > %t.twice.mlir
// RUN: diff %t.once.mlir %t.twice.mlir

// CHECK-LABEL: func.func @layout
func.func @layout() {
  // CHECK: %[[Q:.*]] = "fa4.smem_region"() {align = 1024 : i64, bytes = 65536 : i64, offset = 0 : i64, swizzle = "128B", sym_name = "q"} : () -> !fa4.smem
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 65536, align = 1024, swizzle = "128B", offset = 0} : () -> !fa4.smem
  // CHECK: "fa4.smem_alias"(%[[Q]]) {bytes = 32768 : i64, offset = 32768 : i64, sym_name = "o1"} : (!fa4.smem) -> !fa4.smem
  %o1 = "fa4.smem_alias"(%q) {sym_name = "o1", bytes = 32768, offset = 32768} : (!fa4.smem) -> !fa4.smem
  // CHECK: "fa4.smem_region"() {bytes = 1024 : i64, sym_name = "correction"} : () -> !fa4.smem
  %corr = "fa4.smem_region"() {sym_name = "correction", bytes = 1024} : () -> !fa4.smem
  // CHECK: "fa4.tmem_region"() {column = 128 : i64, columns = 128 : i64, sym_name = "S1"} : () -> !fa4.tmem
  %s1 = "fa4.tmem_region"() {sym_name = "S1", columns = 128, column = 128} : () -> !fa4.tmem
  // CHECK: "fa4.tmem_region"() {columns = 128 : i64, sym_name = "O0"} : () -> !fa4.tmem
  %o0 = "fa4.tmem_region"() {sym_name = "O0", columns = 128} : () -> !fa4.tmem
  return
}

// CHECK-LABEL: func.func @barriers
func.func @barriers(%i: i32, %phase: i32) {
  // CHECK: %[[T:.*]] = "fa4.mbarrier_alloc"() {arrival = "threads", arrive_count = 256 : i64, cta_group = 2 : i64, index = 0 : i64, num_barriers = 2 : i64, sym_name = "S0_consumer"} : () -> !fa4.mbarriers
  %t = "fa4.mbarrier_alloc"() {sym_name = "S0_consumer", num_barriers = 2, arrive_count = 256, arrival = "threads", cta_group = 2, index = 0} : () -> !fa4.mbarriers
  // CHECK: "fa4.mbarrier_alloc"() {arrival = "threads", arrive_counts = array<i32: 256, 128>, num_barriers = 2 : i64, sym_name = "S1_consumer"} : () -> !fa4.mbarriers
  %t1 = "fa4.mbarrier_alloc"() {sym_name = "S1_consumer", num_barriers = 2, arrive_counts = array<i32: 256, 128>, arrival = "threads"} : () -> !fa4.mbarriers
  // CHECK: %[[X:.*]] = "fa4.mbarrier_alloc"() {arrival = "tx", arrive_count = 1 : i64, num_barriers = 1 : i64, sym_name = "q1_sync"} : () -> !fa4.mbarriers
  %x = "fa4.mbarrier_alloc"() {sym_name = "q1_sync", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  // CHECK: %[[C:.*]] = "fa4.mbarrier_alloc"() {arrival = "commit", arrive_count = 1 : i64, num_barriers = 2 : i64, sym_name = "S_producer"} : () -> !fa4.mbarriers
  %c = "fa4.mbarrier_alloc"() {sym_name = "S_producer", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  // CHECK: "fa4.mbarrier_init"(%[[T]]) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%t) : (!fa4.mbarriers) -> ()
  // CHECK: "fa4.mbarrier_arrive"(%[[T]], %{{.*}}) {count = 2 : i64} : (!fa4.mbarriers, i32) -> ()
  "fa4.mbarrier_arrive"(%t, %i) {count = 2} : (!fa4.mbarriers, i32) -> ()
  // CHECK: "fa4.mbarrier_arrive_expect_tx"(%[[X]], %{{.*}}) {tx_bytes = 32768 : i64} : (!fa4.mbarriers, i32) -> ()
  "fa4.mbarrier_arrive_expect_tx"(%x, %i) {tx_bytes = 32768} : (!fa4.mbarriers, i32) -> ()
  // CHECK: "fa4.mbarrier_try_wait_parity"(%[[X]], %{{.*}}, %{{.*}}) : (!fa4.mbarriers, i32, i32) -> ()
  "fa4.mbarrier_try_wait_parity"(%x, %i, %phase) : (!fa4.mbarriers, i32, i32) -> ()
  // CHECK: "fa4.mma_commit"(%[[C]], %{{.*}}) {multicast_mask = 3 : i64} : (!fa4.mbarriers, i32) -> ()
  "fa4.mma_commit"(%c, %i) {multicast_mask = 3} : (!fa4.mbarriers, i32) -> ()
  return
}

// CHECK-LABEL: func.func @pipeline
func.func @pipeline(%tmap: !fa4.tensormap, %x: i32, %y: i32) {
  %k = "fa4.smem_region"() {sym_name = "k", bytes = 65536, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "k_full", num_barriers = 4, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "k_empty", num_barriers = 4, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  // CHECK: %[[P:.*]] = "fa4.pipeline_create"(%{{.*}}, %{{.*}}) {consumer_sub_stages = 2 : i64, num_stages = 2 : i64, producer_sub_stages = 2 : i64, sym_name = "k"} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "k", num_stages = 2, producer_sub_stages = 2, consumer_sub_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  // CHECK: %[[PS:.*]]:2 = "fa4.pipeline_initial_state"(%[[P]]) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
  %ps:2 = "fa4.pipeline_initial_state"(%p) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
  // CHECK: %[[CS:.*]]:2 = "fa4.pipeline_initial_state"(%[[P]]) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
  %cs:2 = "fa4.pipeline_initial_state"(%p) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
  "fa4.warp_specialize"() ({
    // CHECK: "fa4.warp_role"() ({
    "fa4.warp_role"() ({
      // CHECK: "fa4.pipeline_producer_acquire"(%[[P]], %[[PS]]#0, %[[PS]]#1) {sub_stage = 1 : i64} : (!fa4.pipeline, i32, i32) -> ()
      "fa4.pipeline_producer_acquire"(%p, %ps#0, %ps#1) {sub_stage = 1} : (!fa4.pipeline, i32, i32) -> ()
      // CHECK: %[[E:.*]] = "fa4.elect_one"() : () -> i1
      %e = "fa4.elect_one"() : () -> i1
      // CHECK: "fa4.pipeline_producer_commit"(%[[P]], %[[PS]]#0) {sub_stage = 1 : i64, tx_bytes = 16384 : i64} : (!fa4.pipeline, i32) -> ()
      "fa4.pipeline_producer_commit"(%p, %ps#0) {sub_stage = 1, tx_bytes = 16384} : (!fa4.pipeline, i32) -> ()
      // CHECK: "fa4.tma_load"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {bytes = 16384 : i64, dst_offset = 16384 : i64, multicast_mask = 1 : i64} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
      "fa4.tma_load"(%tmap, %k, %full, %ps#0, %x, %y) {bytes = 16384, dst_offset = 16384, multicast_mask = 1} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
      // CHECK: "fa4.pipeline_advance"(%[[P]], %[[PS]]#0, %[[PS]]#1) : (!fa4.pipeline, i32, i32) -> (i32, i32)
      %n:2 = "fa4.pipeline_advance"(%p, %ps#0, %ps#1) : (!fa4.pipeline, i32, i32) -> (i32, i32)
      // CHECK: gpu.yield
      gpu.yield
    // CHECK-NEXT: }) {registers = 40 : i64, sym_name = "load", warps = array<i32: 4>} : () -> ()
    }) {sym_name = "load", warps = array<i32: 4>, registers = 40} : () -> ()
    "fa4.warp_role"() ({
      // CHECK: "fa4.pipeline_consumer_wait"(%[[P]], %[[CS]]#0, %[[CS]]#1) : (!fa4.pipeline, i32, i32) -> ()
      "fa4.pipeline_consumer_wait"(%p, %cs#0, %cs#1) : (!fa4.pipeline, i32, i32) -> ()
      // CHECK: "fa4.pipeline_consumer_release"(%[[P]], %[[CS]]#0) {sub_stage = 1 : i64} : (!fa4.pipeline, i32) -> ()
      "fa4.pipeline_consumer_release"(%p, %cs#0) {sub_stage = 1} : (!fa4.pipeline, i32) -> ()
      // CHECK: "fa4.tma_store"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {bytes = 16384 : i64, src_offset = 0 : i64} : (!fa4.tensormap, !fa4.smem, i32, i32) -> ()
      "fa4.tma_store"(%tmap, %k, %x, %y) {bytes = 16384, src_offset = 0} : (!fa4.tensormap, !fa4.smem, i32, i32) -> ()
      // CHECK: "fa4.tma_store_wait"() {pending = 1 : i64} : () -> ()
      "fa4.tma_store_wait"() {pending = 1} : () -> ()
      gpu.yield
    }) {sym_name = "mma", warps = array<i32: 0, 1, 2, 3>, registers = 232} : () -> ()
    gpu.yield
  // CHECK: }) {num_warps = 8 : i64} : () -> ()
  }) {num_warps = 8} : () -> ()
  return
}

// CHECK-LABEL: func.func @memory_views
func.func @memory_views(%stage: i32) {
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 65536, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  // CHECK: %[[B:.*]] = "fa4.smem_stage"(%{{.*}}, %{{.*}}) {bytes = 16384 : i64} : (!fa4.smem, i32) -> !fa4.smem
  %buf = "fa4.smem_stage"(%ring, %stage) {bytes = 16384} : (!fa4.smem, i32) -> !fa4.smem
  // CHECK: "fa4.smem_address"(%[[B]]) : (!fa4.smem) -> !llvm.ptr<3>
  %p = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>
  // CHECK: "fa4.named_barrier"() {kind = "arrive", sym_name = "softmax", threads = 256 : i64} : () -> ()
  "fa4.named_barrier"() {sym_name = "softmax", threads = 256, kind = "arrive"} : () -> ()
  return
}

// CHECK-LABEL: func.func @tensor_memory
func.func @tensor_memory(%v: vector<8xi32>, %acc: i1) {
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4} : () -> !fa4.smem
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %s = "fa4.tmem_region"() {sym_name = "S", columns = 128} : () -> !fa4.tmem
  // CHECK: "fa4.tmem_alloc"(%{{.*}}) {columns = 256 : i64, cta_group = 2 : i64} : (!fa4.smem) -> ()
  "fa4.tmem_alloc"(%slot) {columns = 256, cta_group = 2} : (!fa4.smem) -> ()
  // CHECK: "fa4.tmem_load"(%{{.*}}) {column_offset = 8 : i64} : (!fa4.tmem) -> vector<8xi32>
  %x = "fa4.tmem_load"(%s) {column_offset = 8} : (!fa4.tmem) -> vector<8xi32>
  // CHECK: "fa4.tmem_store"(%{{.*}}, %{{.*}}) : (!fa4.tmem, vector<8xi32>) -> ()
  "fa4.tmem_store"(%s, %v) : (!fa4.tmem, vector<8xi32>) -> ()
  // CHECK: "fa4.tcgen05_mma"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {ab_type = "bf16", b_offset = 32 : i64, m = 128 : i64, n = 128 : i64} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  "fa4.tcgen05_mma"(%s, %a, %a, %acc) {m = 128, n = 128, ab_type = "bf16", b_offset = 32} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  // CHECK: "fa4.tcgen05_mma"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {ab_type = "f16", m = 64 : i64, n = 8 : i64} : (!fa4.tmem, !fa4.tmem, !fa4.smem, i1) -> ()
  "fa4.tcgen05_mma"(%s, %s, %a, %acc) {m = 64, n = 8, ab_type = "f16"} : (!fa4.tmem, !fa4.tmem, !fa4.smem, i1) -> ()
  // CHECK: "fa4.tmem_stage"(%{{.*}}, %{{.*}}) {columns = 64 : i64} : (!fa4.tmem, i32) -> !fa4.tmem
  %c1 = arith.constant 1 : i32
  %st = "fa4.tmem_stage"(%s, %c1) {columns = 64} : (!fa4.tmem, i32) -> !fa4.tmem
  // CHECK: "fa4.tcgen05_mma"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {ab_type = "bf16", b_block_stride = 8192 : i64, b_major = "mn", m = 128 : i64, n = 64 : i64} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  "fa4.tcgen05_mma"(%st, %a, %a, %acc) {m = 128, n = 64, ab_type = "bf16", b_major = "mn", b_block_stride = 8192} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  // CHECK: "fa4.tmem_dealloc"(%{{.*}}) : (!fa4.smem) -> ()
  "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
  return
}

// CHECK-LABEL: func.func @warpgroup_mma
func.func @warpgroup_mma(%acc: !llvm.struct<(f32, f32, f32, f32)>, %p: vector<4xi32>) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 8192, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  // CHECK: "fa4.wgmma"(%{{.*}}, %{{.*}}, %{{.*}}) {ab_type = "bf16", accumulate = 0 : i64, n = 8 : i64} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  %r = "fa4.wgmma"(%a, %a, %acc) {n = 8, ab_type = "bf16", accumulate = 0} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  // CHECK: "fa4.wgmma"(%{{.*}}, %{{.*}}, %{{.*}}) {ab_type = "bf16", b_block_stride = 4096 : i64, b_major = "mn", n = 8 : i64} : (vector<4xi32>, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  %rs = "fa4.wgmma"(%p, %a, %r) {n = 8, ab_type = "bf16", b_major = "mn", b_block_stride = 4096} : (vector<4xi32>, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  // CHECK: "fa4.wgmma_commit"() : () -> ()
  "fa4.wgmma_commit"() : () -> ()
  // CHECK: "fa4.wgmma_wait"() {pending = 1 : i64} : () -> ()
  "fa4.wgmma_wait"() {pending = 1} : () -> ()
  // CHECK: "fa4.wgmma_fence_acc"(%{{.*}}) : (!llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  %f = "fa4.wgmma_fence_acc"(%rs) : (!llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  return
}

// CHECK-LABEL: func.func @debug_checks
func.func @debug_checks(%ok: i1, %seq: i32, %page: i32, %w: i64) {
  // CHECK: "fa4.debug_check"(%{{.*}}, %{{.*}}, %{{.*}}) {message = "fa4 debug: sequence %d, page %u"} : (i1, i32, i32) -> ()
  "fa4.debug_check"(%ok, %seq, %page) {message = "fa4 debug: sequence %d, page %u"} : (i1, i32, i32) -> ()
  // CHECK: "fa4.debug_check"(%{{.*}}, %{{.*}}) {message = "wide 0x%lx, 100%%"} : (i1, i64) -> ()
  "fa4.debug_check"(%ok, %w) {message = "wide 0x%lx, 100%%"} : (i1, i64) -> ()
  // CHECK: "fa4.debug_check"(%{{.*}}) {message = "no values"} : (i1) -> ()
  "fa4.debug_check"(%ok) {message = "no values"} : (i1) -> ()
  return
}
