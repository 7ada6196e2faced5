// The README's main job runs on the shipped example and must keep working.
// RUN: fa4-opt %S/../../examples/producer_consumer.mlir --pass-pipeline='builtin.module(fa4-verify,fa4-verify-protocol,canonicalize,cse)' | FileCheck %s
// CHECK-LABEL: func.func @producer_consumer
// CHECK: "fa4.pipeline_create"
// CHECK: }) {registers = 40 : i64, sym_name = "load", warps = array<i32: 4>}
// CHECK: }) {registers = 232 : i64, sym_name = "mma", warps = array<i32: 0, 1, 2, 3>}
