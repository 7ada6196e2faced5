func.func @k() {
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 0} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  return
}
