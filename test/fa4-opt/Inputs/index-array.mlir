// An array<index: ...> attribute: MLIR 22's parser asserts ("only integers and floats have a bitwidth").
// The same text in a comment or a string is not code: array<index: 0>
func.func @k() attributes {note = "array<index: 0>"} {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "load", warps = array<index: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}
