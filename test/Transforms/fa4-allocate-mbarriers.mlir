// RUN: fa4-opt %s --split-input-file -p fa4-allocate-mbarriers --verify-diagnostics | FileCheck %s

// Arrays are packed in program order; init counts stay on the arrays.
// CHECK-LABEL: func.func @packed() attributes {fa4.mbarrier_region = "mbarriers", fa4.num_mbarriers = 12 : i64}
// CHECK: "fa4.mbarrier_alloc"() {arrival = "threads", arrive_counts = array<i32: 256, 128>, index = 0 : i64, num_barriers = 2 : i64, sym_name = "S0_consumer"}
// CHECK: "fa4.mbarrier_alloc"() {arrival = "tx", arrive_count = 1 : i64, index = 2 : i64, num_barriers = 5 : i64, sym_name = "kv_producer"}
// CHECK: "fa4.mbarrier_alloc"() {arrival = "commit", arrive_count = 1 : i64, index = 7 : i64, num_barriers = 5 : i64, sym_name = "kv_consumer"}
func.func @packed() {
  %s0 = "fa4.mbarrier_alloc"() {sym_name = "S0_consumer", num_barriers = 2, arrive_counts = array<i32: 256, 128>, arrival = "threads"} : () -> !fa4.mbarriers
  %kp = "fa4.mbarrier_alloc"() {sym_name = "kv_producer", num_barriers = 5, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %kc = "fa4.mbarrier_alloc"() {sym_name = "kv_consumer", num_barriers = 5, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %bars = "fa4.smem_region"() {sym_name = "mbarriers", bytes = 96, align = 8} : () -> !fa4.smem
  return
}

// -----

func.func @region_size_mismatch() {
  %a = "fa4.mbarrier_alloc"() {sym_name = "a", num_barriers = 3, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  // expected-error @+1 {{region 'mbarriers' must have 8 x 3 = 24 bytes for the 3 mbarriers declared, got 16}}
  %bars = "fa4.smem_region"() {sym_name = "mbarriers", bytes = 16, align = 8} : () -> !fa4.smem
  return
}

// -----

// expected-error @+1 {{mbarriers must number <= 64, got 65}}
func.func @too_many() {
  %a = "fa4.mbarrier_alloc"() {sym_name = "a", num_barriers = 65, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  return
}

// -----

// Without a barrier region one is declared before the first array, for fa4-allocate-smem to place;
// its name is the region option (default "mbarriers").
// CHECK-LABEL: func.func @region_added() attributes {fa4.mbarrier_region = "mbarriers", fa4.num_mbarriers = 3 : i64}
// CHECK-NEXT: "fa4.smem_region"() {align = 8 : i64, bytes = 24 : i64, sym_name = "mbarriers"}
// CHECK-NEXT: "fa4.mbarrier_alloc"() {arrival = "tx", arrive_count = 1 : i64, index = 0 : i64, num_barriers = 3 : i64, sym_name = "a"}
func.func @region_added() {
  %a = "fa4.mbarrier_alloc"() {sym_name = "a", num_barriers = 3, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  return
}
