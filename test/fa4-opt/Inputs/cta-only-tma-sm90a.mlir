module attributes {gpu.container_module} {
  gpu.module @k [#nvvm.target<chip = "sm_90a", features = "+ptx80">] {
    llvm.func @tma(%tmap: !llvm.ptr, %dst: !llvm.ptr<3>, %bar: !llvm.ptr<3>) attributes {nvvm.kernel} {
      %c0 = llvm.mlir.constant(0 : i32) : i32
      nvvm.cp.async.bulk.tensor.shared.cluster.global %dst, %tmap, %bar, box[%c0, %c0] {isCTAOnly = true} : !llvm.ptr<3>, !llvm.ptr
      llvm.return
    }
  }
}
