// RUN: fa4-opt %s --split-input-file -p fa4-lower-pipelines --verify-diagnostics | FileCheck %s

// Each step becomes an mbarrier op on barrier stage * sub_stages + sub_stage of its array; the
// commit and release arrive by their array's kind (tx -> expect_tx, threads -> arrive); advance
// wraps the stage at num_stages and flips the phase on the wrap.
// CHECK-LABEL: func.func @steps
// CHECK-SAME: (%[[S:.*]]: i32, %[[PH:.*]]: i32)
// CHECK: %[[FULL:.*]] = "fa4.mbarrier_alloc"() {{.*}}sym_name = "full"
// CHECK: %[[EMPTY:.*]] = "fa4.mbarrier_alloc"() {{.*}}sym_name = "empty"
// CHECK-NOT: fa4.pipeline_create
// CHECK: "fa4.mbarrier_try_wait_parity"(%[[EMPTY]], %[[S]], %[[PH]])
// CHECK: %[[TWO:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[X2:.*]] = arith.muli %[[S]], %[[TWO]] : i32
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[IDX:.*]] = arith.addi %[[X2]], %[[ONE]] : i32
// CHECK-NEXT: "fa4.mbarrier_arrive_expect_tx"(%[[FULL]], %[[IDX]]) {tx_bytes = 8192 : i64}
// CHECK: %[[IDX2:.*]] = arith.addi
// CHECK-NEXT: "fa4.mbarrier_try_wait_parity"(%[[FULL]], %[[IDX2]], %[[PH]])
// CHECK-NEXT: "fa4.mbarrier_arrive"(%[[EMPTY]], %[[S]])
// CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[INC:.*]] = arith.addi %[[S]], %[[C1]] : i32
// CHECK-NEXT: %[[N:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[WRAP:.*]] = arith.cmpi eq, %[[INC]], %[[N]] : i32
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[NS:.*]] = arith.select %[[WRAP]], %[[ZERO]], %[[INC]] : i32
// CHECK-NEXT: %[[FLIP:.*]] = arith.xori %[[PH]], %[[C1]] : i32
// CHECK-NEXT: %[[NP:.*]] = arith.select %[[WRAP]], %[[FLIP]], %[[PH]] : i32
// CHECK-NEXT: call @use(%[[NS]], %[[NP]])
func.func @steps(%s: i32, %ph: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 4, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2, producer_sub_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  "fa4.pipeline_producer_acquire"(%p, %s, %ph) : (!fa4.pipeline, i32, i32) -> ()
  "fa4.pipeline_producer_commit"(%p, %s) {sub_stage = 1, tx_bytes = 8192} : (!fa4.pipeline, i32) -> ()
  "fa4.pipeline_consumer_wait"(%p, %s, %ph) {sub_stage = 1} : (!fa4.pipeline, i32, i32) -> ()
  "fa4.pipeline_consumer_release"(%p, %s) : (!fa4.pipeline, i32) -> ()
  %n:2 = "fa4.pipeline_advance"(%p, %s, %ph) : (!fa4.pipeline, i32, i32) -> (i32, i32)
  func.call @use(%n#0, %n#1) : (i32, i32) -> ()
  return
}
func.func private @use(i32, i32)

// -----

// Producers start at (stage 0, phase 1), consumers at (0, 0); loops carry the state as iter_args.
// A commit-kind release becomes fa4.mma_commit.
// CHECK-LABEL: func.func @loop
// CHECK: %[[P0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[P1:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[C1:.*]] = arith.constant 0 : i32
// CHECK: scf.for {{.*}} iter_args(%[[S:.*]] = %[[P0]], %[[PH:.*]] = %[[P1]])
// CHECK: "fa4.mbarrier_try_wait_parity"(%{{.*}}, %[[S]], %[[PH]])
// CHECK: scf.for {{.*}} iter_args(%[[T:.*]] = %[[C0]], %[[TPH:.*]] = %[[C1]])
// CHECK: "fa4.mbarrier_try_wait_parity"(%{{.*}}, %[[T]], %[[TPH]])
// CHECK: "fa4.mma_commit"(%{{.*}}, %[[T]])
func.func @loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 3, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 3, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 3} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %ps:2 = "fa4.pipeline_initial_state"(%p) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
  %cs:2 = "fa4.pipeline_initial_state"(%p) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %ps#0, %ph = %ps#1) -> (i32, i32) {
    "fa4.pipeline_producer_acquire"(%p, %s, %ph) : (!fa4.pipeline, i32, i32) -> ()
    "fa4.pipeline_producer_commit"(%p, %s) {tx_bytes = 64} : (!fa4.pipeline, i32) -> ()
    %next:2 = "fa4.pipeline_advance"(%p, %s, %ph) : (!fa4.pipeline, i32, i32) -> (i32, i32)
    scf.yield %next#0, %next#1 : i32, i32
  }
  %q:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %cs#0, %ph = %cs#1) -> (i32, i32) {
    "fa4.pipeline_consumer_wait"(%p, %s, %ph) : (!fa4.pipeline, i32, i32) -> ()
    "fa4.pipeline_consumer_release"(%p, %s) : (!fa4.pipeline, i32) -> ()
    %next:2 = "fa4.pipeline_advance"(%p, %s, %ph) : (!fa4.pipeline, i32, i32) -> (i32, i32)
    scf.yield %next#0, %next#1 : i32, i32
  }
  return
}

// -----

func.func @pipeline_argument(%p: !fa4.pipeline, %s: i32, %ph: i32) {
  // expected-error @+1 {{'fa4.pipeline_consumer_wait' pipeline must come from fa4.pipeline_create in the same kernel}}
  "fa4.pipeline_consumer_wait"(%p, %s, %ph) : (!fa4.pipeline, i32, i32) -> ()
  return
}
