// tcgen05 ops in a kernel for sm_90a (rejected by fa4-lower-tmem with the op and the target).
module attributes {gpu.container_module} {
  gpu.module @k [#nvvm.target<chip = "sm_90a", features = "+ptx86", O = 3>] {
    gpu.func @k() kernel {
      %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4} : () -> !fa4.smem
      "fa4.tmem_alloc"(%slot) {columns = 32} : (!fa4.smem) -> ()
      gpu.return
    }
  }
}
