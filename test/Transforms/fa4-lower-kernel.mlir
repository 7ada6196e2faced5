// RUN: fa4-opt %s --split-input-file -p fa4-lower-kernel --verify-diagnostics | FileCheck %s

// Tensor-map arguments become !llvm.ptr (positions in fa4.grid_constant_args), smem_address becomes
// fa4_smem + offset, declarations are erased.
// CHECK: gpu.module @m
// CHECK-NEXT: llvm.mlir.global external @fa4_smem()
// CHECK-NEXT: gpu.func @k(%[[A0:.*]]: i32, %[[MAP:.*]]: !llvm.ptr, %[[A2:.*]]: !llvm.ptr<1>) kernel attributes {fa4.grid_constant_args = array<i32: 1>}
// CHECK-NEXT: %[[BASE:.*]] = llvm.mlir.addressof @fa4_smem : !llvm.ptr<3>
// CHECK-NEXT: %[[P:.*]] = llvm.getelementptr %[[BASE]][4096] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK-NEXT: llvm.store %[[A0]], %[[P]] : i32, !llvm.ptr<3>
// CHECK-NEXT: %[[T:.*]] = builtin.unrealized_conversion_cast %[[MAP]] : !llvm.ptr to !llvm.ptr
// CHECK-NEXT: gpu.return
// CHECK-NOT: fa4.
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%x: i32, %map: !fa4.tensormap, %out: !llvm.ptr<1>) kernel {
      %r = "fa4.smem_region"() {sym_name = "r", bytes = 8192, align = 1024, offset = 0} : () -> !fa4.smem
      %o = "fa4.smem_alias"(%r) {sym_name = "o", bytes = 4096, offset = 4096} : (!fa4.smem) -> !fa4.smem
      %s = "fa4.tmem_region"() {sym_name = "S", columns = 32, column = 0} : () -> !fa4.tmem
      %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 1, arrive_count = 1, arrival = "tx", index = 0} : () -> !fa4.mbarriers
      %e = "fa4.mbarrier_alloc"() {sym_name = "e", num_barriers = 1, arrive_count = 1, arrival = "threads", index = 1} : () -> !fa4.mbarriers
      %p = "fa4.pipeline_create"(%b, %e) {sym_name = "p", num_stages = 1} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
      %addr = "fa4.smem_address"(%o) : (!fa4.smem) -> !llvm.ptr<3>
      llvm.store %x, %addr : i32, !llvm.ptr<3>
      %t = builtin.unrealized_conversion_cast %map : !fa4.tensormap to !llvm.ptr
      gpu.return
    }
  }
}

// -----

func.func @left_behind(%i: i32) {
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 1, arrive_count = 1, arrival = "threads", index = 0} : () -> !fa4.mbarriers
  // expected-error @+1 {{'fa4.mbarrier_arrive' is not lowered yet: run fa4-lower-barriers before fa4-lower-kernel}}
  "fa4.mbarrier_arrive"(%b, %i) : (!fa4.mbarriers, i32) -> ()
  return
}

// -----

func.func @foreign_user() {
  %r = "fa4.smem_region"() {sym_name = "r", bytes = 8192, offset = 0} : () -> !fa4.smem
  // expected-error @+1 {{'func.call' uses 'fa4.smem_region' 'r' and cannot be lowered: only fa4 ops and fa4.smem_address may use fa4 values}}
  func.call @take(%r) : (!fa4.smem) -> ()
  return
}
func.func private @take(!fa4.smem)

// -----

// expected-error @+1 {{kernel argument 0 must be !fa4.tensormap or a non-fa4 type, got !fa4.smem}}
func.func @smem_argument(%r: !fa4.smem) {
  return
}
