// A target feature without its sign: LLVM asserts ("Feature flags should start with '+' or '-'").
module attributes {gpu.container_module} {
  gpu.module @k [#nvvm.target<chip = "sm_100a", features = "+ptx86,sm_100a">] {
    llvm.func @f() attributes {nvvm.kernel} {
      llvm.return
    }
  }
}
