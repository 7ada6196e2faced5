// Each chunk is parsed and printed on its own; outputs are joined by the marker.
// RUN: fa4-opt %s --split-input-file | FileCheck %s
// Reading stdin gives the same result.
// RUN: fa4-opt --split-input-file < %s | FileCheck %s
// RUN: fa4-opt - --split-input-file < %s | FileCheck %s
// The file right after the flag is the input, not a marker (markers are comments).
// RUN: fa4-opt --split-input-file %s | FileCheck %s

// CHECK-LABEL: func.func @first
// CHECK: "fa4.elect_one"
// CHECK: // -----
// CHECK-LABEL: func.func @second
// CHECK: "fa4.tma_store_wait"
func.func @first() {
  %e = "fa4.elect_one"() : () -> i1
  return
}

// -----

func.func @second() {
  "fa4.tma_store_wait"() : () -> ()
  return
}
