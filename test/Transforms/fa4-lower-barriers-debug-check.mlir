// RUN: fa4-opt %s -p 'fa4-lower-barriers{timeout=100}' | FileCheck %s --check-prefix=DEBUG
// RUN: fa4-opt %s -p fa4-lower-barriers | FileCheck %s --check-prefix=RELEASE

// fa4.debug_check in a debug build (timeout > 0): where the condition is false the thread prints
// the message (a newline appended) with its values and traps. In a release build the op is erased and
// nothing replaces it (the comparison it used stays for canonicalize to remove).
// DEBUG-LABEL: func.func @checks
// DEBUG-SAME: (%[[SEQ:[^:]*]]: i32, %[[PAGE:[^:]*]]: i32, %[[N:[^:]*]]: i32, %[[W:[^:]*]]: i64)
// DEBUG-NEXT: %[[OK:.*]] = arith.cmpi ult, %[[PAGE]], %[[N]] : i32
// DEBUG-NEXT: %[[TRUE:.*]] = arith.constant true
// DEBUG-NEXT: %[[BAD:.*]] = arith.xori %[[OK]], %[[TRUE]] : i1
// DEBUG-NEXT: scf.if %[[BAD]] {
// DEBUG-NEXT: gpu.printf "fa4 debug: block_table entry out of range: sequence %d, page %d (num_pages %d)\0A", %[[SEQ]], %[[PAGE]], %[[N]] : i32, i32, i32
// DEBUG-NEXT: llvm.intr.trap
// DEBUG-NEXT: }
// DEBUG-NEXT: %[[C7:.*]] = arith.constant 7 : i64
// DEBUG-NEXT: %[[OK64:.*]] = arith.cmpi ne, %[[W]], %[[C7]] : i64
// DEBUG-NEXT: %[[TRUE2:.*]] = arith.constant true
// DEBUG-NEXT: %[[BAD64:.*]] = arith.xori %[[OK64]], %[[TRUE2]] : i1
// DEBUG-NEXT: scf.if %[[BAD64]] {
// DEBUG-NEXT: gpu.printf "wide %lu = 0x%lx, 100%%\0A", %[[W]], %[[W]] : i64, i64
// DEBUG-NEXT: llvm.intr.trap
// DEBUG-NEXT: }
// DEBUG-NEXT: %[[C0:.*]] = arith.constant 0 : i32
// DEBUG-NEXT: %[[OK0:.*]] = arith.cmpi ne, %[[N]], %[[C0]] : i32
// DEBUG-NEXT: %[[TRUE3:.*]] = arith.constant true
// DEBUG-NEXT: %[[BAD0:.*]] = arith.xori %[[OK0]], %[[TRUE3]] : i1
// DEBUG-NEXT: scf.if %[[BAD0]] {
// DEBUG-NEXT: gpu.printf "no pages\0A"
// DEBUG-NEXT: llvm.intr.trap
// DEBUG-NEXT: }
// DEBUG-NEXT: return
// DEBUG-NOT: fa4.debug_check

// RELEASE-LABEL: func.func @checks
// RELEASE-SAME: (%[[SEQ:[^:]*]]: i32, %[[PAGE:[^:]*]]: i32, %[[N:[^:]*]]: i32, %[[W:[^:]*]]: i64)
// RELEASE-NEXT: arith.cmpi ult, %[[PAGE]], %[[N]] : i32
// RELEASE-NEXT: %[[C7:.*]] = arith.constant 7 : i64
// RELEASE-NEXT: arith.cmpi ne, %[[W]], %[[C7]] : i64
// RELEASE-NEXT: %[[C0:.*]] = arith.constant 0 : i32
// RELEASE-NEXT: arith.cmpi ne, %[[N]], %[[C0]] : i32
// RELEASE-NEXT: return
// RELEASE-NOT: fa4.debug_check
module attributes {fa4.target = "sm_90a"} {
func.func @checks(%seq: i32, %page: i32, %n: i32, %w: i64) {
  %ok = arith.cmpi ult, %page, %n : i32
  "fa4.debug_check"(%ok, %seq, %page, %n) {message = "fa4 debug: block_table entry out of range: sequence %d, page %d (num_pages %d)"} : (i1, i32, i32, i32) -> ()
  %c7 = arith.constant 7 : i64
  %ok64 = arith.cmpi ne, %w, %c7 : i64
  "fa4.debug_check"(%ok64, %w, %w) {message = "wide %lu = 0x%lx, 100%%\n"} : (i1, i64, i64) -> ()
  %c0 = arith.constant 0 : i32
  %ok0 = arith.cmpi ne, %n, %c0 : i32
  "fa4.debug_check"(%ok0) {message = "no pages"} : (i1) -> ()
  return
}
}
