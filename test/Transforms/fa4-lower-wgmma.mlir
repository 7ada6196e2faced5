// RUN: fa4-opt %s --split-input-file -p fa4-lower-wgmma --verify-diagnostics | FileCheck %s

// A chain of two wgmma: one fence before the first; K-major descriptors (128B swizzle: SBO 1024 B,
// layout 1 -> 4611686293305360384; 64B: SBO 512 B, layout 2 -> bit 63 set); the second K step starts
// 32 bytes in: its descriptors are the first's plus 2 (16-byte units), no address of their own;
// accumulate 0 is scale-d zero. Commit and wait close the group.
// CHECK-LABEL: func.func @wgmma
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: %[[A0:.*]] = arith.constant 4611686293305360384 : i64
// CHECK-NEXT: %[[DA:.*]] = arith.ori %{{.*}}, %[[A0]] : i64
// CHECK: llvm.getelementptr %{{.*}}[8192]
// CHECK: %[[B0:.*]] = arith.constant -9223371899415756800 : i64
// CHECK-NEXT: %[[DB:.*]] = arith.ori %{{.*}}, %[[B0]] : i64
// CHECK-NEXT: %[[R0:.*]] = nvvm.wgmma.mma_async %[[DA]], %[[DB]], %{{.*}}, <m = 64, n = 8, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-NOT: nvvm.wgmma.fence.aligned
// CHECK-NOT: llvm.getelementptr %{{.*}}[32]
// CHECK: %[[A2:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[DA1:.*]] = arith.addi %{{.*}}, %[[A2]] : i64
// CHECK-NOT: llvm.getelementptr %{{.*}}[8224]
// CHECK: llvm.getelementptr %{{.*}}[8192]
// CHECK: %[[B2:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[DB1:.*]] = arith.addi %{{.*}}, %[[B2]] : i64
// CHECK-NEXT: %[[R1:.*]] = nvvm.wgmma.mma_async %[[DA1]], %[[DB1]], %[[R0]], <m = 64, n = 8, k = 16>, D[<f32>, <one>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: call @use(%[[R1]])
module attributes {fa4.target = "sm_90a"} {
func.func @wgmma(%acc: !llvm.struct<(f32, f32, f32, f32)>) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 8192, align = 1024, swizzle = "128B", offset = 0} : () -> !fa4.smem
  %b = "fa4.smem_region"() {sym_name = "b", bytes = 8192, align = 512, swizzle = "64B", offset = 8192} : () -> !fa4.smem
  %r0 = "fa4.wgmma"(%a, %b, %acc) {n = 8, ab_type = "bf16", accumulate = 0} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  %r1 = "fa4.wgmma"(%a, %b, %r0) {n = 8, ab_type = "bf16", a_offset = 32, b_offset = 32} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  "fa4.wgmma_commit"() : () -> ()
  "fa4.wgmma_wait"() {pending = 0} : () -> ()
  func.call @use(%r1) : (!llvm.struct<(f32, f32, f32, f32)>) -> ()
  return
}
func.func private @use(!llvm.struct<(f32, f32, f32, f32)>)
}

// -----

// An MN-major B (a row-major K x N matrix as TMA loads it): LBO = 8192 B between 128B-wide N
// blocks, SBO = 1024 B, 128B swizzle (4611686293338849280), and B transposed (<row>).
// CHECK-LABEL: func.func @mn_major
// CHECK: %[[B0:.*]] = arith.constant 4611686293338849280 : i64
// CHECK-NEXT: %[[DB:.*]] = arith.ori %{{.*}}, %[[B0]] : i64
// CHECK-NEXT: nvvm.wgmma.mma_async %{{.*}}, %[[DB]], %{{.*}}, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
module attributes {fa4.target = "sm_90a"} {
func.func @mn_major(%acc: !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)> {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 8192, align = 1024, swizzle = "128B", offset = 0} : () -> !fa4.smem
  %b = "fa4.smem_region"() {sym_name = "b", bytes = 16384, align = 1024, swizzle = "128B", offset = 8192} : () -> !fa4.smem
  %r = "fa4.wgmma"(%a, %b, %acc) {n = 8, ab_type = "bf16", b_major = "mn", b_block_stride = 8192} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  return %r : !llvm.struct<(f32, f32, f32, f32)>
}
}

// -----

// The RS form (FA3's P@V: A from registers, B = V mn-major): inline PTX whose outputs are the
// accumulators, tied to the inputs ($4-$7), then A's four registers and B's descriptor; scale-d is
// the predicate (1: accumulate, 0: overwrite), B transposed (imm-trans-b 1). One fence for the
// chain: the moves that feed the second MMA do not break it. The fence after the wait passes every
// accumulator through an empty statement, so their readers stay below the wait.
// CHECK-LABEL: func.func @rs
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: %[[DB:.*]] = arith.ori %{{.*}}, %{{.*}} : i64
// CHECK: %[[A0:.*]] = llvm.extractelement %arg1[%{{.*}} : i32] : vector<4xi32>
// CHECK: %[[R0:.*]] = llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, 1, 0;\0Awgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {$0, $1, $2, $3}, {$8, $9, $10, $11}, $12, p, 1, 1, 1;\0A}", "=f,=f,=f,=f,0,1,2,3,r,r,r,r,l" %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[A0]], %{{.*}}, %{{.*}}, %{{.*}}, %[[DB]] : (f32, f32, f32, f32, i32, i32, i32, i32, i64) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-NOT: nvvm.wgmma.fence.aligned
// CHECK: %[[V128:.*]] = arith.constant 128 : i64
// CHECK-NEXT: %[[DB1:.*]] = arith.addi %{{.*}}, %[[V128]] : i64
// CHECK: llvm.extractvalue %[[R0]][0]
// CHECK: %[[R1:.*]] = llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, 0, 0;{{.*}}, %[[DB1]] : (f32
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: %[[F0:.*]] = llvm.extractvalue %[[R1]][0]
// CHECK: %[[F:.*]] = llvm.inline_asm has_side_effects "", "=f,=f,=f,=f,0,1,2,3" %[[F0]], %{{.*}}, %{{.*}}, %{{.*}} : (f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-NEXT: return %[[F]]
module attributes {fa4.target = "sm_90a"} {
func.func @rs(%acc: !llvm.struct<(f32, f32, f32, f32)>, %p0: vector<4xi32>, %p1: vector<4xi32>) -> !llvm.struct<(f32, f32, f32, f32)> {
  %v = "fa4.smem_region"() {sym_name = "v", bytes = 8192, align = 1024, swizzle = "128B", offset = 0} : () -> !fa4.smem
  %r0 = "fa4.wgmma"(%p0, %v, %acc) {n = 8, ab_type = "f16", b_major = "mn", b_block_stride = 4096} : (vector<4xi32>, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  %r1 = "fa4.wgmma"(%p1, %v, %r0) {n = 8, ab_type = "f16", accumulate = 0, b_offset = 2048, b_major = "mn", b_block_stride = 4096} : (vector<4xi32>, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  "fa4.wgmma_commit"() : () -> ()
  "fa4.wgmma_wait"() {pending = 0} : () -> ()
  %f = "fa4.wgmma_fence_acc"(%r1) : (!llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  return %f : !llvm.struct<(f32, f32, f32, f32)>
}
}

// -----

module attributes {fa4.target = "sm_100a"} {
func.func @no_wgmma_on_blackwell() {
  // expected-error @+1 {{'fa4.wgmma_commit' needs warpgroup MMA (wgmma), which sm_90a has and sm_100a has not (use fa4.tcgen05_mma there); compile for --target sm_90a}}
  "fa4.wgmma_commit"() : () -> ()
  return
}
}
