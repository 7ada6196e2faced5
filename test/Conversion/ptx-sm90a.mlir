// A one-tile wgmma GEMM, acc[64x32] = A[64x32] @ B[32x32]^T in two K steps: a TMA warp and one
// consumer warpgroup, through every stage to PTX and ptxas (fa4-compile runs ptxas -arch=sm_90a).
// RUN: fa4-compile %s --target sm_90a -o %t | FileCheck %s --check-prefix=SUMMARY
// RUN: FileCheck %s < %t/tile_wgmma.ptx
// SUMMARY: tile_wgmma sm_90a: 384 threads, cluster 1x1x1, smem 6152 B, {{[0-9]+}} registers, 0+0 spill bytes, 3 params

// CHECK: .extern .shared .align 1024 .b8 fa4_smem[];
// CHECK: .visible .entry tile_wgmma(
// CHECK-NEXT: .param .align 64 .b8 tile_wgmma_param_0[128],
// CHECK-NEXT: .param .align 64 .b8 tile_wgmma_param_1[128],
// CHECK-NEXT: .param .u64 .ptr .global .align 1 tile_wgmma_param_2
// CHECK: .reqntid 384, 1, 1
// CHECK: .minnctapersm 1
// CHECK-DAG: mbarrier.init.shared.b64 [fa4_smem+6144], %r{{[0-9]+}};
// CHECK-DAG: setmaxnreg.dec.sync.aligned.u32 40;
// CHECK-DAG: setmaxnreg.inc.sync.aligned.u32 240;
// CHECK-DAG: mbarrier.arrive.expect_tx.shared.b64 %rd{{[0-9]+}}, [fa4_smem+6144], %r{{[0-9]+}};
// CHECK-DAG: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [fa4_smem], [%rd{{[0-9]+}}, {%r{{[0-9]+}}, %r{{[0-9]+}}}], [fa4_smem+6144];
// CHECK-DAG: mbarrier.try_wait.parity.shared.b64 P1, [%r{{[0-9]+}}], 0, 10000000;
// CHECK-DAG: wgmma.fence.sync.aligned;
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {{[{]}}%r{{.*}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 0, 0;
// CHECK-DAG: wgmma.commit_group.sync.aligned;
// CHECK-DAG: wgmma.wait_group.sync.aligned 0;
// CHECK-NOT: tcgen05
!acc = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
module attributes {gpu.container_module} {
  gpu.module @tile_wgmma {
    gpu.func @tile_wgmma(%a_map: !fa4.tensormap, %b_map: !fa4.tensormap, %out: !llvm.ptr<1>) kernel {
      %c0 = arith.constant 0 : i32
      %a = "fa4.smem_region"() {sym_name = "a", bytes = 4096, align = 1024, swizzle = "64B"} : () -> !fa4.smem
      %b = "fa4.smem_region"() {sym_name = "b", bytes = 2048, align = 1024, swizzle = "64B"} : () -> !fa4.smem
      %loaded = "fa4.mbarrier_alloc"() {sym_name = "loaded", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
      "fa4.mbarrier_init"(%loaded) : (!fa4.mbarriers) -> ()
      "fa4.warp_specialize"() ({
        "fa4.warp_role"() ({
          %e = "fa4.elect_one"() : () -> i1
          scf.if %e {
            "fa4.mbarrier_arrive_expect_tx"(%loaded, %c0) {tx_bytes = 6144} : (!fa4.mbarriers, i32) -> ()
            "fa4.tma_load"(%a_map, %a, %loaded, %c0, %c0, %c0) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
            "fa4.tma_load"(%b_map, %b, %loaded, %c0, %c0, %c0) {bytes = 2048} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          }
          gpu.yield
        }) {sym_name = "load", warps = array<i32: 4>, registers = 40} : () -> ()
        "fa4.warp_role"() ({
          "fa4.mbarrier_try_wait_parity"(%loaded, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
          %zero = llvm.mlir.zero : !acc
          %r0 = "fa4.wgmma"(%a, %b, %zero) {n = 32, ab_type = "bf16", accumulate = 0} : (!fa4.smem, !fa4.smem, !acc) -> !acc
          %r1 = "fa4.wgmma"(%a, %b, %r0) {n = 32, ab_type = "bf16", a_offset = 32, b_offset = 32} : (!fa4.smem, !fa4.smem, !acc) -> !acc
          "fa4.wgmma_commit"() : () -> ()
          "fa4.wgmma_wait"() {pending = 0} : () -> ()
          %tid = nvvm.read.ptx.sreg.tid.x : i32
          %p = llvm.getelementptr %out[%tid] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, !acc
          llvm.store %r1, %p : !acc, !llvm.ptr<1>
          gpu.yield
        }) {sym_name = "mma", warps = array<i32: 0, 1, 2, 3>, registers = 240} : () -> ()
        gpu.yield
      }) {num_warps = 12} : () -> ()
      gpu.return
    }
  }
}
