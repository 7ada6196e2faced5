// RUN: fa4-opt %s --split-input-file -p fa4-allocate-smem --verify-diagnostics | FileCheck %s

// Alignment pads, aliases reuse their base and add nothing.
// CHECK-LABEL: func.func @aligned() attributes {fa4.smem_bytes = 3100 : i64}
// CHECK: "fa4.smem_region"() {bytes = 100 : i64, offset = 0 : i64, sym_name = "a"}
// CHECK: "fa4.smem_region"() {align = 1024 : i64, bytes = 2048 : i64, offset = 1024 : i64, swizzle = "128B", sym_name = "tile"}
// CHECK: "fa4.smem_alias"(%{{.*}}) {bytes = 1024 : i64, offset = 1024 : i64, sym_name = "out"}
// CHECK: "fa4.smem_region"() {align = 8 : i64, bytes = 24 : i64, offset = 3072 : i64, sym_name = "mbarriers"}
// CHECK: "fa4.smem_region"() {align = 4 : i64, bytes = 4 : i64, offset = 3096 : i64, sym_name = "tmem_addr"}
func.func @aligned() {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 100} : () -> !fa4.smem
  %tile = "fa4.smem_region"() {sym_name = "tile", bytes = 2048, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %out = "fa4.smem_alias"(%tile) {sym_name = "out", bytes = 1024, offset = 1024} : (!fa4.smem) -> !fa4.smem
  %bars = "fa4.smem_region"() {sym_name = "mbarriers", bytes = 24, align = 8} : () -> !fa4.smem
  %addr = "fa4.smem_region"() {sym_name = "tmem_addr", bytes = 4, align = 4} : () -> !fa4.smem
  return
}

// -----

// Each function is placed on its own; offsets written before are replaced.
// CHECK-LABEL: func.func @second() attributes {fa4.smem_bytes = 16 : i64}
// CHECK: "fa4.smem_region"() {bytes = 16 : i64, offset = 0 : i64, sym_name = "x"}
func.func @second() {
  %x = "fa4.smem_region"() {sym_name = "x", bytes = 16, offset = 4096} : () -> !fa4.smem
  return
}

// -----

// The capacity is the target's (module attribute fa4.target, sm_90a here): 232448 B.
module attributes {fa4.target = "sm_90a"} {
  func.func @overflow() {
    %q = "fa4.smem_region"() {sym_name = "q", bytes = 65536, align = 1024} : () -> !fa4.smem
    // expected-error @+1 {{smem needs 241664 B, sm_90a has 232448 B: region 'kv' [65536, 241664) ends past the limit; shrink it or a region before it (e.g. fewer pipeline stages)}}
    %kv = "fa4.smem_region"() {sym_name = "kv", bytes = 176128, align = 1024} : () -> !fa4.smem
    return
  }
}

// -----

func.func @alias_of_argument(%base: !fa4.smem) {
  // expected-error @+1 {{'fa4.smem_alias' base must be a region declared in the same function, got a block argument}}
  %o = "fa4.smem_alias"(%base) {sym_name = "o", bytes = 16} : (!fa4.smem) -> !fa4.smem
  return
}

// -----

// expected-error @+1 {{target must be sm_90a or sm_100a, got 'sm_80'}}
module attributes {fa4.target = "sm_80"} {
  func.func @bad_target() {
    %q = "fa4.smem_region"() {sym_name = "q", bytes = 16} : () -> !fa4.smem
    return
  }
}
