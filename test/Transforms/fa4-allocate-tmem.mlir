// RUN: fa4-opt %s --split-input-file -p fa4-allocate-tmem --verify-diagnostics | FileCheck %s

// The FA4 d64 map: S0, S1 (BN = 192), O0, O1 (64 each) fill all 512 columns.
// CHECK-LABEL: func.func @fa4_d64() attributes {fa4.tmem_columns = 512 : i64}
// CHECK: "fa4.tmem_region"() {column = 0 : i64, columns = 192 : i64, sym_name = "S0"}
// CHECK: "fa4.tmem_region"() {column = 192 : i64, columns = 192 : i64, sym_name = "S1"}
// CHECK: "fa4.tmem_region"() {column = 384 : i64, columns = 64 : i64, sym_name = "O0"}
// CHECK: "fa4.tmem_region"() {column = 448 : i64, columns = 64 : i64, sym_name = "O1"}
func.func @fa4_d64() {
  %s0 = "fa4.tmem_region"() {sym_name = "S0", columns = 192} : () -> !fa4.tmem
  %s1 = "fa4.tmem_region"() {sym_name = "S1", columns = 192} : () -> !fa4.tmem
  %o0 = "fa4.tmem_region"() {sym_name = "O0", columns = 64} : () -> !fa4.tmem
  %o1 = "fa4.tmem_region"() {sym_name = "O1", columns = 64} : () -> !fa4.tmem
  return
}

// -----

// tcgen05.alloc takes a power of two >= 32.
// CHECK-LABEL: func.func @small() attributes {fa4.tmem_columns = 32 : i64}
// CHECK-LABEL: func.func @odd() attributes {fa4.tmem_columns = 256 : i64}
func.func @small() {
  %acc = "fa4.tmem_region"() {sym_name = "acc", columns = 16} : () -> !fa4.tmem
  return
}
func.func @odd() {
  %a = "fa4.tmem_region"() {sym_name = "a", columns = 130} : () -> !fa4.tmem
  %b = "fa4.tmem_region"() {sym_name = "b", columns = 30} : () -> !fa4.tmem
  return
}

// -----

// expected-error @+1 {{TMEM needs 576 columns, sm_100a has 512: 'S0' 256, 'S1' 256, 'O0' 64}}
func.func @overflow() {
  %s0 = "fa4.tmem_region"() {sym_name = "S0", columns = 256} : () -> !fa4.tmem
  %s1 = "fa4.tmem_region"() {sym_name = "S1", columns = 256} : () -> !fa4.tmem
  %o0 = "fa4.tmem_region"() {sym_name = "O0", columns = 64} : () -> !fa4.tmem
  return
}

// -----

module attributes {fa4.target = "sm_90a"} {
  func.func @hopper() {
    // expected-error @+1 {{'fa4.tmem_region' needs tensor memory, which sm_100a has and sm_90a has not}}
    %acc = "fa4.tmem_region"() {sym_name = "acc", columns = 64} : () -> !fa4.tmem
    return
  }
}

// -----

// The target can also come from the kernel's gpu.module, as fa4-compile and the lowering read it.
module attributes {gpu.container_module} {
  gpu.module @k [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
    gpu.func @hopper_kernel() kernel {
      // expected-error @+1 {{'fa4.tmem_region' needs tensor memory, which sm_100a has and sm_90a has not}}
      %acc = "fa4.tmem_region"() {sym_name = "acc", columns = 64} : () -> !fa4.tmem
      gpu.return
    }
  }
}
