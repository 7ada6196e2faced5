// RUN: fa4-opt %s --split-input-file -p fa4-attach-kernel-abi --verify-diagnostics | FileCheck %s

// Listed arguments become 128-byte by-value grid constants; others keep their attributes.
// CHECK-LABEL: llvm.func @k(
// CHECK-SAME: %{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
// CHECK-SAME: %{{.*}}: !llvm.ptr<1> {llvm.noalias},
// CHECK-SAME: %{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
// CHECK-SAME: attributes {nvvm.kernel}
llvm.func @k(%a: !llvm.ptr, %b: !llvm.ptr<1> {llvm.noalias}, %c: !llvm.ptr) attributes {nvvm.kernel, fa4.grid_constant_args = array<i32: 0, 2>} {
  llvm.return
}

// -----

gpu.module @m {
  // expected-error @+1 {{fa4-attach-kernel-abi must run after convert-gpu-to-nvvm (it annotates llvm.func arguments), got a gpu.func}}
  gpu.func @k(%a: !llvm.ptr) kernel attributes {fa4.grid_constant_args = array<i32: 0>} {
    gpu.return
  }
}
