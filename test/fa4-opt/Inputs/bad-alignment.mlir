// Alignments LLVM cannot represent: it asserts ("Alignment is not a power of 2") while translating.
module attributes {gpu.container_module} {
  gpu.module @k [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
    llvm.func @f(%p: !llvm.ptr<1> {llvm.align = 48 : i64}) attributes {nvvm.kernel} {
      %v = llvm.load %p {alignment = 0 : i64} : !llvm.ptr<1> -> i32
      llvm.store %v, %p {alignment = 7 : i64} : i32, !llvm.ptr<1>
      llvm.return
    }
  }
}
