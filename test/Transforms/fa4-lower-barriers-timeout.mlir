// RUN: fa4-opt %s -p 'fa4-lower-barriers{timeout=250}' | FileCheck %s
// RUN: not fa4-opt %s -p 'fa4-lower-barriers{timeout=-1}' 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not fa4-opt %s -p 'fa4-lower-barriers{timeout=9223372036855}' 2>&1 | FileCheck %s --check-prefix=BIG

// Debug builds: the wait polls try_wait, and after 250 ms (250000000 ns of %globaltimer) prints the
// kernel, barrier, index, phase, block and thread, then traps.
// CHECK-LABEL: func.func @waits
// CHECK-SAME: (%[[I:[^:]*]]: i32, %[[PH:[^:]*]]: i32)
// CHECK: %[[BAR:.*]] = llvm.getelementptr
// CHECK-NEXT: %[[START:.*]] = nvvm.read.ptx.sreg.globaltimer : i64
// CHECK-NEXT: scf.while : () -> () {
// CHECK-NEXT: %[[TICKS:.*]] = arith.constant 10000000 : i32
// CHECK-NEXT: %[[DONE:.*]] = nvvm.mbarrier.try_wait %[[BAR]], %[[PH]], %[[TICKS]] : !llvm.ptr<3>, i32, i32 -> i1
// CHECK-NEXT: %[[TRUE:.*]] = arith.constant true
// CHECK-NEXT: %[[WAITING:.*]] = arith.xori %[[DONE]], %[[TRUE]] : i1
// CHECK-NEXT: scf.if %[[WAITING]] {
// CHECK-NEXT: %[[NOW:.*]] = nvvm.read.ptx.sreg.globaltimer : i64
// CHECK-NEXT: %[[ELAPSED:.*]] = arith.subi %[[NOW]], %[[START]] : i64
// CHECK-NEXT: %[[LIMIT:.*]] = arith.constant 250000000 : i64
// CHECK-NEXT: %[[LATE:.*]] = arith.cmpi ugt, %[[ELAPSED]], %[[LIMIT]] : i64
// CHECK-NEXT: scf.if %[[LATE]] {
// CHECK: gpu.printf "fa4 debug: barrier wait timed out after 250 ms: kernel waits, barrier full[%u] phase %u, block (%u,%u,%u) thread %u\0A", %[[I]], %[[PH]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : i32, i32, i32, i32, i32, i32
// CHECK-NEXT: llvm.intr.trap
// CHECK: scf.condition(%[[WAITING]])
// CHECK: } do {
// CHECK-NEXT: scf.yield
// CHECK-NOT: fa4.mbarrier_try_wait_parity

// NEG: error: option 'timeout' of fa4-lower-barriers must be >= 0 ms, got -1
// BIG: error: option 'timeout' of fa4-lower-barriers must be <= 9223372036854 ms (the 64-bit nanosecond timer), got 9223372036855
module attributes {fa4.target = "sm_90a"} {
func.func @waits(%i: i32, %ph: i32) attributes {fa4.mbarrier_region = "mbarriers"} {
  %bars = "fa4.smem_region"() {sym_name = "mbarriers", bytes = 16, align = 8, offset = 0} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx", index = 0} : () -> !fa4.mbarriers
  "fa4.mbarrier_try_wait_parity"(%full, %i, %ph) : (!fa4.mbarriers, i32, i32) -> ()
  return
}
}
