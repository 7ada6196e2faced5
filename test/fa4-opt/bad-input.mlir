// Every kind of bad input: a non-zero exit, one located `error:` line, and no Python traceback.

// Malformed IR: the parser's location.
// RUN: not fa4-opt %S/Inputs/malformed.mlir 2>&1 | FileCheck %s --check-prefix=MALFORMED --implicit-check-not=Traceback
// MALFORMED: malformed.mlir:3:19: error: use of value '%a' expects different type than prior uses: 'i64' vs 'i32'

// An fa4 op in custom form: MLIR gives no location, fa4-opt finds the op.
// RUN: not fa4-opt %S/Inputs/custom-form.mlir 2>&1 | FileCheck %s --check-prefix=CUSTOM --implicit-check-not=Traceback
// CUSTOM: custom-form.mlir:2:8: error: 'fa4.elect_one' must be written in generic form, e.g. "fa4.elect_one"(operands) {attributes} : (types) -> (types): fa4 ops have no custom syntax in MLIR 22

// An op that breaks an fa4 invariant.
// RUN: not fa4-opt %S/Inputs/invariant.mlir 2>&1 | FileCheck %s --check-prefix=INVARIANT --implicit-check-not=Traceback
// INVARIANT: invariant.mlir:4:8: error: 'fa4.pipeline_create' num_stages must be >= 1, got 0

// An unknown pass, an fa4 pass nested under an anchor, a bad option, a broken pipeline string.
// RUN: not fa4-opt %S/Inputs/kernel.mlir -p 'builtin.module(fa4-verify,no-such-pass)' 2>&1 | FileCheck %s --check-prefix=UNKNOWN --implicit-check-not=Traceback
// UNKNOWN: <pass-pipeline>:1:27: error: 'no-such-pass' does not refer to a registered pass or pass pipeline
// UNKNOWN-SAME: (fa4-opt --list-passes lists the fa4 passes)
// UNKNOWN-NEXT: builtin.module(fa4-verify,no-such-pass)
// UNKNOWN-NEXT: {{^                          \^$}}
// RUN: not fa4-opt %S/Inputs/kernel.mlir -p 'builtin.module(func.func(fa4-verify))' 2>&1 | FileCheck %s --check-prefix=NESTED --implicit-check-not=Traceback
// NESTED: <pass-pipeline>:1:16: error: fa4 pass 'fa4-verify' cannot be nested under 'func.func'
// RUN: not fa4-opt %S/Inputs/kernel.mlir -p 'fa4-verify{level=2}' 2>&1 | FileCheck %s --check-prefix=FA4OPT --implicit-check-not=Traceback
// FA4OPT: <pass-pipeline>:1:1: error: pass 'fa4-verify' has no option 'level' (options: none)
// RUN: not fa4-opt %S/Inputs/kernel.mlir -p 'canonicalize{top-down=maybe}' 2>&1 | FileCheck %s --check-prefix=UPOPT --implicit-check-not=Traceback
// UPOPT: <pass-pipeline>:1:1: error: failed to add `canonicalize` with options `top-down=maybe`: for the --top-down option: 'maybe' is invalid value for boolean argument! Try 0 or 1
// RUN: not fa4-opt %S/Inputs/kernel.mlir -p 'builtin.module(canonicalize' 2>&1 | FileCheck %s --check-prefix=UNBALANCED --implicit-check-not=Traceback
// UNBALANCED: <pass-pipeline>:1:28: error: unbalanced brackets or quotes in pass pipeline
// RUN: not fa4-opt %S/Inputs/kernel.mlir -p 'canonicalize,,cse' 2>&1 | FileCheck %s --check-prefix=EMPTY --implicit-check-not=Traceback
// EMPTY: <pass-pipeline>:1:14: error: empty element in pass pipeline

// Inputs that abort MLIR 22 are refused before MLIR sees them.
// RUN: not fa4-opt %S/Inputs/kernel.mlir -p 'gpu-module-to-binary{format=offload}' 2>&1 | FileCheck %s --check-prefix=FORMAT --implicit-check-not=Traceback
// FORMAT: <pass-pipeline>:1:1: error: option 'format' must be one of llvm, offloading, isa, assembly, bin, binary, fatbin, fatbinary, got 'offload'
// RUN: not fa4-opt %S/Inputs/kernel.mlir -p 'gpu-lower-to-nvvm-pipeline{cubin-chip=sm_90a cubin-format=cubin}' 2>&1 | FileCheck %s --check-prefix=CUBINFMT --implicit-check-not=Traceback
// CUBINFMT: error: option 'cubin-format' must be one of {{.*}}, got 'cubin'
// RUN: not fa4-opt %S/Inputs/ptx80-sm100a.mlir -p 'gpu-module-to-binary{format=isa}' 2>&1 | FileCheck %s --check-prefix=PTXVER --implicit-check-not=Traceback
// PTXVER: ptx80-sm100a.mlir:2:3: error: #nvvm.target features must be +ptx86 or newer for chip 'sm_100a', got +ptx80
// RUN: not fa4-opt %S/Inputs/cta-only-tma-sm90a.mlir -p 'gpu-module-to-binary{format=isa}' 2>&1 | FileCheck %s --check-prefix=CTAONLY --implicit-check-not=Traceback
// CTAONLY: cta-only-tma-sm90a.mlir:5:7: error: 'nvvm.cp.async.bulk.tensor.shared.cluster.global' with isCTAOnly needs PTX 8.6 on sm_90a
// LLVM asserts on an alignment that is not a power of two (0 is "unspecified" and fine) and on a
// target feature without its sign.
// RUN: not fa4-opt %S/Inputs/bad-alignment.mlir -p 'gpu-module-to-binary{format=isa}' 2>&1 | FileCheck %s --check-prefix=ALIGN --implicit-check-not=aborted
// ALIGN: bad-alignment.mlir:4:5: error: 'llvm.func' argument 0 llvm.align must be a power of two <= 4294967296, got 48
// ALIGN-NEXT: bad-alignment.mlir:6:7: error: 'llvm.store' alignment must be 0 or a power of two <= 4294967296, got 7
// RUN: not fa4-opt %S/Inputs/unsigned-feature.mlir -p 'gpu-module-to-binary{format=isa}' 2>&1 | FileCheck %s --check-prefix=FEATURE --implicit-check-not=aborted
// FEATURE: unsigned-feature.mlir:3:3: error: #nvvm.target features must be comma-separated flags that each start with '+' or '-' (e.g. "+ptx86"), got "+ptx86,sm_100a"
// RUN: not fa4-opt %S/Inputs/cluster-dim.mlir -p 'gpu-module-to-binary{format=isa}' 2>&1 | FileCheck %s --check-prefix=CLUSTER --implicit-check-not=aborted
// CLUSTER: cluster-dim.mlir:5:5: error: 'llvm.func' nvvm.cluster_dim must have every dimension >= 1 (or all 0: no cluster), got [0, 1, 1]
// The parser asserts on extractvalue/insertvalue positions >= 2^32 and on 1- or 2-letter chips.
// RUN: not fa4-opt %S/Inputs/parse-aborts.mlir 2>&1 | FileCheck %s --check-prefix=PARSE --implicit-check-not=aborted
// PARSE: parse-aborts.mlir:3:39: error: #nvvm.target chip must be a name like "sm_100a", got "90"
// PARSE-NEXT: parse-aborts.mlir:5:12: error: 'llvm.extractvalue' position must be < 4294967296, got [4294967296]
// PARSE-NEXT: parse-aborts.mlir:6:13: error: 'llvm.extractvalue' position must be < 4294967296, got [8589934593]
// The parser asserts on an index-typed dense array; fa4-opt and fa4-compile refuse the text first.
// RUN: not fa4-opt %S/Inputs/index-array.mlir 2>&1 | FileCheck %s --check-prefix=INDEXARRAY --implicit-check-not=aborted
// INDEXARRAY: index-array.mlir:7:42: error: array element type must be an integer or float type, got 'index' (write array<i64: ...>)
// RUN: not fa4-compile %S/Inputs/index-array.mlir -o %t 2>&1 | FileCheck %s --check-prefix=INDEXCOMPILE --implicit-check-not=aborted
// INDEXCOMPILE: fa4-compile: error: stage 'parse' failed: the input would abort MLIR's parser
// INDEXCOMPILE-NEXT: index-array.mlir:7:42: error: array element type must be an integer or float type, got 'index'

// A missing input file and an unwritable output file.
// RUN: not fa4-opt %S/Inputs/does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=NOFILE --implicit-check-not=Traceback
// NOFILE: does-not-exist.mlir: error: cannot read input file: No such file or directory
// RUN: not fa4-opt %S/Inputs/not-utf8.mlir 2>&1 | FileCheck %s --check-prefix=NOTUTF8 --implicit-check-not=Traceback
// NOTUTF8: not-utf8.mlir: error: cannot read input file: 'utf-8' codec can't decode byte 0xff in position 0
// RUN: not fa4-opt %S/Inputs/kernel.mlir -o %S/Inputs/no-such-dir/out.mlir 2>&1 | FileCheck %s --check-prefix=NOOUT --implicit-check-not=Traceback
// NOOUT: out.mlir: error: cannot write output file: No such file or directory

// Bad command-line options are argparse errors (exit 2), also without a traceback.
// RUN: not fa4-opt --no-such-flag 2>&1 | FileCheck %s --check-prefix=FLAG --implicit-check-not=Traceback
// FLAG: fa4-opt: error: unrecognized arguments: --no-such-flag
