func.func @k(%i: i32) -> i32 {
  %a = arith.constant 1 : i32
  %b = arith.constant 2 : i32
  %c = arith.addi %a, %b : i32
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  return %c : i32
}
