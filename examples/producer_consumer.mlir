// A TMA producer warp and an MMA consumer sharing a 4-stage K ring: the shape of every FA4 pipeline.
// One elected lane of the load warp fills a stage (expect_tx + TMA); one thread of the MMA warpgroup
// consumes it and frees it with an MMA commit.
// Run: fa4-opt examples/producer_consumer.mlir --pass-pipeline='builtin.module(fa4-verify,fa4-verify-protocol,canonicalize,cse)'
func.func @producer_consumer(%k_map: !fa4.tensormap, %num_tiles: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0 : i32
  %row0 = arith.constant 0 : i32
  %col0 = arith.constant 0 : i32
  %k = "fa4.smem_region"() {sym_name = "k", bytes = 131072, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "k_full", num_barriers = 4, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "k_empty", num_barriers = 4, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %ring = "fa4.pipeline_create"(%full, %empty) {sym_name = "k", num_stages = 4} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %elected = "fa4.elect_one"() : () -> i1
      scf.if %elected {
        %s0:2 = "fa4.pipeline_initial_state"(%ring) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        %end:2 = scf.for %t = %c0 to %num_tiles step %c1 iter_args(%stage = %s0#0, %phase = %s0#1) -> (i32, i32) {
          "fa4.pipeline_producer_acquire"(%ring, %stage, %phase) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%ring, %stage) {tx_bytes = 32768} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%k, %stage) {bytes = 32768} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%k_map, %buf, %full, %stage, %col0, %row0) {bytes = 32768} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %next:2 = "fa4.pipeline_advance"(%ring, %stage, %phase) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %next#0, %next#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 4>, registers = 40} : () -> ()
    "fa4.warp_role"() ({
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %first = arith.cmpi eq, %tid, %zero : i32
      scf.if %first {
        %s0:2 = "fa4.pipeline_initial_state"(%ring) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
        %end:2 = scf.for %t = %c0 to %num_tiles step %c1 iter_args(%stage = %s0#0, %phase = %s0#1) -> (i32, i32) {
          "fa4.pipeline_consumer_wait"(%ring, %stage, %phase) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_consumer_release"(%ring, %stage) : (!fa4.pipeline, i32) -> ()
          %next:2 = "fa4.pipeline_advance"(%ring, %stage, %phase) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %next#0, %next#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "mma", warps = array<i32: 0, 1, 2, 3>, registers = 232} : () -> ()
    gpu.yield
  }) {num_warps = 8} : () -> ()
  return
}
