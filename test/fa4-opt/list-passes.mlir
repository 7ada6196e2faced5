// RUN: fa4-opt --list-passes | FileCheck %s
// CHECK: fa4 passes
// CHECK: fa4-allocate-mbarriers
// CHECK: fa4-allocate-smem
// CHECK: fa4-allocate-tmem
// CHECK: fa4-verify{{ +}}Every fa4 op satisfies
// CHECK: Upstream MLIR 22 passes
