// A cluster with one 0 dimension: NVPTX asserts ("cluster_dim_x == 0 implies cluster_dim_y and
// cluster_dim_z should be 0 as well").
module attributes {gpu.container_module} {
  gpu.module @k [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
    llvm.func @f() attributes {nvvm.kernel, nvvm.cluster_dim = array<i32: 0, 1, 1>} {
      llvm.return
    }
  }
}
