// Text MLIR 22's parser aborts on; fa4-opt and fa4-compile refuse it first. Not in a comment: [4294967296]
module attributes {gpu.container_module} {
  gpu.module @k [#nvvm.target<chip = "90", features = "+ptx86">] {
    llvm.func @f(%s: !llvm.struct<(f32, f32)>) -> f32 {
      %x = llvm.extractvalue %s[4294967296] : !llvm.struct<(f32, f32)>
      %y = "llvm.extractvalue"(%s) <{position = array<i64: 8589934593>}> : (!llvm.struct<(f32, f32)>) -> f32
      llvm.return %x : f32
    }
  }
}
