// The tile_mma kernel of test/Conversion/ptx-sm100a.mlir with the epilogue's wait for the MMA commit removed.

module attributes {gpu.container_module} {
  gpu.module @tile_mma {
    gpu.func @tile_mma(%a_map: !fa4.tensormap, %b_map: !fa4.tensormap, %out: !llvm.ptr<1>) kernel {
      %c0 = arith.constant 0 : i32
      %c32 = arith.constant 32 : i32
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
          gpu.yield
        }) {sym_name = "mma", warps = array<i32: 5>, registers = 56} : () -> ()
        "fa4.warp_role"() ({
          "fa4.named_barrier"() {sym_name = "tmem_ready", threads = 160} : () -> ()
          %acc = "fa4.tmem_load"(%d) : (!fa4.tmem) -> vector<8xi32>
          %tid = nvvm.read.ptx.sreg.tid.x : i32
          %p = llvm.getelementptr %out[%tid] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, vector<8xi32>
          llvm.store %acc, %p : vector<8xi32>, !llvm.ptr<1>
          "fa4.named_barrier"() {sym_name = "epilogue_done", threads = 128} : () -> ()
          %warp = arith.divui %tid, %c32 : i32
          %first = arith.cmpi eq, %warp, %c0 : i32
          scf.if %first {
            "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
          }
          gpu.yield
        }) {sym_name = "epilogue", warps = array<i32: 0, 1, 2, 3>, registers = 232} : () -> ()
        gpu.yield
      }) {num_warps = 12} : () -> ()
      gpu.return
    }
  }
}
