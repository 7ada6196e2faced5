// RUN: fa4-opt %s --split-input-file -p fa4-lower-warp-roles --verify-diagnostics | FileCheck %s

// Roles dispatch on warp = tid.x / 32 and start with setmaxregister relative to the entry cap
// (65536 / 384 threads -> 168: 40 decreases, 192 increases); warp 10, idle in the mma role's
// warpgroup, executes the same setmaxregister. Named barriers get ids in order of first use (epi 1,
// softmax 2); elect_one is elect.sync.
// CHECK-LABEL: func.func @roles() attributes {nvvm.minctasm = 1 : i32, nvvm.reqntid = array<i32: 384, 1, 1>}
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[C32:.*]] = arith.constant 32 : i32
// CHECK-NEXT: %[[WARP:.*]] = arith.divui %[[TID]], %[[C32]] : i32
// CHECK-NEXT: %[[C8:.*]] = arith.constant 8 : i32
// CHECK-NEXT: %[[IS8:.*]] = arith.cmpi eq, %[[WARP]], %[[C8]] : i32
// CHECK-NEXT: scf.if %[[IS8]] {
// CHECK-NEXT:   nvvm.setmaxregister decrease 40
// CHECK-NEXT:   nvvm.elect.sync -> i1
// CHECK-NEXT:   %[[ID1:.*]] = arith.constant 1 : i32
// CHECK-NEXT:   %[[N64:.*]] = arith.constant 64 : i32
// CHECK-NEXT:   nvvm.barrier.arrive id = %[[ID1]] number_of_threads = %[[N64]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[C7:.*]] = arith.constant 7 : i32
// CHECK-NEXT: %[[LE7:.*]] = arith.cmpi ule, %[[WARP]], %[[C7]] : i32
// CHECK-NEXT: scf.if %[[LE7]] {
// CHECK-NEXT:   nvvm.setmaxregister increase 192
// CHECK-NEXT:   %[[ID2:.*]] = arith.constant 2 : i32
// CHECK-NEXT:   %[[N256:.*]] = arith.constant 256 : i32
// CHECK-NEXT:   nvvm.barrier id = %[[ID2]] number_of_threads = %[[N256]]
// CHECK-NEXT:   %[[ID1B:.*]] = arith.constant 1 : i32
// CHECK-NEXT:   %[[N64B:.*]] = arith.constant 64 : i32
// CHECK-NEXT:   nvvm.barrier id = %[[ID1B]] number_of_threads = %[[N64B]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[C9:.*]] = arith.constant 9 : i32
// CHECK-NEXT: %[[IS9:.*]] = arith.cmpi eq, %[[WARP]], %[[C9]] : i32
// CHECK-NEXT: %[[C11:.*]] = arith.constant 11 : i32
// CHECK-NEXT: %[[IS11:.*]] = arith.cmpi eq, %[[WARP]], %[[C11]] : i32
// CHECK-NEXT: %[[MMA:.*]] = arith.ori %[[IS9]], %[[IS11]] : i1
// CHECK-NEXT: scf.if %[[MMA]] {
// CHECK-NEXT:   nvvm.setmaxregister decrease 40
// CHECK-NEXT: }
// CHECK-NEXT: %[[C10:.*]] = arith.constant 10 : i32
// CHECK-NEXT: %[[IS10:.*]] = arith.cmpi eq, %[[WARP]], %[[C10]] : i32
// CHECK-NEXT: scf.if %[[IS10]] {
// CHECK-NEXT:   nvvm.setmaxregister decrease 40
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @roles() {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      "fa4.named_barrier"() {sym_name = "epi", threads = 64, kind = "arrive"} : () -> ()
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 8>, registers = 40} : () -> ()
    "fa4.warp_role"() ({
      "fa4.named_barrier"() {sym_name = "softmax", threads = 256} : () -> ()
      "fa4.named_barrier"() {sym_name = "epi", threads = 64} : () -> ()
      gpu.yield
    }) {sym_name = "softmax", warps = array<i32: 0, 1, 2, 3, 4, 5, 6, 7>, registers = 192} : () -> ()
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "mma", warps = array<i32: 9, 11>, registers = 40} : () -> ()
    gpu.yield
  }) {num_warps = 12} : () -> ()
  return
}

// -----

// Without register budgets there is no setmaxregister and no minctasm; a role whose budget equals
// the entry cap (1024 threads -> 64) needs no setmaxregister either.
// CHECK-LABEL: func.func @plain() attributes {nvvm.minctasm = 1 : i32, nvvm.reqntid = array<i32: 1024, 1, 1>}
// CHECK-NOT: setmaxregister
// CHECK: return
func.func @plain() {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "all", warps = array<i32: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31>, registers = 64} : () -> ()
    gpu.yield
  }) {num_warps = 32} : () -> ()
  return
}

// CHECK-LABEL: func.func @no_budget() attributes {nvvm.reqntid = array<i32: 64, 1, 1>}
func.func @no_budget() {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "a", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

func.func @block_size_mismatch() attributes {nvvm.reqntid = array<i32: 128, 1, 1>} {
  // expected-error @+1 {{num_warps * 32 must equal the kernel's nvvm.reqntid (128 threads), got 256}}
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "a", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 8} : () -> ()
  return
}

// -----

func.func @two_specializations() {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "a", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  // expected-error @+1 {{'fa4.warp_specialize' must appear once per kernel, got a second one}}
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "a", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

func.func @sixteen_named_barriers() {
  "fa4.named_barrier"() {sym_name = "b1", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b2", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b3", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b4", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b5", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b6", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b7", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b8", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b9", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b10", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b11", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b12", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b13", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b14", threads = 32} : () -> ()
  "fa4.named_barrier"() {sym_name = "b15", threads = 32} : () -> ()
  // expected-error @+1 {{named barriers must number <= 15 per kernel (ids 1 to 15), got 16 with 'b16'}}
  "fa4.named_barrier"() {sym_name = "b16", threads = 32} : () -> ()
  return
}

// -----

// A family of named barriers: `sched` (count 3) takes ids 2..4 after `epi` (1), `tail` (count 2) 5..6; each op's
// id is the family's first plus its index (a run-time value), the same for sync and arrive.
// CHECK-LABEL: func.func @barrier_family
// CHECK:      %[[EPI:.*]] = arith.constant 1 : i32
// CHECK:      nvvm.barrier id = %[[EPI]]
// CHECK:      %[[BASE:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[N256:.*]] = arith.constant 256 : i32
// CHECK-NEXT: %[[ID:.*]] = arith.addi %[[BASE]], %[[W:.*]] : i32
// CHECK-NEXT: nvvm.barrier id = %[[ID]] number_of_threads = %[[N256]]
// CHECK:      %[[BASE2:.*]] = arith.constant 2 : i32
// CHECK:      %[[ID2:.*]] = arith.addi %[[BASE2]], %[[NEXT:.*]] : i32
// CHECK-NEXT: nvvm.barrier.arrive id = %[[ID2]]
// CHECK:      %[[TAIL:.*]] = arith.constant 5 : i32
// CHECK:      arith.addi %[[TAIL]], %[[W]] : i32
func.func @barrier_family(%w: i32, %next: i32) {
  "fa4.named_barrier"() {sym_name = "epi", threads = 64} : () -> ()
  "fa4.named_barrier"(%w) {sym_name = "sched", threads = 256, count = 3} : (i32) -> ()
  "fa4.named_barrier"(%next) {sym_name = "sched", threads = 256, count = 3, kind = "arrive"} : (i32) -> ()
  "fa4.named_barrier"(%w) {sym_name = "tail", threads = 128, count = 2} : (i32) -> ()
  return
}

// -----

func.func @family_count_differs(%w: i32) {
  "fa4.named_barrier"(%w) {sym_name = "sched", threads = 256, count = 3} : (i32) -> ()
  // expected-error @+1 {{the count of named barrier 'sched' must be the same at every use, got 3 and 2}}
  "fa4.named_barrier"(%w) {sym_name = "sched", threads = 256, count = 2} : (i32) -> ()
  return
}

// -----

func.func @family_past_fifteen_ids(%w: i32) {
  "fa4.named_barrier"(%w) {sym_name = "a", threads = 32, count = 8} : (i32) -> ()
  // expected-error @+1 {{named barriers must number <= 15 per kernel (ids 1 to 15), got 16 with 'b' (a family of 8)}}
  "fa4.named_barrier"(%w) {sym_name = "b", threads = 32, count = 8} : (i32) -> ()
  return
}
