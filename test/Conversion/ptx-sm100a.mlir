// A one-tile tcgen05 GEMM (two K steps of D[128x64] += A[128x16] @ B[64x16]^T): a TMA warp, an MMA warp and a
// 128-thread epilogue, through every stage to PTX and ptxas (fa4-compile runs ptxas -arch=sm_100a).
// RUN: fa4-compile %s --target sm_100a -o %t | FileCheck %s --check-prefix=SUMMARY
// RUN: FileCheck %s < %t/tile_mma.ptx
// SUMMARY: tile_mma sm_100a: 384 threads, cluster 1x1x1, smem 24600 B, {{[0-9]+}} registers, 0+0 spill bytes, 3 params

// CHECK: .extern .shared .align 1024 .b8 fa4_smem[];
// CHECK: .visible .entry tile_mma(
// CHECK-NEXT: .param .align 64 .b8 tile_mma_param_0[128],
// CHECK-NEXT: .param .align 64 .b8 tile_mma_param_1[128],
// CHECK-NEXT: .param .u64 .ptr .global .align 1 tile_mma_param_2
// CHECK: .reqntid 384, 1, 1
// CHECK: .minnctapersm 1
// CHECK-DAG: mbarrier.init.shared.b64
// CHECK-DAG: fence.mbarrier_init.release.cluster
// CHECK-DAG: setmaxnreg.dec.sync.aligned.u32 56
// CHECK-DAG: setmaxnreg.inc.sync.aligned.u32 232
// CHECK-DAG: elect.sync
// CHECK-DAG: tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [fa4_smem+24576], %r{{[0-9]+}};
// CHECK-DAG: tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
// CHECK-DAG: mbarrier.arrive.expect_tx.shared.b64 %rd{{[0-9]+}}, [fa4_smem+24584], %r{{[0-9]+}};
// CHECK-DAG: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [fa4_smem], [%rd{{[0-9]+}}, {%r{{[0-9]+}}, %r{{[0-9]+}}}], [fa4_smem+24584];
// CHECK-DAG: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [fa4_smem+16384], [%rd{{[0-9]+}}, {%r{{[0-9]+}}, %r{{[0-9]+}}}], [fa4_smem+24584];
// CHECK-DAG: mbarrier.try_wait.parity.shared.b64 P1, [%r{{[0-9]+}}], 0, 10000000;
// CHECK-DAG: tcgen05.mma.cta_group::1.kind::f16.collector::a::discard [%r{{[0-9]+}}], %rd{{[0-9]+}}, %rd{{[0-9]+}}, %r{{[0-9]+}}, %p{{[0-9]+}};
// CHECK-DAG: bar.arrive 1, 160;
// CHECK-DAG: bar.sync 1, 160;
// CHECK-DAG: bar.arrive 2, 160;
// CHECK-DAG: bar.sync 2, 160;
// CHECK-DAG: tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [fa4_smem+24592];
// CHECK-DAG: tcgen05.ld.sync.aligned.32x32b.x8.b32
// CHECK-DAG: tcgen05.wait::ld.sync.aligned;
// CHECK-DAG: tcgen05.dealloc.cta_group::1.sync.aligned.b32
module attributes {gpu.container_module} {
  gpu.module @tile_mma {
    gpu.func @tile_mma(%a_map: !fa4.tensormap, %b_map: !fa4.tensormap, %out: !llvm.ptr<1>) kernel {
      %c0 = arith.constant 0 : i32
      %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "128B"} : () -> !fa4.smem
      %b = "fa4.smem_region"() {sym_name = "b", bytes = 8192, align = 1024, swizzle = "128B"} : () -> !fa4.smem
      %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4} : () -> !fa4.smem
      %d = "fa4.tmem_region"() {sym_name = "D", columns = 64} : () -> !fa4.tmem
      %loaded = "fa4.mbarrier_alloc"() {sym_name = "loaded", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
      %done = "fa4.mbarrier_alloc"() {sym_name = "mma_done", num_barriers = 1, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
      "fa4.mbarrier_init"(%loaded) : (!fa4.mbarriers) -> ()
      "fa4.mbarrier_init"(%done) : (!fa4.mbarriers) -> ()
      "fa4.warp_specialize"() ({
        "fa4.warp_role"() ({
          %e = "fa4.elect_one"() : () -> i1
          scf.if %e {
            "fa4.mbarrier_arrive_expect_tx"(%loaded, %c0) {tx_bytes = 24576} : (!fa4.mbarriers, i32) -> ()
            "fa4.tma_load"(%a_map, %a, %loaded, %c0, %c0, %c0) {bytes = 16384} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
            "fa4.tma_load"(%b_map, %b, %loaded, %c0, %c0, %c0) {bytes = 8192} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          }
          gpu.yield
        }) {sym_name = "load", warps = array<i32: 4>, registers = 56} : () -> ()
        "fa4.warp_role"() ({
          "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
          "fa4.named_barrier"() {sym_name = "tmem_ready", threads = 160, kind = "arrive"} : () -> ()
          "fa4.mbarrier_try_wait_parity"(%loaded, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
          %e = "fa4.elect_one"() : () -> i1
          scf.if %e {
            %false = arith.constant false
            %true = arith.constant true
            "fa4.tcgen05_mma"(%d, %a, %b, %false) {m = 128, n = 64, ab_type = "bf16"} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
            "fa4.tcgen05_mma"(%d, %a, %b, %true) {m = 128, n = 64, ab_type = "bf16", a_offset = 32, b_offset = 32} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
            "fa4.mma_commit"(%done, %c0) : (!fa4.mbarriers, i32) -> ()
          }
          // the warp that allocated frees TMEM once the epilogue has read it
          "fa4.named_barrier"() {sym_name = "epilogue_done", threads = 160} : () -> ()
          "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
          gpu.yield
        }) {sym_name = "mma", warps = array<i32: 5>, registers = 56} : () -> ()
        "fa4.warp_role"() ({
          "fa4.named_barrier"() {sym_name = "tmem_ready", threads = 160} : () -> ()
          "fa4.mbarrier_try_wait_parity"(%done, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
          %acc = "fa4.tmem_load"(%d) : (!fa4.tmem) -> vector<8xi32>
          %tid = nvvm.read.ptx.sreg.tid.x : i32
          %p = llvm.getelementptr %out[%tid] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, vector<8xi32>
          llvm.store %acc, %p : vector<8xi32>, !llvm.ptr<1>
          "fa4.named_barrier"() {sym_name = "epilogue_done", threads = 160, kind = "arrive"} : () -> ()
          gpu.yield
        }) {sym_name = "epilogue", warps = array<i32: 0, 1, 2, 3>, registers = 232} : () -> ()
        gpu.yield
      }) {num_warps = 12} : () -> ()
      gpu.return
    }
  }
}
