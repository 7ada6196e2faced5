// fa4-verify changes nothing on valid IR; as a pass it can sit anywhere in a pipeline.
// RUN: fa4-opt %s -p 'fa4-verify' | FileCheck %s
// RUN: fa4-opt %s -p 'builtin.module(canonicalize,fa4-verify,cse,fa4-verify)' | FileCheck %s

// CHECK-LABEL: func.func @roles
// CHECK: "fa4.warp_specialize"() ({
// CHECK: "fa4.warp_role"() ({
// CHECK: }) {registers = 192 : i64, sym_name = "softmax", warps = array<i32: 0, 1, 2, 3, 4, 5, 6, 7>} : () -> ()
// CHECK: }) {registers = 88 : i64, sym_name = "correction", warps = array<i32: 8, 9, 10, 11>} : () -> ()
// CHECK: }) {registers = 40 : i64, sym_name = "mma", warps = array<i32: 12>} : () -> ()
// CHECK: }) {registers = 40 : i64, sym_name = "load", warps = array<i32: 13>} : () -> ()
// CHECK: }) {num_warps = 16 : i64} : () -> ()
func.func @roles() {
  // The reference FA4 role table with the idle warps 14-15 left without a role: setmaxnreg is
  // warpgroup-wide, so they cannot take 24 registers while warps 12-13 of their warpgroup take 40.
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "softmax", warps = array<i32: 0, 1, 2, 3, 4, 5, 6, 7>, registers = 192} : () -> ()
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "correction", warps = array<i32: 8, 9, 10, 11>, registers = 88} : () -> ()
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "mma", warps = array<i32: 12>, registers = 40} : () -> ()
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 13>, registers = 40} : () -> ()
    gpu.yield
  }) {num_warps = 16} : () -> ()
  return
}
