// RUN: fa4-opt %s --split-input-file -p fa4-lower-tma --verify-diagnostics | FileCheck %s

// Addresses come from the allocators' attributes: ring at 0, barriers at 32768 (8 bytes each).
// CHECK: llvm.mlir.global external @fa4_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK-LABEL: func.func @loads
// CHECK-SAME: (%[[MAP:[^:]*]]: !fa4.tensormap, %[[X:[^:]*]]: i32, %[[Y:[^:]*]]: i32, %[[S:[^:]*]]: i32)

// One CTA: a shared::cta destination (isCTAOnly), barrier full[s] at 32768 + 8 s, stage s of the
// ring at 16384 s + dst_offset.
// CHECK: %[[B0:.*]] = llvm.mlir.addressof @fa4_smem
// CHECK-NEXT: %[[EIGHT:.*]] = arith.constant 8 : i32
// CHECK-NEXT: %[[S8:.*]] = arith.muli %[[S]], %[[EIGHT]] : i32
// CHECK-NEXT: %[[BOFF:.*]] = arith.constant 32768 : i32
// CHECK-NEXT: %[[BSUM:.*]] = arith.addi %[[S8]], %[[BOFF]] : i32
// CHECK-NEXT: %[[BAR:.*]] = llvm.getelementptr %[[B0]][%[[BSUM]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// CHECK-NEXT: %[[STAGE:.*]] = arith.constant 16384 : i32
// CHECK-NEXT: %[[SOFF:.*]] = arith.muli %[[S]], %[[STAGE]] : i32
// CHECK-NEXT: %[[B1:.*]] = llvm.mlir.addressof @fa4_smem
// CHECK-NEXT: %[[DOFF:.*]] = arith.constant 8192 : i32
// CHECK-NEXT: %[[DSUM:.*]] = arith.addi %[[SOFF]], %[[DOFF]] : i32
// CHECK-NEXT: %[[DST:.*]] = llvm.getelementptr %[[B1]][%[[DSUM]]]
// CHECK-NEXT: %[[TM:.*]] = builtin.unrealized_conversion_cast %[[MAP]] : !fa4.tensormap to !llvm.ptr
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global %[[DST]], %[[TM]], %[[BAR]], box[%[[X]], %[[Y]]] {isCTAOnly = true} : !llvm.ptr<3>, !llvm.ptr

// Multicast: a shared::cluster destination and the 16-bit CTA mask; full[1] is at 32776.
// CHECK: %[[MBAR:.*]] = llvm.getelementptr %{{.*}}[32776]
// CHECK: %[[MASK:.*]] = arith.constant 3 : i16
// CHECK-NEXT: %[[MDST:.*]] = llvm.addrspacecast %{{.*}} : !llvm.ptr<3> to !llvm.ptr<7>
// CHECK-NEXT: %[[MTM:.*]] = builtin.unrealized_conversion_cast %[[MAP]]
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global %[[MDST]], %[[MTM]], %[[MBAR]], box[%[[X]], %[[Y]]] multicast_mask = %[[MASK]] : !llvm.ptr<7>, !llvm.ptr

// CTA pair: pair[1] (barrier 3, at 32792) with the peer bit cleared, so both CTAs complete bytes on
// the leader's barrier; cta_group::2.
// CHECK: %[[PBAR:.*]] = llvm.getelementptr %{{.*}}[32792]
// CHECK: %[[PINT:.*]] = llvm.ptrtoint %[[PBAR]] : !llvm.ptr<3> to i64
// CHECK-NEXT: %[[PEER:.*]] = arith.constant -16777217 : i64
// CHECK-NEXT: %[[LEAD:.*]] = llvm.and %[[PINT]], %[[PEER]] : i64
// CHECK-NEXT: %[[LBAR:.*]] = llvm.inttoptr %[[LEAD]] : i64 to !llvm.ptr<3>
// CHECK-NEXT: %[[PDST:.*]] = llvm.addrspacecast
// CHECK-NEXT: %[[PTM:.*]] = builtin.unrealized_conversion_cast %[[MAP]]
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global %[[PDST]], %[[PTM]], %[[LBAR]], box[%[[X]]] {group = #nvvm.cta_group<cta_2>} : !llvm.ptr<7>, !llvm.ptr

// Store: fence the generic-proxy writes, copy from src + src_offset, commit the bulk group.
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: %[[STM:.*]] = builtin.unrealized_conversion_cast %[[MAP]]
// CHECK-NEXT: %[[B2:.*]] = llvm.mlir.addressof @fa4_smem
// CHECK-NEXT: %[[SRC:.*]] = llvm.getelementptr %[[B2]][16384]
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.global.shared.cta %[[STM]], %[[SRC]], box[%[[X]], %[[Y]]]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 1 {read}
// CHECK-NOT: fa4.tma
func.func @loads(%map: !fa4.tensormap, %x: i32, %y: i32, %s: i32) attributes {fa4.mbarrier_region = "mbarriers"} {
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 32768, align = 1024, offset = 0} : () -> !fa4.smem
  %bars = "fa4.smem_region"() {sym_name = "mbarriers", bytes = 32, align = 8, offset = 32768} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx", index = 0} : () -> !fa4.mbarriers
  %pair = "fa4.mbarrier_alloc"() {sym_name = "pair", num_barriers = 2, arrive_count = 1, arrival = "tx", cta_group = 2, index = 2} : () -> !fa4.mbarriers
  %buf = "fa4.smem_stage"(%ring, %s) {bytes = 16384} : (!fa4.smem, i32) -> !fa4.smem
  "fa4.tma_load"(%map, %buf, %full, %s, %x, %y) {bytes = 8192, dst_offset = 8192} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
  %c1 = arith.constant 1 : i32
  "fa4.tma_load"(%map, %ring, %full, %c1, %x, %y) {bytes = 8192, multicast_mask = 3} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
  "fa4.tma_load"(%map, %ring, %pair, %c1, %x) {bytes = 8192} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32) -> ()
  "fa4.tma_store"(%map, %ring, %x, %y) {bytes = 4096, src_offset = 16384} : (!fa4.tensormap, !fa4.smem, i32, i32) -> ()
  "fa4.tma_store_wait"() {pending = 1} : () -> ()
  return
}

// -----

func.func @unplaced_region(%map: !fa4.tensormap, %x: i32) {
  // expected-error @+1 {{'fa4.smem_region' 'o' has no offset: run fa4-allocate-smem before lowering}}
  %o = "fa4.smem_region"() {sym_name = "o", bytes = 4096, align = 128} : () -> !fa4.smem
  "fa4.tma_store"(%map, %o, %x) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, i32) -> ()
  return
}

// -----

func.func @unindexed_barriers(%map: !fa4.tensormap, %x: i32) {
  %r = "fa4.smem_region"() {sym_name = "r", bytes = 4096, align = 128, offset = 0} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.mbarrier_alloc' 'full' has no index: run fa4-allocate-mbarriers before lowering}}
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  "fa4.tma_load"(%map, %r, %full, %x, %x) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32) -> ()
  return
}

// -----

func.func @no_barrier_region(%map: !fa4.tensormap, %x: i32) {
  %r = "fa4.smem_region"() {sym_name = "r", bytes = 4096, align = 128, offset = 0} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 1, arrive_count = 1, arrival = "tx", index = 0} : () -> !fa4.mbarriers
  // expected-error @+1 {{the kernel has no barrier region: run fa4-allocate-mbarriers and fa4-allocate-smem before lowering}}
  "fa4.tma_load"(%map, %r, %full, %x, %x) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32) -> ()
  return
}

// -----

func.func @smem_argument(%map: !fa4.tensormap, %r: !fa4.smem, %x: i32) {
  // expected-error @+1 {{shared-memory operands must come from fa4.smem_region, fa4.smem_alias or fa4.smem_stage in the same kernel, got a block argument}}
  "fa4.tma_store"(%map, %r, %x) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, i32) -> ()
  return
}
