func.func @k() {
  %a = arith.constant 1 : i32
  %b = arith.addi %a, %a : i64
  return
}
