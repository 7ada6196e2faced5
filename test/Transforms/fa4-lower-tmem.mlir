// RUN: fa4-opt %s --split-input-file -p fa4-lower-tmem --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @tmem
// Allocation: the kernel's fa4.tmem_columns (256) into the slot at 32768, then the permit goes.
// CHECK: %[[SLOT:.*]] = llvm.getelementptr %{{.*}}[32768]
// CHECK-NEXT: %[[NCOLS:.*]] = arith.constant 256 : i32
// CHECK-NEXT: nvvm.tcgen05.alloc %[[SLOT]], %[[NCOLS]] : !llvm.ptr<3>, i32
// CHECK-NEXT: nvvm.tcgen05.relinquish_alloc_permit
// SS MMA: D = S (base + column 0); descriptors = (address >> 4) & 0x3FFF | SBO 1024 B, version bit,
// 128B swizzle (4611756662049538048); B starts 32 bytes in (16416); idesc bf16, f32 D, M = N = 128.
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK: %[[BASE:.*]] = llvm.load %{{.*}} : !llvm.ptr<3> -> i32
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[DCOL:.*]] = arith.addi %[[BASE]], %[[C0]] : i32
// CHECK-NEXT: %[[D:.*]] = llvm.inttoptr %[[DCOL]] : i32 to !llvm.ptr<6>
// The address passes through an opaque move, so LLVM cannot hoist one descriptor per MMA out of a
// loop (the single-thread MMA warp runs on few registers).
// CHECK: %[[AI:.*]] = llvm.ptrtoint %{{.*}} : !llvm.ptr<3> to i64
// CHECK-NEXT: %[[AP:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[AI]] : (i64) -> i64
// CHECK-NEXT: %[[FOUR:.*]] = arith.constant 4 : i64
// CHECK-NEXT: %[[AS:.*]] = arith.shrui %[[AP]], %[[FOUR]] : i64
// CHECK-NEXT: %[[MASK:.*]] = arith.constant 16383 : i64
// CHECK-NEXT: %[[AM:.*]] = arith.andi %[[AS]], %[[MASK]] : i64
// CHECK-NEXT: %[[BITS:.*]] = arith.constant 4611756662049538048 : i64
// CHECK-NEXT: %[[ADESC:.*]] = arith.ori %[[AM]], %[[BITS]] : i64
// CHECK: llvm.getelementptr %{{.*}}[16416]
// CHECK: %[[BDESC:.*]] = arith.ori
// CHECK-NEXT: %[[IDESC:.*]] = arith.constant 136316048 : i32
// CHECK-NEXT: nvvm.tcgen05.mma %[[D]], %[[ADESC]], %[[BDESC]], %[[IDESC]], %{{.*}} {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.tcgen05_mma_kind<f16>} : (!llvm.ptr<6>, i64, i64, i32, i1)
// TS MMA: A is TMEM region P (column 128); idesc f16, N = 64.
// CHECK: %[[C128:.*]] = arith.constant 128 : i32
// CHECK-NEXT: %[[PCOL:.*]] = arith.addi %{{.*}}, %[[C128]] : i32
// CHECK-NEXT: %[[P:.*]] = llvm.inttoptr %[[PCOL]] : i32 to !llvm.ptr<6>
// CHECK: %[[IDESC2:.*]] = arith.constant 135266320 : i32
// CHECK-NEXT: nvvm.tcgen05.mma %{{.*}}, %[[P]], %{{.*}}, %[[IDESC2]], %{{.*}} {{.*}} : (!llvm.ptr<6>, !llvm.ptr<6>, i64, i32, i1)
// Load: fence, address = base + column 0 + offset 8 + (warp % 4) << 21 (the warp's 32 lanes), wait.
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK: %[[C8:.*]] = arith.constant 8 : i32
// CHECK-NEXT: %[[LCOL:.*]] = arith.addi %{{.*}}, %[[C8]] : i32
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[C32:.*]] = arith.constant 32 : i32
// CHECK-NEXT: %[[WARP:.*]] = arith.divui %[[TID]], %[[C32]] : i32
// CHECK-NEXT: %[[C3:.*]] = arith.constant 3 : i32
// CHECK-NEXT: %[[QUARTER:.*]] = arith.andi %[[WARP]], %[[C3]] : i32
// CHECK-NEXT: %[[C21:.*]] = arith.constant 21 : i32
// CHECK-NEXT: %[[LANES:.*]] = arith.shli %[[QUARTER]], %[[C21]] : i32
// CHECK-NEXT: %[[LADDR:.*]] = arith.addi %[[LCOL]], %[[LANES]] : i32
// CHECK-NEXT: %[[LPTR:.*]] = llvm.inttoptr %[[LADDR]] : i32 to !llvm.ptr<6>
// CHECK-NEXT: %[[X:.*]] = nvvm.tcgen05.ld %[[LPTR]] {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<8xi32>
// CHECK-NEXT: nvvm.tcgen05.wait <load>
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// Store: fenced after the last thread sync, into P, then wait and fence before the next one.
// CHECK: nvvm.tcgen05.fence <after>
// CHECK: nvvm.tcgen05.st %{{.*}}, %[[X]] {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<8xi32>
// CHECK-NEXT: nvvm.tcgen05.wait <store>
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// Deallocation: the base read back from the slot.
// CHECK: %[[DNCOLS:.*]] = arith.constant 256 : i32
// CHECK-NEXT: %[[DBASE:.*]] = llvm.load %{{.*}} : !llvm.ptr<3> -> i32
// CHECK-NEXT: %[[DPTR:.*]] = llvm.inttoptr %[[DBASE]] : i32 to !llvm.ptr<6>
// CHECK-NEXT: nvvm.tcgen05.dealloc %[[DPTR]], %[[DNCOLS]] : !llvm.ptr<6>, i32
// CHECK-NOT: fa4.tmem_alloc
module attributes {fa4.target = "sm_100a"} {
func.func @tmem(%v: vector<8xi32>, %acc: i1) attributes {fa4.tmem_columns = 256 : i64} {
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4, offset = 32768} : () -> !fa4.smem
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "128B", offset = 0} : () -> !fa4.smem
  %b = "fa4.smem_region"() {sym_name = "b", bytes = 16384, align = 1024, swizzle = "128B", offset = 16384} : () -> !fa4.smem
  %s = "fa4.tmem_region"() {sym_name = "S", columns = 128, column = 0} : () -> !fa4.tmem
  %p = "fa4.tmem_region"() {sym_name = "P", columns = 64, column = 128} : () -> !fa4.tmem
  "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
  "fa4.tcgen05_mma"(%s, %a, %b, %acc) {m = 128, n = 128, ab_type = "bf16", b_offset = 32} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  "fa4.tcgen05_mma"(%s, %p, %b, %acc) {m = 128, n = 64, ab_type = "f16"} : (!fa4.tmem, !fa4.tmem, !fa4.smem, i1) -> ()
  %x = "fa4.tmem_load"(%s) {column_offset = 8} : (!fa4.tmem) -> vector<8xi32>
  "fa4.tmem_store"(%p, %x) : (!fa4.tmem, vector<8xi32>) -> ()
  "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
  return
}
}

// -----

// An accumulator stage: the region's address (base + column 256) plus stage * 128 columns; an
// MN-major B: LBO = 8192 B between 128B-wide N blocks, SBO = 1024 B, version bit, 128B swizzle
// (4611756662083026944), and the instruction descriptor's transpose-B bit 16 (bf16, M 128, N 64:
// 135333008).
// CHECK-LABEL: func.func @stage
// CHECK: %[[STEP:.*]] = arith.constant 128 : i32
// CHECK-NEXT: %[[OFF:.*]] = arith.muli %arg1, %[[STEP]] : i32
// CHECK: %[[COL:.*]] = arith.constant 256 : i32
// CHECK-NEXT: %[[REGION:.*]] = arith.addi %{{.*}}, %[[COL]] : i32
// CHECK-NEXT: %[[D:.*]] = arith.addi %[[REGION]], %[[OFF]] : i32
// CHECK-NEXT: %[[DP:.*]] = llvm.inttoptr %[[D]] : i32 to !llvm.ptr<6>
// CHECK: arith.constant 4611756662083026944 : i64
// CHECK: %[[IDESC:.*]] = arith.constant 135333008 : i32
// CHECK-NEXT: nvvm.tcgen05.mma %[[DP]], %{{.*}}, %{{.*}}, %[[IDESC]], %arg0
module attributes {fa4.target = "sm_100a"} {
func.func @stage(%acc: i1, %s: i32) attributes {fa4.tmem_columns = 512 : i64} {
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4, offset = 32768} : () -> !fa4.smem
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "128B", offset = 0} : () -> !fa4.smem
  %b = "fa4.smem_region"() {sym_name = "b", bytes = 16384, align = 1024, swizzle = "128B", offset = 16384} : () -> !fa4.smem
  %acc_ring = "fa4.tmem_region"() {sym_name = "accum", columns = 256, column = 256} : () -> !fa4.tmem
  "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
  %d = "fa4.tmem_stage"(%acc_ring, %s) {columns = 128} : (!fa4.tmem, i32) -> !fa4.tmem
  "fa4.tcgen05_mma"(%d, %a, %b, %acc) {m = 128, n = 64, ab_type = "bf16", b_major = "mn", b_block_stride = 8192} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  return
}
}

// -----

// A CTA pair allocates and commits with cta_group::2.
// CHECK-LABEL: func.func @pair
// CHECK: nvvm.tcgen05.alloc %{{.*}}, %{{.*}} {group = #nvvm.cta_group<cta_2>}
// CHECK-NEXT: nvvm.tcgen05.relinquish_alloc_permit {group = #nvvm.cta_group<cta_2>}
// CHECK: nvvm.tcgen05.mma {{.*}} {ctaGroup = #nvvm.cta_group<cta_2>, kind = #nvvm.tcgen05_mma_kind<f16>}
module attributes {fa4.target = "sm_100a"} {
func.func @pair(%acc: i1) {
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4, offset = 32768} : () -> !fa4.smem
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "64B", offset = 0} : () -> !fa4.smem
  %s = "fa4.tmem_region"() {sym_name = "S", columns = 256, column = 0} : () -> !fa4.tmem
  "fa4.tmem_alloc"(%slot) {columns = 256, cta_group = 2} : (!fa4.smem) -> ()
  "fa4.tcgen05_mma"(%s, %a, %a, %acc) {m = 256, n = 256, ab_type = "bf16", cta_group = 2} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  return
}
}

// -----

module attributes {fa4.target = "sm_90a"} {
func.func @no_tmem_on_hopper() {
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4, offset = 0} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.tmem_alloc' needs tensor memory (tcgen05), which sm_100a has and sm_90a has not; compile for --target sm_100a}}
  "fa4.tmem_alloc"(%slot) {columns = 32} : (!fa4.smem) -> ()
  return
}
}

// -----

func.func @columns_unknown() {
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4, offset = 0} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.tmem_alloc' columns must be set, or fa4-allocate-tmem run first to set the kernel's fa4.tmem_columns; got neither}}
  "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
  return
}

// -----

func.func @no_allocation() {
  %s = "fa4.tmem_region"() {sym_name = "S", columns = 32, column = 0} : () -> !fa4.tmem
  // expected-error @+1 {{the kernel must allocate tensor memory with exactly one fa4.tmem_alloc, got 0}}
  %x = "fa4.tmem_load"(%s) : (!fa4.tmem) -> vector<2xi32>
  return
}

// -----

func.func @unplaced_tmem_region() {
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4, offset = 0} : () -> !fa4.smem
  "fa4.tmem_alloc"(%slot) {columns = 32} : (!fa4.smem) -> ()
  // expected-error @+1 {{'fa4.tmem_region' 'S' has no column: run fa4-allocate-tmem before lowering}}
  %s = "fa4.tmem_region"() {sym_name = "S", columns = 32} : () -> !fa4.tmem
  %x = "fa4.tmem_load"(%s) : (!fa4.tmem) -> vector<2xi32>
  return
}

// -----

// expected-error @+1 {{target must be sm_90a or sm_100a, got 'sm_89'}}
module attributes {fa4.target = "sm_89"} {
  func.func @unsupported_target() {
    return
  }
}
