// A deliberately broken protocol: the barrier expects 64 arrivals, but the one warp of the block
// gives 32, so phase 0 never completes and every thread waits forever. A debug build must trap.
// fa4.verify_protocol = false lets it past the static protocol verifier, which rejects it.
module attributes {gpu.container_module, fa4.verify_protocol = false} {
  gpu.module @broken_barrier [#nvvm.target<chip = "sm_90a", features = "+ptx86", O = 3>] {
    gpu.func @broken_barrier() kernel {
      %c0 = arith.constant 0 : i32
      %handoff = "fa4.mbarrier_alloc"() {sym_name = "handoff", num_barriers = 1, arrive_count = 64, arrival = "threads"} : () -> !fa4.mbarriers
      "fa4.mbarrier_init"(%handoff) : (!fa4.mbarriers) -> ()
      "fa4.warp_specialize"() ({
        "fa4.warp_role"() ({
          "fa4.mbarrier_arrive"(%handoff, %c0) : (!fa4.mbarriers, i32) -> ()
          "fa4.mbarrier_try_wait_parity"(%handoff, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
          gpu.yield
        }) {sym_name = "everyone", warps = array<i32: 0>} : () -> ()
        gpu.yield
      }) {num_warps = 1} : () -> ()
      gpu.return
    }
  }
}
