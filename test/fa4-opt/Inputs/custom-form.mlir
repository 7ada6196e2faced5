func.func @f() {
  %e = fa4.elect_one : i1
  return
}
