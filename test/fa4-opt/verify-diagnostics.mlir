// --verify-diagnostics passes when every expected diagnostic appears and nothing else does.
// RUN: fa4-opt %s --split-input-file --verify-diagnostics
// It fails (and says why) on a missing or an unexpected diagnostic.
// RUN: not fa4-opt %S/Inputs/expect-missing.mlir --verify-diagnostics 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not fa4-opt %S/Inputs/invariant.mlir --verify-diagnostics 2>&1 | FileCheck %s --check-prefix=UNEXPECTED

// MISSING: expect-missing.mlir:2: error: expected error "never reported" was not produced (on line 3)
// UNEXPECTED: invariant.mlir:4:8: error: unexpected error: 'fa4.pipeline_create' num_stages must be >= 1, got 0

func.func @same_line() {
  "fa4.tma_store_wait"() {pending = 64} : () -> () // expected-error {{pending must be <= 63, got 64}}
  return
}

// -----

func.func @below(%b: !fa4.mbarriers, %i: i32) {
  // expected-error @below {{tx_bytes must be >= 1, got 0}}
  "fa4.mbarrier_arrive_expect_tx"(%b, %i) {tx_bytes = 0} : (!fa4.mbarriers, i32) -> ()
  return
}

// -----

func.func @above(%i: i32) {
  "fa4.tma_store_wait"() {pending = -1} : () -> ()
  // expected-error @above {{pending must be >= 0, got -1}}
  return
}

// -----

func.func @parse_error() {
  // expected-error @+1 {{use of undeclared SSA value name}}
  "fa4.mbarrier_init"(%nope) : (!fa4.mbarriers) -> ()
  return
}
