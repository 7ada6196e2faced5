// fa4 passes and upstream passes in one pipeline, with and without the builtin.module anchor.
// RUN: fa4-opt %S/Inputs/kernel.mlir --pass-pipeline='builtin.module(fa4-verify,canonicalize,fa4-verify,cse)' | FileCheck %s
// RUN: fa4-opt %S/Inputs/kernel.mlir -p 'fa4-verify, canonicalize' | FileCheck %s
// RUN: fa4-opt %S/Inputs/kernel.mlir -p 'builtin.module(fa4-verify,canonicalize)' --mlir-print-ir-after-all -o %t 2>&1 | FileCheck %s --check-prefix=DUMP
// RUN: FileCheck %s < %t

// canonicalize folds 1 + 2; the fa4 ops have unknown effects, so they stay.
// CHECK-LABEL: func.func @k
// CHECK: %[[C3:.*]] = arith.constant 3 : i32
// CHECK-NOT: arith.addi
// CHECK: "fa4.pipeline_create"
// CHECK: return %[[C3]] : i32

// DUMP: IR Dump After VerifyPass (fa4-verify)
// DUMP: IR Dump After Canonicalizer (canonicalize)
// DUMP: arith.constant 3 : i32
