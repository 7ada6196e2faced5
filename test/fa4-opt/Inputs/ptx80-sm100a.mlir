module attributes {gpu.container_module} {
  gpu.module @k [#nvvm.target<chip = "sm_100a", features = "+ptx80">] {
  }
}
