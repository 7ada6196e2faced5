// RUN: fa4-opt %s --split-input-file -p fa4-lower-barriers --verify-diagnostics | FileCheck %s

// Init: warp 0, lane l initialises barrier l of each array (2 barriers: lanes < 2), with the
// array's count (S0: 256 for barrier 0, 128 for barrier 1), then fence.mbarrier_init and a CTA
// barrier. The barrier region is at 1024: S0 at 1024, kv at 1040, mma at 1056.
// CHECK-LABEL: func.func @barriers
// CHECK-SAME: (%[[I:[^:]*]]: i32, %[[PH:[^:]*]]: i32)
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[C32:.*]] = arith.constant 32 : i32
// CHECK-NEXT: %[[WARP:.*]] = arith.divui %[[TID]], %[[C32]] : i32
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[W0:.*]] = arith.cmpi eq, %[[WARP]], %[[C0]] : i32
// CHECK-NEXT: scf.if %[[W0]] {
// CHECK: %[[LANE:.*]] = arith.remui
// CHECK-NEXT: %[[N2:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[LT2:.*]] = arith.cmpi ult, %[[LANE]], %[[N2]] : i32
// CHECK-NEXT: scf.if %[[LT2]] {
// CHECK-NEXT: %[[C128:.*]] = arith.constant 128 : i32
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[IS0:.*]] = arith.cmpi eq, %[[LANE]], %[[Z]] : i32
// CHECK-NEXT: %[[C256:.*]] = arith.constant 256 : i32
// CHECK-NEXT: %[[COUNT:.*]] = arith.select %[[IS0]], %[[C256]], %[[C128]] : i32
// CHECK: %[[OFF:.*]] = arith.constant 1024 : i32
// CHECK: %[[S0BAR:.*]] = llvm.getelementptr
// CHECK-NEXT: nvvm.mbarrier.init %[[S0BAR]], %[[COUNT]] : !llvm.ptr<3>, i32
// CHECK: arith.constant 1040 : i32
// CHECK: nvvm.mbarrier.init
// CHECK: arith.constant 1056 : i32
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.barrier0
// Thread arrival with a count; expect_tx by bytes; the try_wait spin loop on parity %PH.
// CHECK: %[[ABAR:.*]] = llvm.getelementptr
// CHECK-NEXT: %[[TWO:.*]] = arith.constant 2 : i32
// CHECK-NEXT: nvvm.mbarrier.arrive %[[ABAR]], %[[TWO]] : !llvm.ptr<3> -> i64
// CHECK: %[[TXBAR:.*]] = llvm.getelementptr
// CHECK-NEXT: %[[BYTES:.*]] = arith.constant 32768 : i32
// CHECK-NEXT: nvvm.mbarrier.arrive.expect_tx %[[TXBAR]], %[[BYTES]] : !llvm.ptr<3>, i32
// CHECK: %[[WBAR:.*]] = llvm.getelementptr
// CHECK-NEXT: %[[TICKS:.*]] = arith.constant 10000000 : i32
// CHECK-NEXT: nvvm.mbarrier.try_wait.parity %[[WBAR]], %[[PH]], %[[TICKS]] : !llvm.ptr<3>, i32, i32
// Commit: tcgen05.commit on mma[1] (1064), then multicast to CTAs 0b11.
// CHECK: %[[CBAR:.*]] = llvm.getelementptr %{{.*}}[1064]
// CHECK-NEXT: nvvm.tcgen05.commit %[[CBAR]] : !llvm.ptr<3>
// CHECK: %[[MBAR:.*]] = llvm.getelementptr %{{.*}}[1064]
// CHECK-NEXT: %[[MASK:.*]] = arith.constant 3 : i16
// CHECK-NEXT: nvvm.tcgen05.commit %[[MBAR]], multicast_mask = %[[MASK]] : !llvm.ptr<3>, i16
// CHECK-NOT: fa4.mbarrier_init
module attributes {fa4.target = "sm_100a"} {
func.func @barriers(%i: i32, %ph: i32) attributes {fa4.mbarrier_region = "mbarriers"} {
  %bars = "fa4.smem_region"() {sym_name = "mbarriers", bytes = 48, align = 8, offset = 1024} : () -> !fa4.smem
  %s0 = "fa4.mbarrier_alloc"() {sym_name = "S0", num_barriers = 2, arrive_counts = array<i32: 256, 128>, arrival = "threads", index = 0} : () -> !fa4.mbarriers
  %tx = "fa4.mbarrier_alloc"() {sym_name = "kv", num_barriers = 2, arrive_count = 1, arrival = "tx", index = 2} : () -> !fa4.mbarriers
  %mma = "fa4.mbarrier_alloc"() {sym_name = "mma", num_barriers = 2, arrive_count = 1, arrival = "commit", index = 4} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%s0) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%tx) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%mma) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_arrive"(%s0, %i) {count = 2} : (!fa4.mbarriers, i32) -> ()
  "fa4.mbarrier_arrive_expect_tx"(%tx, %i) {tx_bytes = 32768} : (!fa4.mbarriers, i32) -> ()
  "fa4.mbarrier_try_wait_parity"(%tx, %i, %ph) : (!fa4.mbarriers, i32, i32) -> ()
  %c1 = arith.constant 1 : i32
  "fa4.mma_commit"(%mma, %c1) : (!fa4.mbarriers, i32) -> ()
  "fa4.mma_commit"(%mma, %c1) {multicast_mask = 3} : (!fa4.mbarriers, i32) -> ()
  return
}
}

// -----

// A CTA pair: init ends with a cluster barrier; thread arrivals go to the leader CTA's barrier
// (rank & ~1, through mapa; the default CTA-scope release: a cluster-scope one costs a GPU-wide
// fence); only the leader arrives with expect_tx, for the bytes
// of both CTAs.
// CHECK-LABEL: func.func @pair
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK: %[[BAR:.*]] = llvm.mlir.addressof @fa4_smem : !llvm.ptr<3>
// CHECK-NEXT: %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// CHECK-NEXT: %[[NOT1:.*]] = arith.constant -2 : i32
// CHECK-NEXT: %[[LEADER:.*]] = arith.andi %[[RANK]], %[[NOT1]] : i32
// CHECK-NEXT: %[[REMOTE:.*]] = nvvm.mapa %[[BAR]], %[[LEADER]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-NEXT: nvvm.mbarrier.arrive %[[REMOTE]] : !llvm.ptr<7>
// CHECK: %[[RANK2:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[ODD:.*]] = arith.andi %[[RANK2]], %[[ONE]] : i32
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[ISLEADER:.*]] = arith.cmpi eq, %[[ODD]], %[[ZERO]] : i32
// CHECK-NEXT: scf.if %[[ISLEADER]] {
// CHECK-NEXT:   %[[BOTH:.*]] = arith.constant 16384 : i32
// CHECK-NEXT:   nvvm.mbarrier.arrive.expect_tx %{{.*}}, %[[BOTH]] : !llvm.ptr<3>, i32
module attributes {fa4.target = "sm_100a"} {
func.func @pair() attributes {fa4.mbarrier_region = "mbarriers", nvvm.cluster_dim = array<i32: 2, 1, 1>} {
  %bars = "fa4.smem_region"() {sym_name = "mbarriers", bytes = 16, align = 8, offset = 0} : () -> !fa4.smem
  %t = "fa4.mbarrier_alloc"() {sym_name = "t", num_barriers = 1, arrive_count = 256, arrival = "threads", cta_group = 2, index = 0} : () -> !fa4.mbarriers
  %x = "fa4.mbarrier_alloc"() {sym_name = "x", num_barriers = 1, arrive_count = 1, arrival = "tx", cta_group = 2, index = 1} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%t) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%x) : (!fa4.mbarriers) -> ()
  %c0 = arith.constant 0 : i32
  "fa4.mbarrier_arrive"(%t, %c0) : (!fa4.mbarriers, i32) -> ()
  "fa4.mbarrier_arrive_expect_tx"(%x, %c0) {tx_bytes = 8192} : (!fa4.mbarriers, i32) -> ()
  return
}
}

// -----

// A thread arrival on an array with multicast_mask goes to the barrier at its index in every CTA of the
// mask, this CTA's included, in rank order (mapa to the rank), with the arrival count.
// CHECK-LABEL: func.func @multicast_arrive
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK: %[[BAR:.*]] = llvm.mlir.addressof @fa4_smem : !llvm.ptr<3>
// CHECK-NEXT: %[[COUNT:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[R0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[REMOTE0:.*]] = nvvm.mapa %[[BAR]], %[[R0]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-NEXT: nvvm.mbarrier.arrive %[[REMOTE0]], %[[COUNT]] : !llvm.ptr<7>
// CHECK-NEXT: %[[R1:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[REMOTE1:.*]] = nvvm.mapa %[[BAR]], %[[R1]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-NEXT: nvvm.mbarrier.arrive %[[REMOTE1]], %[[COUNT]] : !llvm.ptr<7>
// CHECK-NOT: nvvm.mbarrier.arrive
module attributes {fa4.target = "sm_90a"} {
func.func @multicast_arrive() attributes {fa4.mbarrier_region = "mbarriers", nvvm.cluster_dim = array<i32: 2, 1, 1>} {
  %bars = "fa4.smem_region"() {sym_name = "mbarriers", bytes = 8, align = 8, offset = 0} : () -> !fa4.smem
  %e = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 1, arrive_count = 8, arrival = "threads", multicast_mask = 3, index = 0} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%e) : (!fa4.mbarriers) -> ()
  %c0 = arith.constant 0 : i32
  "fa4.mbarrier_arrive"(%e, %c0) {count = 2} : (!fa4.mbarriers, i32) -> ()
  return
}
}

// -----

module attributes {fa4.target = "sm_90a"} {
func.func @multicast_outside_the_cluster() attributes {fa4.mbarrier_region = "mbarriers"} {
  %bars = "fa4.smem_region"() {sym_name = "mbarriers", bytes = 8, align = 8, offset = 0} : () -> !fa4.smem
  %e = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 1, arrive_count = 8, arrival = "threads", multicast_mask = 3, index = 0} : () -> !fa4.mbarriers
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{multicast_mask of mbarrier array 'empty' must name CTAs of the kernel's cluster of 1 (bits below 1), got 0x3: declare the kernel's cluster (nvvm.cluster_dim) or narrow the mask}}
  "fa4.mbarrier_arrive"(%e, %c0) : (!fa4.mbarriers, i32) -> ()
  return
}
}

// -----

// On sm_90a an MMA commit closes and waits the wgmma group, then thread 0 of the warpgroup arrives.
// CHECK-LABEL: func.func @hopper_commit
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[WG:.*]] = arith.constant 128 : i32
// CHECK-NEXT: %[[T:.*]] = arith.remui %[[TID]], %[[WG]] : i32
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %[[Z]] : i32
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK-NEXT:   nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3> -> i64
module attributes {fa4.target = "sm_90a"} {
func.func @hopper_commit() attributes {fa4.mbarrier_region = "mbarriers"} {
  %bars = "fa4.smem_region"() {sym_name = "mbarriers", bytes = 8, align = 8, offset = 0} : () -> !fa4.smem
  %m = "fa4.mbarrier_alloc"() {sym_name = "m", num_barriers = 1, arrive_count = 1, arrival = "commit", index = 0} : () -> !fa4.mbarriers
  %c0 = arith.constant 0 : i32
  "fa4.mma_commit"(%m, %c0) : (!fa4.mbarriers, i32) -> ()
  return
}
}

// -----

func.func @barriers_argument(%b: !fa4.mbarriers, %i: i32) {
  // expected-error @+1 {{'fa4.mbarrier_arrive' barriers must come from fa4.mbarrier_alloc in the same kernel}}
  "fa4.mbarrier_arrive"(%b, %i) : (!fa4.mbarriers, i32) -> ()
  return
}
