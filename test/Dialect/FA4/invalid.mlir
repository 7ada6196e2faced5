// Every fa4 verifier message, one case each.
// RUN: fa4-opt %s --split-input-file --verify-diagnostics
//
// Generic field checks of fa4_mlir/core/declare.py first (one per check kind), then every message of
// the verify() hooks of dialects/fa4.py (a shared helper once per op that calls it), then errors IRDL
// reports at parse time. Two generic messages have no case because IRDL rejects the IR first:
// "<attr> must be set (...), got none" (only required attributes can be missing) and
// "region '<name>' must have exactly one block" (see @irdl_region_with_two_blocks).

// ===== Generic field checks (fa4_mlir/core/declare.py) =====

func.func @int_below_min() {
  // expected-error @+1 {{'fa4.smem_region' bytes must be >= 1, got 0}}
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 0} : () -> !fa4.smem
  return
}

// -----

func.func @int_above_max() {
  // expected-error @+1 {{'fa4.tmem_region' columns must be <= 512, got 513}}
  %s = "fa4.tmem_region"() {sym_name = "S0", columns = 513} : () -> !fa4.tmem
  return
}

// -----

func.func @int_not_power_of_two() {
  // expected-error @+1 {{'fa4.smem_region' align must be a power of two, got 48}}
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 1024, align = 48} : () -> !fa4.smem
  return
}

// -----

func.func @int_not_multiple_of() {
  "fa4.warp_specialize"() ({
    // expected-error @+1 {{'fa4.warp_role' registers must be a multiple of 8, got 44}}
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 0>, registers = 44} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

func.func @tma_dst_offset_not_multiple_of_128(%tmap: !fa4.tensormap, %x: i32) {
  %k = "fa4.smem_region"() {sym_name = "k", bytes = 16384, align = 128} : () -> !fa4.smem
  %b = "fa4.mbarrier_alloc"() {sym_name = "k_full", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{'fa4.tma_load' dst_offset must be a multiple of 128, got 64}}
  "fa4.tma_load"(%tmap, %k, %b, %c0, %x) {bytes = 8192, dst_offset = 64} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32) -> ()
  return
}

// -----

func.func @str_empty() {
  // expected-error @+1 {{'fa4.mbarrier_alloc' sym_name must be a non-empty string, got ""}}
  %b = "fa4.mbarrier_alloc"() {sym_name = "", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  return
}

// -----

func.func @enum_not_a_member() {
  // expected-error @+1 {{'fa4.mbarrier_alloc' arrival must be one of 'threads', 'tx', 'commit', got 'cluster'}}
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 1, arrive_count = 1, arrival = "cluster"} : () -> !fa4.mbarriers
  return
}

// -----

func.func @multicast_mask_on_a_tx_array() {
  // expected-error @+1 {{'fa4.mbarrier_alloc' multicast_mask must be set on 'threads' arrays only (TMA and MMA completions name their CTAs themselves), got arrival 'tx'}}
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 1, arrive_count = 1, arrival = "tx", multicast_mask = 3} : () -> !fa4.mbarriers
  return
}

// -----

func.func @multicast_mask_on_a_pair_array() {
  // expected-error @+1 {{'fa4.mbarrier_alloc' multicast_mask must not be set with cta_group = 2 (a pair's thread arrivals go to the leader CTA), got both}}
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 1, arrive_count = 8, arrival = "threads", cta_group = 2, multicast_mask = 3} : () -> !fa4.mbarriers
  return
}

// -----

func.func @enum_defaulted_not_a_member() {
  // expected-error @+1 {{'fa4.smem_region' swizzle must be one of 'none', '32B', '64B', '128B', got '16B'}}
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 1024, swizzle = "16B"} : () -> !fa4.smem
  return
}

// -----

func.func @enum_side_not_a_member(%full: !fa4.mbarriers, %empty: !fa4.mbarriers) {
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  // expected-error @+1 {{'fa4.pipeline_initial_state' side must be one of 'producer', 'consumer', got 'both'}}
  %s:2 = "fa4.pipeline_initial_state"(%p) {side = "both"} : (!fa4.pipeline) -> (i32, i32)
  return
}

// -----

func.func @array_too_short() {
  "fa4.warp_specialize"() ({
    // expected-error @+1 {{'fa4.warp_role' warps must have at least 1 element(s), got 0}}
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "idle", warps = array<i32>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

func.func @array_element_below_min() {
  "fa4.warp_specialize"() ({
    // expected-error @+1 {{'fa4.warp_role' warps elements must be >= 0, got -1}}
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "load", warps = array<i32: -1>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

func.func @optional_int_wrong_kind() {
  // expected-error @+1 {{'fa4.smem_region' offset must be an i64 integer (>= 0, <= 232448), got "64"}}
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 1024, offset = "64"} : () -> !fa4.smem
  return
}

// -----

func.func @defaulted_enum_wrong_kind() {
  // expected-error @+1 {{'fa4.smem_region' swizzle must be one of "none", "32B", "64B", "128B", got 128 : i64}}
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 1024, swizzle = 128} : () -> !fa4.smem
  return
}

// -----

// `true` is an i1 integer, so IRDL's builtin.integer base accepts it; the Python kind check does not.
func.func @required_int_given_bool(%full: !fa4.mbarriers, %empty: !fa4.mbarriers) {
  // expected-error @+1 {{'fa4.pipeline_create' num_stages must be an i64 integer (>= 1, <= 64), got true}}
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = true} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  return
}

// -----

// IRDL accepts any dense array here; Python rejects i64. Outside fa4.warp_specialize on purpose:
// that op's verify() decodes its roles' warps and raises an internal error on array<i64>.
func.func @required_array_of_i64() {
  // expected-error @+1 {{'fa4.warp_role' warps must be an array<i32>, got array<i64: 0>}}
  "fa4.warp_role"() ({
    gpu.yield
  }) {sym_name = "load", warps = array<i64: 0>} : () -> ()
  return
}

// -----

func.func @region_block_arguments() {
  "fa4.warp_specialize"() ({
    // expected-error @+1 {{'fa4.warp_role' region 'body' must have no block arguments, got 1}}
    "fa4.warp_role"() ({
    ^bb0(%arg: i32):
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// ===== Shared and tensor memory =====

func.func @smem_align_below_swizzle_atom() {
  // expected-error @+1 {{'fa4.smem_region' align must be >= 1024 for a 128B-swizzled region, got 512}}
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 65536, align = 512, swizzle = "128B"} : () -> !fa4.smem
  return
}

// -----

func.func @smem_offset_not_multiple_of_align() {
  // expected-error @+1 {{'fa4.smem_region' offset must be a multiple of align (128), got 64}}
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 1024, align = 128, offset = 64} : () -> !fa4.smem
  return
}

// -----

func.func @smem_alias_past_base_end() {
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 1024} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.smem_alias' offset + bytes must be <= 1024 (the size of 'q'), got 1280}}
  %o = "fa4.smem_alias"(%q) {sym_name = "o", bytes = 512, offset = 768} : (!fa4.smem) -> !fa4.smem
  return
}

// -----

func.func @tmem_past_last_column() {
  // expected-error @+1 {{'fa4.tmem_region' column + columns must be <= 512, got 576}}
  %s = "fa4.tmem_region"() {sym_name = "S1", columns = 128, column = 448} : () -> !fa4.tmem
  return
}

// -----

// ===== Mbarriers =====

func.func @arrive_index_out_of_range() {
  %b = "fa4.mbarrier_alloc"() {sym_name = "softmax_done", num_barriers = 2, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'fa4.mbarrier_arrive' index must be in [0, 2) for mbarrier array 'softmax_done', got 2}}
  "fa4.mbarrier_arrive"(%b, %c2) : (!fa4.mbarriers, i32) -> ()
  return
}

// -----

func.func @arrive_on_tx_array(%i: i32) {
  %b = "fa4.mbarrier_alloc"() {sym_name = "q_full", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  // expected-error @+1 {{'fa4.mbarrier_arrive' barriers must arrive by 'threads' (fa4.mbarrier_arrive is a thread arrival), got mbarrier array 'q_full' with arrival 'tx'}}
  "fa4.mbarrier_arrive"(%b, %i) : (!fa4.mbarriers, i32) -> ()
  return
}

// -----

func.func @expect_tx_index_negative() {
  %b = "fa4.mbarrier_alloc"() {sym_name = "q_full", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %cm1 = arith.constant -1 : i32
  // expected-error @+1 {{'fa4.mbarrier_arrive_expect_tx' index must be in [0, 1) for mbarrier array 'q_full', got -1}}
  "fa4.mbarrier_arrive_expect_tx"(%b, %cm1) {tx_bytes = 16384} : (!fa4.mbarriers, i32) -> ()
  return
}

// -----

func.func @expect_tx_on_threads_array(%i: i32) {
  %b = "fa4.mbarrier_alloc"() {sym_name = "softmax_done", num_barriers = 1, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  // expected-error @+1 {{'fa4.mbarrier_arrive_expect_tx' barriers must arrive by 'tx' (expect_tx pairs with TMA completion), got mbarrier array 'softmax_done' with arrival 'threads'}}
  "fa4.mbarrier_arrive_expect_tx"(%b, %i) {tx_bytes = 16384} : (!fa4.mbarriers, i32) -> ()
  return
}

// -----

func.func @wait_index_out_of_range(%phase: i32) {
  %b = "fa4.mbarrier_alloc"() {sym_name = "q_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %c3 = arith.constant 3 : i32
  // expected-error @+1 {{'fa4.mbarrier_try_wait_parity' index must be in [0, 2) for mbarrier array 'q_full', got 3}}
  "fa4.mbarrier_try_wait_parity"(%b, %c3, %phase) : (!fa4.mbarriers, i32, i32) -> ()
  return
}

// -----

func.func @wait_phase_not_parity(%i: i32) {
  %b = "fa4.mbarrier_alloc"() {sym_name = "q_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'fa4.mbarrier_try_wait_parity' phase must be 0 or 1, got 2}}
  "fa4.mbarrier_try_wait_parity"(%b, %i, %c2) : (!fa4.mbarriers, i32, i32) -> ()
  return
}

// -----

func.func @mma_commit_index_out_of_range() {
  %b = "fa4.mbarrier_alloc"() {sym_name = "S_full", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'fa4.mma_commit' index must be in [0, 2) for mbarrier array 'S_full', got 2}}
  "fa4.mma_commit"(%b, %c2) : (!fa4.mbarriers, i32) -> ()
  return
}

// -----

func.func @mma_commit_on_threads_array(%i: i32) {
  %b = "fa4.mbarrier_alloc"() {sym_name = "P_full", num_barriers = 2, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  // expected-error @+1 {{'fa4.mma_commit' barriers must arrive by 'commit' (fa4.mma_commit is an MMA-completion arrival), got mbarrier array 'P_full' with arrival 'threads'}}
  "fa4.mma_commit"(%b, %i) : (!fa4.mbarriers, i32) -> ()
  return
}

// -----

// ===== Pipelines =====

func.func @pipeline_same_array_twice() {
  %b = "fa4.mbarrier_alloc"() {sym_name = "kv", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  // expected-error @+1 {{'fa4.pipeline_create' full and empty must be different mbarrier arrays, got the same array twice}}
  %p = "fa4.pipeline_create"(%b, %b) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  return
}

// -----

func.func @pipeline_full_count() {
  %full = "fa4.mbarrier_alloc"() {sym_name = "k_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "k_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  // expected-error @+1 {{'fa4.pipeline_create' full must hold num_stages * producer_sub_stages = 4 barriers, got 'k_full' with 2}}
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "k", num_stages = 2, producer_sub_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  return
}

// -----

func.func @pipeline_empty_count() {
  %full = "fa4.mbarrier_alloc"() {sym_name = "k_full", num_barriers = 3, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "k_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  // expected-error @+1 {{'fa4.pipeline_create' empty must hold num_stages * consumer_sub_stages = 3 barriers, got 'k_empty' with 2}}
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "k", num_stages = 3} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  return
}

// -----

func.func @advance_stage_out_of_range(%phase: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'fa4.pipeline_advance' stage must be in [0, 2) for pipeline 'kv', got 2}}
  %n:2 = "fa4.pipeline_advance"(%p, %c2, %phase) : (!fa4.pipeline, i32, i32) -> (i32, i32)
  return
}

// -----

func.func @advance_phase_not_parity(%stage: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %c3 = arith.constant 3 : i32
  // expected-error @+1 {{'fa4.pipeline_advance' phase must be 0 or 1, got 3}}
  %n:2 = "fa4.pipeline_advance"(%p, %stage, %c3) : (!fa4.pipeline, i32, i32) -> (i32, i32)
  return
}

// -----

func.func @acquire_sub_stage_out_of_range(%stage: i32, %phase: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  // expected-error @+1 {{'fa4.pipeline_producer_acquire' sub_stage must be < 1 (consumer_sub_stages of 'kv'), got 1}}
  "fa4.pipeline_producer_acquire"(%p, %stage, %phase) {sub_stage = 1} : (!fa4.pipeline, i32, i32) -> ()
  return
}

// -----

func.func @acquire_stage_out_of_range(%phase: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %cm1 = arith.constant -1 : i32
  // expected-error @+1 {{'fa4.pipeline_producer_acquire' stage must be in [0, 2) for pipeline 'kv', got -1}}
  "fa4.pipeline_producer_acquire"(%p, %cm1, %phase) : (!fa4.pipeline, i32, i32) -> ()
  return
}

// -----

func.func @acquire_phase_not_parity(%stage: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'fa4.pipeline_producer_acquire' phase must be 0 or 1, got 2}}
  "fa4.pipeline_producer_acquire"(%p, %stage, %c2) : (!fa4.pipeline, i32, i32) -> ()
  return
}

// -----

func.func @commit_sub_stage_out_of_range(%stage: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  // expected-error @+1 {{'fa4.pipeline_producer_commit' sub_stage must be < 1 (producer_sub_stages of 'kv'), got 1}}
  "fa4.pipeline_producer_commit"(%p, %stage) {sub_stage = 1, tx_bytes = 16384} : (!fa4.pipeline, i32) -> ()
  return
}

// -----

func.func @commit_stage_out_of_range() {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'fa4.pipeline_producer_commit' stage must be in [0, 2) for pipeline 'kv', got 2}}
  "fa4.pipeline_producer_commit"(%p, %c2) {tx_bytes = 16384} : (!fa4.pipeline, i32) -> ()
  return
}

// -----

func.func @commit_tx_without_tx_bytes(%stage: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  // expected-error @+1 {{'fa4.pipeline_producer_commit' tx_bytes must be set when the full barriers ('kv_full') arrive by 'tx', got none}}
  "fa4.pipeline_producer_commit"(%p, %stage) : (!fa4.pipeline, i32) -> ()
  return
}

// -----

func.func @commit_tx_bytes_on_commit_array(%stage: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "S_full", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "S_empty", num_barriers = 2, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "S", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  // expected-error @+1 {{'fa4.pipeline_producer_commit' tx_bytes must be unset when the full barriers ('S_full') arrive by 'commit', got 16384}}
  "fa4.pipeline_producer_commit"(%p, %stage) {tx_bytes = 16384} : (!fa4.pipeline, i32) -> ()
  return
}

// -----

func.func @wait_sub_stage_out_of_range(%stage: i32, %phase: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 4, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2, producer_sub_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  // expected-error @+1 {{'fa4.pipeline_consumer_wait' sub_stage must be < 2 (producer_sub_stages of 'kv'), got 2}}
  "fa4.pipeline_consumer_wait"(%p, %stage, %phase) {sub_stage = 2} : (!fa4.pipeline, i32, i32) -> ()
  return
}

// -----

func.func @wait_stage_out_of_range(%phase: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %c5 = arith.constant 5 : i32
  // expected-error @+1 {{'fa4.pipeline_consumer_wait' stage must be in [0, 2) for pipeline 'kv', got 5}}
  "fa4.pipeline_consumer_wait"(%p, %c5, %phase) : (!fa4.pipeline, i32, i32) -> ()
  return
}

// -----

func.func @wait_phase_not_parity_pipeline(%stage: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %cm1 = arith.constant -1 : i32
  // expected-error @+1 {{'fa4.pipeline_consumer_wait' phase must be 0 or 1, got -1}}
  "fa4.pipeline_consumer_wait"(%p, %stage, %cm1) : (!fa4.pipeline, i32, i32) -> ()
  return
}

// -----

func.func @release_sub_stage_out_of_range(%stage: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 4, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2, consumer_sub_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  // expected-error @+1 {{'fa4.pipeline_consumer_release' sub_stage must be < 2 (consumer_sub_stages of 'kv'), got 3}}
  "fa4.pipeline_consumer_release"(%p, %stage) {sub_stage = 3} : (!fa4.pipeline, i32) -> ()
  return
}

// -----

func.func @release_stage_out_of_range() {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'fa4.pipeline_consumer_release' stage must be in [0, 2) for pipeline 'kv', got 2}}
  "fa4.pipeline_consumer_release"(%p, %c2) : (!fa4.pipeline, i32) -> ()
  return
}

// -----

func.func @release_on_tx_empty_array(%stage: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "kv_full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "kv_empty", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  // expected-error @+1 {{'fa4.pipeline_consumer_release' empty barriers must arrive by 'threads' or 'commit' (nothing delivers transaction bytes to a release), got 'kv_empty' with arrival 'tx'}}
  "fa4.pipeline_consumer_release"(%p, %stage) : (!fa4.pipeline, i32) -> ()
  return
}

// -----

// ===== Warp roles =====

func.func @warp_specialize_non_role_op() {
  // expected-error @+1 {{'fa4.warp_specialize' body must hold only 'fa4.warp_role' ops, got 'fa4.elect_one'}}
  "fa4.warp_specialize"() ({
    %e = "fa4.elect_one"() : () -> i1
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

func.func @warp_specialize_no_roles() {
  // expected-error @+1 {{'fa4.warp_specialize' body must hold at least one 'fa4.warp_role', got none}}
  "fa4.warp_specialize"() ({
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

func.func @warp_specialize_warp_out_of_range() {
  // expected-error @+1 {{'fa4.warp_specialize' warps of role 'load' must be < num_warps (4), got 4}}
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 4>} : () -> ()
    gpu.yield
  }) {num_warps = 4} : () -> ()
  return
}

// -----

func.func @warp_specialize_warp_in_two_roles() {
  // expected-error @+1 {{'fa4.warp_specialize' warp 0 must belong to one role, got 'mma' and 'load'}}
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "mma", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 1, 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

func.func @warp_specialize_warpgroup_register_mismatch() {
  // expected-error @+1 {{'fa4.warp_specialize' registers of roles sharing warpgroup 0 must be equal (setmaxnreg is warpgroup-wide), got 40 for 'mma' and 48 for 'load'}}
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "mma", warps = array<i32: 0>, registers = 40} : () -> ()
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 1>, registers = 48} : () -> ()
    gpu.yield
  }) {num_warps = 4} : () -> ()
  return
}

// -----

func.func @warp_specialize_register_file_overflow() {
  // expected-error @+1 {{'fa4.warp_specialize' register budgets must total <= 65536 per CTA, got 98304 (sum of registers x 128 threads per warpgroup)}}
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "softmax0", warps = array<i32: 0, 1, 2, 3>, registers = 256} : () -> ()
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "softmax1", warps = array<i32: 4, 5, 6, 7>, registers = 256} : () -> ()
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "correction", warps = array<i32: 8, 9, 10, 11>, registers = 256} : () -> ()
    gpu.yield
  }) {num_warps = 12} : () -> ()
  return
}

// -----

// 384 threads start with 168 registers each (64512 in all): budgets past that would make a
// setmaxnreg.inc wait forever for registers no warpgroup frees.
func.func @warp_specialize_register_pool_overflow() {
  // expected-error @+1 {{'fa4.warp_specialize' register budgets must total <= 64512 per CTA of 384 threads (the entry cap 168 x 384: setmaxnreg.inc waits for registers the other warpgroups freed, forever past that), got 65536 (registers x 128 threads per warpgroup, 168 for a warpgroup without a budget)}}
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "consumer0", warps = array<i32: 0, 1, 2, 3>, registers = 240} : () -> ()
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "consumer1", warps = array<i32: 4, 5, 6, 7>, registers = 240} : () -> ()
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 8>, registers = 32} : () -> ()
    gpu.yield
  }) {num_warps = 12} : () -> ()
  return
}

// -----

// A repeated warp is reported once, on the role.
func.func @warp_role_repeated_warp() {
  "fa4.warp_specialize"() ({
    // expected-error @+1 {{'fa4.warp_role' warps must be distinct, got [0, 0]}}
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 0, 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

func.func @warp_role_outside_warp_specialize() {
  // expected-error @+1 {{'fa4.warp_role' parent must be 'fa4.warp_specialize', got 'func.func'}}
  "fa4.warp_role"() ({
    gpu.yield
  }) {sym_name = "load", warps = array<i32: 0>} : () -> ()
  return
}

// -----

// ===== TMA =====

func.func @tma_load_no_coords(%tmap: !fa4.tensormap) {
  %k = "fa4.smem_region"() {sym_name = "k", bytes = 16384, align = 128} : () -> !fa4.smem
  %b = "fa4.mbarrier_alloc"() {sym_name = "k_full", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{'fa4.tma_load' coords must have 1 to 5 elements, got 0}}
  "fa4.tma_load"(%tmap, %k, %b, %c0) {bytes = 16384} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32) -> ()
  return
}

// -----

func.func @tma_load_index_out_of_range(%tmap: !fa4.tensormap, %x: i32) {
  %k = "fa4.smem_region"() {sym_name = "k", bytes = 16384, align = 128} : () -> !fa4.smem
  %b = "fa4.mbarrier_alloc"() {sym_name = "k_full", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %c1 = arith.constant 1 : i32
  // expected-error @+1 {{'fa4.tma_load' index must be in [0, 1) for mbarrier array 'k_full', got 1}}
  "fa4.tma_load"(%tmap, %k, %b, %c1, %x) {bytes = 16384} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32) -> ()
  return
}

// -----

func.func @tma_load_on_commit_array(%tmap: !fa4.tensormap, %i: i32, %x: i32) {
  %k = "fa4.smem_region"() {sym_name = "k", bytes = 16384, align = 128} : () -> !fa4.smem
  %b = "fa4.mbarrier_alloc"() {sym_name = "S_full", num_barriers = 1, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  // expected-error @+1 {{'fa4.tma_load' barriers must arrive by 'tx' (TMA completes transaction bytes), got mbarrier array 'S_full' with arrival 'commit'}}
  "fa4.tma_load"(%tmap, %k, %b, %i, %x) {bytes = 16384} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32) -> ()
  return
}

// -----

func.func @tma_load_past_dst_end(%tmap: !fa4.tensormap, %i: i32, %x: i32) {
  %k = "fa4.smem_region"() {sym_name = "k", bytes = 16384, align = 128} : () -> !fa4.smem
  %b = "fa4.mbarrier_alloc"() {sym_name = "k_full", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  // expected-error @+1 {{'fa4.tma_load' dst_offset + bytes must be <= 16384 (the size of 'k'), got 16512}}
  "fa4.tma_load"(%tmap, %k, %b, %i, %x) {bytes = 16384, dst_offset = 128} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32) -> ()
  return
}

// -----

func.func @tma_store_six_coords(%tmap: !fa4.tensormap, %x: i32) {
  %o = "fa4.smem_region"() {sym_name = "o", bytes = 16384, align = 128} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.tma_store' coords must have 1 to 5 elements, got 6}}
  "fa4.tma_store"(%tmap, %o, %x, %x, %x, %x, %x, %x) {bytes = 16384} : (!fa4.tensormap, !fa4.smem, i32, i32, i32, i32, i32, i32) -> ()
  return
}

// -----

func.func @tma_store_past_src_end(%tmap: !fa4.tensormap, %x: i32) {
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 32768, align = 128} : () -> !fa4.smem
  %o = "fa4.smem_alias"(%q) {sym_name = "o", bytes = 16384, offset = 16384} : (!fa4.smem) -> !fa4.smem
  // expected-error @+1 {{'fa4.tma_store' src_offset + bytes must be <= 16384 (the size of 'o'), got 16640}}
  "fa4.tma_store"(%tmap, %o, %x) {bytes = 16384, src_offset = 256} : (!fa4.tensormap, !fa4.smem, i32) -> ()
  return
}

// -----

// ===== Errors IRDL reports at parse time =====

func.func @irdl_missing_required_attribute(%full: !fa4.mbarriers, %empty: !fa4.mbarriers) {
  // expected-error @+1 {{'fa4.pipeline_create' op attribute "num_stages" is expected but not provided}}
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv"} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  return
}

// -----

func.func @irdl_wrong_operand_type(%b: !fa4.mbarriers, %i: i64) {
  // expected-error @+1 {{expected 'i32' but got 'i64'}}
  "fa4.mbarrier_arrive"(%b, %i) : (!fa4.mbarriers, i64) -> ()
  return
}

// -----

func.func @irdl_wrong_attribute_base(%b: !fa4.mbarriers) {
  // expected-error @+1 {{expected base attribute 'builtin.string' but got 'builtin.integer'}}
  %q = "fa4.smem_region"() {sym_name = 7, bytes = 1024} : () -> !fa4.smem
  return
}

// -----

func.func @irdl_region_with_two_blocks() {
  // expected-error @+1 {{expected region 0 to have 1 block(s) but got 2}}
  "fa4.warp_specialize"() ({
    gpu.yield
  ^bb1:
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// ===== Added with the verifier fixes =====

// Only i64 is accepted: narrower types read back signed (255 : i8 is -1), wider ones assert in MLIR.
func.func @int_attr_not_i64() {
  // expected-error @+1 {{'fa4.smem_region' bytes must be an i64 integer (>= 1, <= 232448), got 4096 : i32}}
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 4096 : i32} : () -> !fa4.smem
  return
}

// -----

func.func @region_without_gpu_yield() {
  // expected-error @+1 {{'fa4.warp_specialize' region 'body' must end in 'gpu.yield', got 'llvm.unreachable'}}
  "fa4.warp_specialize"() ({
    llvm.unreachable
  }) {num_warps = 4} : () -> ()
  return
}

// -----

func.func @tma_load_dst_under_aligned(%map: !fa4.tensormap, %i: i32) {
  %dst = "fa4.smem_region"() {sym_name = "k", bytes = 4096, align = 16} : () -> !fa4.smem
  %bars = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  // expected-error @+1 {{'fa4.tma_load' dst must be aligned to >= 128 bytes for TMA, got 'k' aligned to 16}}
  "fa4.tma_load"(%map, %dst, %bars, %i, %i) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32) -> ()
  return
}

// -----

func.func @tma_store_src_alias_under_aligned(%map: !fa4.tensormap, %i: i32) {
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 8192, align = 1024} : () -> !fa4.smem
  %o = "fa4.smem_alias"(%q) {sym_name = "o", bytes = 4096, offset = 64} : (!fa4.smem) -> !fa4.smem
  // expected-error @+1 {{'fa4.tma_store' src must be aligned to >= 128 bytes for TMA, got 'o' aligned to 64}}
  "fa4.tma_store"(%map, %o, %i) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, i32) -> ()
  return
}

// -----

// A malformed role is reported on itself; the parent's checks skip it instead of failing.
func.func @malformed_role_in_parent() {
  "fa4.warp_specialize"() ({
    // expected-error @+1 {{'fa4.warp_role' registers must be an i64 integer (>= 24, <= 256, multiple of 8), got "x"}}
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 0>, registers = "x"} : () -> ()
    gpu.yield
  }) {num_warps = 4} : () -> ()
  return
}

// -----

// A malformed pipeline is reported on itself; the step ops that use it are not checked against it.
func.func @malformed_pipeline_neighbour(%s: i32, %ph: i32) {
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  // expected-error @+1 {{'fa4.pipeline_create' producer_sub_stages must be an i64 integer (>= 1, <= 29056), got "x"}}
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "kv", num_stages = 2, producer_sub_stages = "x"} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  "fa4.pipeline_consumer_wait"(%p, %s, %ph) {sub_stage = 1} : (!fa4.pipeline, i32, i32) -> ()
  return
}

// -----

func.func @mbarrier_both_counts() {
  // expected-error @+1 {{'fa4.mbarrier_alloc' exactly one of arrive_count and arrive_counts must be set, got both}}
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 2, arrive_count = 1, arrive_counts = array<i32: 1, 1>, arrival = "threads"} : () -> !fa4.mbarriers
  return
}

// -----

func.func @mbarrier_no_count() {
  // expected-error @+1 {{'fa4.mbarrier_alloc' exactly one of arrive_count and arrive_counts must be set, got neither}}
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 2, arrival = "threads"} : () -> !fa4.mbarriers
  return
}

// -----

func.func @mbarrier_counts_length() {
  // expected-error @+1 {{'fa4.mbarrier_alloc' arrive_counts must have num_barriers = 2 elements, got 3}}
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 2, arrive_counts = array<i32: 256, 128, 128>, arrival = "threads"} : () -> !fa4.mbarriers
  return
}

// -----

func.func @mbarrier_counts_too_large() {
  // expected-error @+1 {{'fa4.mbarrier_alloc' arrive_counts elements must be <= 1048575, got 1048576}}
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 1, arrive_counts = array<i32: 1048576>, arrival = "threads"} : () -> !fa4.mbarriers
  return
}

// -----

func.func @mbarrier_counts_zero() {
  // expected-error @+1 {{'fa4.mbarrier_alloc' arrive_counts elements must be >= 1, got 0}}
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 2, arrive_counts = array<i32: 256, 0>, arrival = "threads"} : () -> !fa4.mbarriers
  return
}

// -----

// ===== Memory views, named barriers, TMEM and MMA =====

func.func @any_of_operand_type(%v: vector<3xi32>) {
  %s = "fa4.tmem_region"() {sym_name = "S", columns = 32} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tmem_store' value must be vector<N x i32> with N a power of two in [2, 128], got vector<3xi32>}}
  "fa4.tmem_store"(%s, %v) : (!fa4.tmem, vector<3xi32>) -> ()
  return
}

// -----

func.func @any_of_result_type() {
  %s = "fa4.tmem_region"() {sym_name = "S", columns = 32} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tmem_load' result must be vector<N x i32> with N a power of two in [2, 128], got vector<4xf32>}}
  %x = "fa4.tmem_load"(%s) : (!fa4.tmem) -> vector<4xf32>
  return
}

// -----

func.func @smem_stage_not_dividing(%i: i32) {
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 10000} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.smem_stage' bytes must divide the size of 'ring' (10000), got 4096}}
  %b = "fa4.smem_stage"(%ring, %i) {bytes = 4096} : (!fa4.smem, i32) -> !fa4.smem
  return
}

// -----

func.func @smem_stage_out_of_range() {
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 8192} : () -> !fa4.smem
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'fa4.smem_stage' stage must be in [0, 2) for 'ring', got 2}}
  %b = "fa4.smem_stage"(%ring, %c2) {bytes = 4096} : (!fa4.smem, i32) -> !fa4.smem
  return
}

// -----

func.func @tma_into_misaligned_stage(%map: !fa4.tensormap, %i: i32) {
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 4160, align = 1024} : () -> !fa4.smem
  %bars = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %b = "fa4.smem_stage"(%ring, %i) {bytes = 2080} : (!fa4.smem, i32) -> !fa4.smem
  // expected-error @+1 {{'fa4.tma_load' dst must be aligned to >= 128 bytes for TMA, got a stage of 'ring' aligned to 32}}
  "fa4.tma_load"(%map, %b, %bars, %i, %i) {bytes = 2048} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32) -> ()
  return
}

// -----

func.func @named_barrier_partial_warp() {
  // expected-error @+1 {{'fa4.named_barrier' threads must be a multiple of 32, got 48}}
  "fa4.named_barrier"() {sym_name = "b", threads = 48} : () -> ()
  return
}

// -----

func.func @named_barrier_index_without_count(%w: i32) {
  // expected-error @+1 {{'fa4.named_barrier' index must come with count (a family of barriers), got an index and no count}}
  "fa4.named_barrier"(%w) {sym_name = "b", threads = 64} : (i32) -> ()
  return
}

// -----

func.func @named_barrier_count_without_index() {
  // expected-error @+1 {{'fa4.named_barrier' index must be one i32 operand when count is set, got 0}}
  "fa4.named_barrier"() {sym_name = "b", threads = 64, count = 2} : () -> ()
  return
}

// -----

func.func @named_barrier_family_too_large(%w: i32) {
  // expected-error @+1 {{'fa4.named_barrier' count must be <= 15, got 16}}
  "fa4.named_barrier"(%w) {sym_name = "b", threads = 64, count = 16} : (i32) -> ()
  return
}

// -----

func.func @tmem_slot_too_small() {
  %slot = "fa4.smem_region"() {sym_name = "slot", bytes = 2} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.tmem_alloc' slot must have >= 4 bytes (tcgen05.alloc writes a 32-bit address), got 2}}
  "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
  return
}

// -----

func.func @tmem_alloc_columns() {
  %slot = "fa4.smem_region"() {sym_name = "slot", bytes = 4} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.tmem_dealloc' columns must be a power of two in [32, 512], got 96}}
  "fa4.tmem_dealloc"(%slot) {columns = 96} : (!fa4.smem) -> ()
  return
}

// -----

func.func @mma_m_for_pair(%acc: i1) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %d = "fa4.tmem_region"() {sym_name = "S", columns = 128} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tcgen05_mma' m must be one of (128, 256) for cta_group 2, got 64}}
  "fa4.tcgen05_mma"(%d, %a, %a, %acc) {m = 64, n = 128, ab_type = "bf16", cta_group = 2} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  return
}

// -----

func.func @mma_n_multiple(%acc: i1) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %d = "fa4.tmem_region"() {sym_name = "S", columns = 128} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tcgen05_mma' n must be a multiple of 16 for m = 128, got 24}}
  "fa4.tcgen05_mma"(%d, %a, %a, %acc) {m = 128, n = 24, ab_type = "bf16"} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  return
}

// -----

func.func @mma_unswizzled_operand(%acc: i1) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %b = "fa4.smem_region"() {sym_name = "b", bytes = 16384, align = 1024} : () -> !fa4.smem
  %d = "fa4.tmem_region"() {sym_name = "S", columns = 128} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tcgen05_mma' b must be a swizzled region (MMA reads swizzled canonical tiles), got 'b' with swizzle 'none'}}
  "fa4.tcgen05_mma"(%d, %a, %b, %acc) {m = 128, n = 128, ab_type = "bf16"} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  return
}

// -----

func.func @mma_a_type(%acc: i1, %x: !fa4.mbarriers) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %d = "fa4.tmem_region"() {sym_name = "S", columns = 128} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tcgen05_mma' a must be !fa4.smem (SS) or !fa4.tmem (TS), got !fa4.mbarriers}}
  "fa4.tcgen05_mma"(%d, %x, %a, %acc) {m = 128, n = 128, ab_type = "bf16"} : (!fa4.tmem, !fa4.mbarriers, !fa4.smem, i1) -> ()
  return
}

// -----

func.func @wgmma_acc_fields(%acc: !llvm.struct<(f32, f32)>) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 8192, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.wgmma' acc must have n / 2 = 4 f32 fields, got 2}}
  %r = "fa4.wgmma"(%a, %a, %acc) {n = 8, ab_type = "bf16"} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32)>) -> !llvm.struct<(f32, f32)>
  return
}

// -----

func.func @wgmma_rs_a_offset(%acc: !llvm.struct<(f32, f32, f32, f32)>, %p: vector<4xi32>) {
  %b = "fa4.smem_region"() {sym_name = "b", bytes = 8192, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.wgmma' a_offset must be 0 when a is a register fragment (RS form), got 32}}
  %r = "fa4.wgmma"(%p, %b, %acc) {n = 8, ab_type = "bf16", a_offset = 32} : (vector<4xi32>, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  return
}

// -----

func.func @wgmma_rs_fragment_type(%acc: !llvm.struct<(f32, f32, f32, f32)>, %p: vector<8xi16>) {
  %b = "fa4.smem_region"() {sym_name = "b", bytes = 8192, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.wgmma' a must be !fa4.smem (SS) or vector<4xi32> (RS), got vector<8xi16>}}
  %r = "fa4.wgmma"(%p, %b, %acc) {n = 8, ab_type = "bf16"} : (vector<8xi16>, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  return
}

// -----

func.func @wgmma_fence_acc_type(%acc: !llvm.struct<(f32, i32)>) {
  // expected-error @+2 {{'fa4.wgmma_fence_acc' acc must be !llvm.struct<(f32, ...)>, got !llvm.struct<(f32, i32)>}}
  // expected-error @+1 {{'fa4.wgmma_fence_acc' result must be the type of acc, got !llvm.struct<(f32, i32)>}}
  %r = "fa4.wgmma_fence_acc"(%acc) : (!llvm.struct<(f32, i32)>) -> !llvm.struct<(f32, i32)>
  return
}

// -----

func.func @registers_need_whole_warpgroups() {
  // expected-error @+1 {{'fa4.warp_specialize' num_warps must be a multiple of 4 when a role sets registers (setmaxnreg needs whole warpgroups), got 6}}
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 4>, registers = 40} : () -> ()
    gpu.yield
  }) {num_warps = 6} : () -> ()
  return
}

// -----

func.func @tmem_stage_columns(%i: i32) {
  %s = "fa4.tmem_region"() {sym_name = "accum", columns = 512} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tmem_stage' columns must divide the columns of 'accum' (512), got 96}}
  %x = "fa4.tmem_stage"(%s, %i) {columns = 96} : (!fa4.tmem, i32) -> !fa4.tmem
  return
}

// -----

func.func @tmem_stage_index() {
  %s = "fa4.tmem_region"() {sym_name = "accum", columns = 512} : () -> !fa4.tmem
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'fa4.tmem_stage' stage must be in [0, 2) for 'accum', got 2}}
  %x = "fa4.tmem_stage"(%s, %c2) {columns = 256} : (!fa4.tmem, i32) -> !fa4.tmem
  return
}

// -----

func.func @mma_mn_major_needs_block_stride(%acc: i1) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %d = "fa4.tmem_region"() {sym_name = "S", columns = 128} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tcgen05_mma' b_block_stride must be set when b_major is 'mn' (bytes between N blocks of one swizzle width), got none}}
  "fa4.tcgen05_mma"(%d, %a, %a, %acc) {m = 128, n = 128, ab_type = "bf16", b_major = "mn"} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  return
}

// -----

func.func @wgmma_k_major_has_no_block_stride(%acc: !llvm.struct<(f32, f32, f32, f32)>) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 8192, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.wgmma' b_block_stride must be unset when b_major is 'k', got 8192}}
  %r = "fa4.wgmma"(%a, %a, %acc) {n = 8, ab_type = "bf16", b_block_stride = 8192} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  return
}

// -----

func.func @wgmma_e4m3_b_is_k_major(%acc: !llvm.struct<(f32, f32, f32, f32)>) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 8192, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.wgmma' b_major must be 'k' for e4m3 (fp8 wgmma reads K-major operands only), got 'mn'}}
  %r = "fa4.wgmma"(%a, %a, %acc) {n = 8, ab_type = "e4m3", b_major = "mn", b_block_stride = 8192} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  return
}

// -----

// ===== Bounds the lowering relies on (issue 19: found by test/fuzz/fuzz_inputs.py) =====
// Byte sizes and offsets go into 32-bit address arithmetic, barrier counts into loops, block strides
// into 14-bit descriptor fields: each is bounded here, so the lowering never sees one it cannot build.

func.func @smem_region_larger_than_smem() {
  // expected-error @+1 {{'fa4.smem_region' bytes must be <= 232448, got 232449}}
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 232449} : () -> !fa4.smem
  return
}

// -----

func.func @smem_region_offset_past_smem() {
  // expected-error @+1 {{'fa4.smem_region' offset must be <= 232448, got 4294967296}}
  %q = "fa4.smem_region"() {sym_name = "q", bytes = 1024, offset = 4294967296} : () -> !fa4.smem
  return
}

// -----

func.func @smem_alias_larger_than_smem(%base: !fa4.smem) {
  // expected-error @+1 {{'fa4.smem_alias' bytes must be <= 232448, got 2147483648}}
  %o = "fa4.smem_alias"(%base) {sym_name = "o", bytes = 2147483648} : (!fa4.smem) -> !fa4.smem
  return
}

// -----

func.func @smem_alias_offset_past_smem(%base: !fa4.smem) {
  // expected-error @+1 {{'fa4.smem_alias' offset must be <= 232448, got 2147483648}}
  %o = "fa4.smem_alias"(%base) {sym_name = "o", bytes = 16, offset = 2147483648} : (!fa4.smem) -> !fa4.smem
  return
}

// -----

func.func @smem_alias_past_stage_end(%i: i32) {
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 4096, align = 1024} : () -> !fa4.smem
  %s = "fa4.smem_stage"(%ring, %i) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
  // expected-error @+1 {{'fa4.smem_alias' offset + bytes must be <= 1024 (the size of a stage of 'ring'), got 2048}}
  %o = "fa4.smem_alias"(%s) {sym_name = "o", bytes = 1024, offset = 1024} : (!fa4.smem) -> !fa4.smem
  return
}

// -----

func.func @smem_stage_larger_than_smem(%base: !fa4.smem, %i: i32) {
  // expected-error @+1 {{'fa4.smem_stage' bytes must be <= 232448, got 4294967296}}
  %s = "fa4.smem_stage"(%base, %i) {bytes = 4294967296} : (!fa4.smem, i32) -> !fa4.smem
  return
}

// -----

func.func @mbarriers_more_than_smem_holds() {
  // expected-error @+1 {{'fa4.mbarrier_alloc' num_barriers must be <= 29056, got 2147483647}}
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 2147483647, arrive_count = 1, arrival = "threads"} : () -> !fa4.mbarriers
  return
}

// -----

func.func @mbarrier_index_past_smem() {
  // expected-error @+1 {{'fa4.mbarrier_alloc' index must be <= 29055, got 1048576}}
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 1, arrive_count = 1, arrival = "threads", index = 1048576} : () -> !fa4.mbarriers
  return
}

// -----

func.func @pipeline_sub_stages_past_barriers(%full: !fa4.mbarriers, %empty: !fa4.mbarriers) {
  // expected-error @+1 {{'fa4.pipeline_create' consumer_sub_stages must be <= 29056, got 4294967296}}
  %p = "fa4.pipeline_create"(%full, %empty) {sym_name = "p", num_stages = 2, consumer_sub_stages = 4294967296} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  return
}

// -----

func.func @tma_load_dst_offset_past_smem(%map: !fa4.tensormap, %dst: !fa4.smem, %b: !fa4.mbarriers, %i: i32) {
  // expected-error @+1 {{'fa4.tma_load' dst_offset must be <= 232448, got 2147483648}}
  "fa4.tma_load"(%map, %dst, %b, %i, %i) {bytes = 128, dst_offset = 2147483648} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32) -> ()
  return
}

// -----

func.func @tma_store_src_offset_past_smem(%map: !fa4.tensormap, %src: !fa4.smem, %i: i32) {
  // expected-error @+1 {{'fa4.tma_store' src_offset must be <= 232448, got 2147483648}}
  "fa4.tma_store"(%map, %src, %i) {bytes = 128, src_offset = 2147483648} : (!fa4.tensormap, !fa4.smem, i32) -> ()
  return
}

// -----

func.func @mma_a_offset_past_smem(%a: !fa4.smem, %acc: i1) {
  %d = "fa4.tmem_region"() {sym_name = "S", columns = 128} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tcgen05_mma' a_offset must be <= 232448, got 4294967296}}
  "fa4.tcgen05_mma"(%d, %a, %a, %acc) {m = 128, n = 128, ab_type = "bf16", a_offset = 4294967296} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  return
}

// -----

func.func @mma_b_offset_past_operand(%acc: i1) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %b = "fa4.smem_region"() {sym_name = "b", bytes = 8192, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %d = "fa4.tmem_region"() {sym_name = "S", columns = 128} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tcgen05_mma' b_offset must be < 8192 (the size of 'b'), got 8192}}
  "fa4.tcgen05_mma"(%d, %a, %b, %acc) {m = 128, n = 128, ab_type = "bf16", b_offset = 8192} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  return
}

// -----

func.func @mma_tmem_a_offset_past_columns(%acc: i1) {
  %b = "fa4.smem_region"() {sym_name = "b", bytes = 16384, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %p = "fa4.tmem_region"() {sym_name = "P", columns = 64} : () -> !fa4.tmem
  %d = "fa4.tmem_region"() {sym_name = "O", columns = 128} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tcgen05_mma' a_offset must be < 256 (4 bytes per column of A's 64 TMEM columns), got 256}}
  "fa4.tcgen05_mma"(%d, %p, %b, %acc) {m = 128, n = 128, ab_type = "bf16", a_offset = 256} : (!fa4.tmem, !fa4.tmem, !fa4.smem, i1) -> ()
  return
}

// -----

func.func @mma_block_stride_past_descriptor_field(%acc: i1) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 16384, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %d = "fa4.tmem_region"() {sym_name = "S", columns = 128} : () -> !fa4.tmem
  // expected-error @+1 {{'fa4.tcgen05_mma' b_block_stride must be <= 262128, got 262144}}
  "fa4.tcgen05_mma"(%d, %a, %a, %acc) {m = 128, n = 128, ab_type = "bf16", b_major = "mn", b_block_stride = 262144} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
  return
}

// -----

func.func @wgmma_a_offset_past_operand(%acc: !llvm.struct<(f32, f32, f32, f32)>) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 8192, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.wgmma' a_offset must be < 8192 (the size of 'a'), got 8192}}
  %r = "fa4.wgmma"(%a, %a, %acc) {n = 8, ab_type = "bf16", a_offset = 8192} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  return
}

// -----

func.func @wgmma_b_offset_past_smem(%b: !fa4.smem, %acc: !llvm.struct<(f32, f32, f32, f32)>) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 8192, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.wgmma' b_offset must be <= 232448, got 2147483648}}
  %r = "fa4.wgmma"(%a, %b, %acc) {n = 8, ab_type = "bf16", b_offset = 2147483648} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  return
}

// -----

func.func @wgmma_block_stride_past_descriptor_field(%acc: !llvm.struct<(f32, f32, f32, f32)>) {
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 8192, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  // expected-error @+1 {{'fa4.wgmma' b_block_stride must be <= 262128, got 1048576}}
  %r = "fa4.wgmma"(%a, %a, %acc) {n = 8, ab_type = "bf16", b_major = "mn", b_block_stride = 1048576} : (!fa4.smem, !fa4.smem, !llvm.struct<(f32, f32, f32, f32)>) -> !llvm.struct<(f32, f32, f32, f32)>
  return
}

// -----

// ===== fa4 attributes on kernels: the passes read them back =====

// expected-error @+1 {{'func.func' fa4.smem_bytes must be an i64 integer (>= 0), got "lots"}}
func.func @kernel_smem_bytes_kind() attributes {fa4.smem_bytes = "lots"} {
  return
}

// -----

// expected-error @+1 {{'func.func' fa4.num_mbarriers must be <= 29056, got 4294967296}}
func.func @kernel_num_mbarriers_range() attributes {fa4.num_mbarriers = 4294967296} {
  return
}

// -----

// expected-error @+1 {{'func.func' fa4.mbarrier_region must be a string, got 3 : i64}}
func.func @kernel_mbarrier_region_kind() attributes {fa4.mbarrier_region = 3} {
  return
}

// -----

// expected-error @+1 {{'gpu.module' fa4.tmem_columns must be a power of two, got 96}}
gpu.module @kernel_tmem_columns_not_power_of_two attributes {fa4.tmem_columns = 96} {
}

// -----

// expected-error @+1 {{'func.func' fa4.grid_constant_args elements must be >= 0, got -1}}
func.func @kernel_grid_constant_args_negative(%m: !fa4.tensormap) attributes {fa4.grid_constant_args = array<i32: -1>} {
  return
}

// -----

// expected-error @+1 {{'func.func' fa4.verify_protocol must be true or false, got 0 : i64}}
func.func @kernel_verify_protocol_kind() attributes {fa4.verify_protocol = 0} {
  return
}

// -----

// expected-error @+1 {{'builtin.module' fa4.target must be a string, got 100 : i64}}
module attributes {fa4.target = 100} {
}

// -----

// ===== fa4.debug_check =====

func.func @debug_check_fewer_conversions_than_values(%ok: i1, %seq: i32, %page: i32) {
  // expected-error @+1 {{'fa4.debug_check' message must have one conversion per value (2), got 1 in 'sequence %d'}}
  "fa4.debug_check"(%ok, %seq, %page) {message = "sequence %d"} : (i1, i32, i32) -> ()
  return
}

// -----

func.func @debug_check_more_conversions_than_values(%ok: i1, %seq: i32) {
  // expected-error @+1 {{'fa4.debug_check' message must have one conversion per value (1), got 3 in 'sequence %d, page %d (%u pages), 100%%'}}
  "fa4.debug_check"(%ok, %seq) {message = "sequence %d, page %d (%u pages), 100%%"} : (i1, i32) -> ()
  return
}

// -----

func.func @debug_check_condition_not_i1(%c: i32, %seq: i32) {
  // expected-error @+1 {{expected 'i1' but got 'i32'}}
  "fa4.debug_check"(%c, %seq) {message = "sequence %d"} : (i32, i32) -> ()
  return
}

// -----

func.func @debug_check_value_not_an_integer(%ok: i1, %x: f32) {
  // expected-error @+1 {{'fa4.debug_check' values #0 must be i32 or i64, got f32}}
  "fa4.debug_check"(%ok, %x) {message = "x %d"} : (i1, f32) -> ()
  return
}

// -----

func.func @debug_check_values_of_two_types(%ok: i1, %seq: i32, %w: i64) {
  // expected-error @+1 {{expected 'i32' but got 'i64'}}
  "fa4.debug_check"(%ok, %seq, %w) {message = "sequence %d, key %ld"} : (i1, i32, i64) -> ()
  return
}

// -----

func.func @debug_check_float_conversion(%ok: i1, %seq: i32) {
  // expected-error @+1 {{'fa4.debug_check' message conversions must be integer ones (%d %i %u %o %x %X), got '%f'}}
  "fa4.debug_check"(%ok, %seq) {message = "scale %f"} : (i1, i32) -> ()
  return
}

// -----

func.func @debug_check_star_width(%ok: i1, %seq: i32) {
  // expected-error @+1 {{'fa4.debug_check' message conversions must not take a '*' width or precision, got '%*d'}}
  "fa4.debug_check"(%ok, %seq) {message = "sequence %*d"} : (i1, i32) -> ()
  return
}

// -----

func.func @debug_check_i64_without_l(%ok: i1, %w: i64) {
  // expected-error @+1 {{'fa4.debug_check' conversion 0 of message must have an l length modifier for value #0 of type i64, got '%d'}}
  "fa4.debug_check"(%ok, %w) {message = "key %d"} : (i1, i64) -> ()
  return
}

// -----

func.func @debug_check_i32_with_l(%ok: i1, %seq: i32) {
  // expected-error @+1 {{'fa4.debug_check' conversion 0 of message must have no l length modifier for value #0 of type i32, got '%lu'}}
  "fa4.debug_check"(%ok, %seq) {message = "sequence %lu"} : (i1, i32) -> ()
  return
}

// -----

func.func @debug_check_empty_message(%ok: i1) {
  // expected-error @+1 {{'fa4.debug_check' message must be a non-empty string, got ""}}
  "fa4.debug_check"(%ok) {message = ""} : (i1) -> ()
  return
}
