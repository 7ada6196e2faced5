// One small kernel per bug class of fa4-verify-protocol, each rejected with its class, barrier and ops.
// RUN: fa4-opt %s --split-input-file --verify-diagnostics -p 'fa4-verify-protocol{witness=0}'

// under-arrival: the barrier counts 64 arrivals; the writer warp gives 32.
func.func @under_arrival() {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 64, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [under-arrival]: ready[0] phase 0 gets 32 of its 64 arrivals (from writer}}
      "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// over-arrival: a warp of 32 threads arrives on a barrier that counts 16.
func.func @over_arrival() {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 16, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [over-arrival]: ready[0] phase 0 expects 16 arrivals and has 16 left, but writer (32 threads of warp 0) arrives 32 times}}
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// over-arrival across phases: two warps arrive on a barrier that counts one warp, unordered.
func.func @over_arrival_unordered() {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "first", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [over-arrival]: the arrival of second on ready[0] is not ordered after phase 0 completed, so in another schedule it lands in phase 0, whose arrivals come from first}}
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "second", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// deadlock: each role waits for the other's arrival before giving its own.
func.func @deadlock() {
  %c0 = arith.constant 0 : i32
  %a = "fa4.mbarrier_alloc"() {sym_name = "a", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  %b = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%a) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%b) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [deadlock]: deadlock: every remaining wait depends on another: ping waits b[0] for parity 0 (phase 0: 0 of 32 arrivals)}}
      "fa4.mbarrier_try_wait_parity"(%b, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      "fa4.mbarrier_arrive"(%a, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "ping", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      "fa4.mbarrier_try_wait_parity"(%a, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      "fa4.mbarrier_arrive"(%b, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "pong", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// deadlock: nobody ever arrives on the barrier the reader waits for.
func.func @never_signalled() {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [deadlock]: reader waits at fa4.mbarrier_try_wait_parity}}
      "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// parity: the reader waits parity 1 on a fresh barrier: it passes at once if it runs before the
// writer arrives (and reads too early), and blocks forever if it runs after.
func.func @parity() {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %buf = "fa4.smem_region"() {sym_name = "buf", bytes = 1024} : () -> !fa4.smem
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %p = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>
      llvm.store %c1, %p : i32, !llvm.ptr<3>
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [parity]: the wait of reader on ready[0] for parity 1 passes on a fresh barrier}}
      "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c1) : (!fa4.mbarriers, i32, i32) -> ()
      %q = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>
      %x = llvm.load %q : !llvm.ptr<3> -> i32
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// race: the reader loads before it waits for the writer's signal.
func.func @race() {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %buf = "fa4.smem_region"() {sym_name = "buf", bytes = 1024} : () -> !fa4.smem
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %p = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>
      llvm.store %c1, %p : i32, !llvm.ptr<3>
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      %q = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>
      // expected-error @below {{protocol error [race]: race on smem 'buf': llvm.load at}}
      %x = llvm.load %q : !llvm.ptr<3> -> i32
      "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// init: the barrier is never initialised.
func.func @no_init() {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [init]: ready[0] is used by writer before any fa4.mbarrier_init of 'ready'}}
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// init: initialising inside a role leaves the other roles out of its CTA-wide barrier.
func.func @init_in_role() {
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [init]: fa4.mbarrier_init must come before fa4.warp_specialize}}
      "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// tx-mismatch: the expect_tx announces 2048 bytes, the TMA load delivers 1024.
func.func @tx_short(%map: !fa4.tensormap) {
  %c0 = arith.constant 0 : i32
  %buf = "fa4.smem_region"() {sym_name = "buf", bytes = 2048, align = 128} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        // expected-error @below {{protocol error [tx-mismatch]: full[0] phase 0 never completes: expect_tx announced 2048 bytes but its TMA loads deliver 1024}}
        "fa4.mbarrier_arrive_expect_tx"(%full, %c0) {tx_bytes = 2048} : (!fa4.mbarriers, i32) -> ()
        "fa4.tma_load"(%map, %buf, %full, %c0, %c0, %c0) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      "fa4.mbarrier_try_wait_parity"(%full, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "mma", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// tx-mismatch: the loads deliver more bytes than the expect_tx announced.
func.func @tx_over(%map: !fa4.tensormap) {
  %c0 = arith.constant 0 : i32
  %buf = "fa4.smem_region"() {sym_name = "buf", bytes = 2048, align = 128} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 1, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        "fa4.mbarrier_arrive_expect_tx"(%full, %c0) {tx_bytes = 1024} : (!fa4.mbarriers, i32) -> ()
        // expected-error @below {{protocol error [tx-mismatch]: full[0] phase 0: TMA loads deliver 2048 bytes but expect_tx announced 1024}}
        "fa4.tma_load"(%map, %buf, %full, %c0, %c0, %c0) {bytes = 2048} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      "fa4.mbarrier_try_wait_parity"(%full, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "mma", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// named-barrier: two uses of one barrier disagree on its thread count.
func.func @named_count() {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      "fa4.named_barrier"() {sym_name = "meet", threads = 64} : () -> ()
      gpu.yield
    }) {sym_name = "left", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [named-barrier]: named barrier 'meet' counts 96 threads at fa4.named_barrier}}
      "fa4.named_barrier"() {sym_name = "meet", threads = 96} : () -> ()
      gpu.yield
    }) {sym_name = "right", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// named-barrier: two warpgroups each sync on one name: one hardware id, unordered uses.
func.func @named_reuse() {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      "fa4.named_barrier"() {sym_name = "sync", threads = 128} : () -> ()
      gpu.yield
    }) {sym_name = "wg0", warps = array<i32: 0, 1, 2, 3>} : () -> ()
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [named-barrier]: named barrier 'sync' (one hardware id) is reused by wg1 (128 threads of warps 4,5,6,7) without being ordered after its previous use by wg0}}
      "fa4.named_barrier"() {sym_name = "sync", threads = 128} : () -> ()
      gpu.yield
    }) {sym_name = "wg1", warps = array<i32: 4, 5, 6, 7>} : () -> ()
    gpu.yield
  }) {num_warps = 8} : () -> ()
  return
}

// -----

// named-barrier: more threads meet than the barrier counts.
func.func @named_over() {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [named-barrier]: named barrier 'meet' counts 32 threads but 64 arrive in one generation}}
      "fa4.named_barrier"() {sym_name = "meet", threads = 32} : () -> ()
      gpu.yield
    }) {sym_name = "pair", warps = array<i32: 0, 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// named-barrier: an arrive-only use that nobody completes.
func.func @named_under() {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [named-barrier]: named barrier 'ready' counts 64 threads but only 32 meet there}}
      "fa4.named_barrier"() {sym_name = "ready", threads = 64, kind = "arrive"} : () -> ()
      gpu.yield
    }) {sym_name = "signal", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// tmem: allocated, never freed.
func.func @tmem_leak() {
  %slot = "fa4.smem_region"() {sym_name = "slot", bytes = 4, align = 4} : () -> !fa4.smem
  %d = "fa4.tmem_region"() {sym_name = "D", columns = 32} : () -> !fa4.tmem
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [tmem]: TMEM (regions 'D') allocated by owner at fa4.tmem_alloc}}
      "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
      %x = "fa4.tmem_load"(%d) : (!fa4.tmem) -> vector<2xi32>
      gpu.yield
    }) {sym_name = "owner", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// tmem: freed while the MMA that writes it may still run (no commit waited for).
func.func @tmem_in_use() {
  %false = arith.constant false
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 4096, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %b = "fa4.smem_region"() {sym_name = "b", bytes = 1024, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %slot = "fa4.smem_region"() {sym_name = "slot", bytes = 4, align = 4} : () -> !fa4.smem
  %d = "fa4.tmem_region"() {sym_name = "D", columns = 32} : () -> !fa4.tmem
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        // expected-error @below {{protocol error [race]: the kernel can exit while fa4.tcgen05_mma}}
        "fa4.tcgen05_mma"(%d, %a, %b, %false) {m = 128, n = 32, ab_type = "bf16"} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
      }
      // expected-error @below {{protocol error [tmem]: TMEM is deallocated by mma at fa4.tmem_dealloc}}
      "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
      gpu.yield
    }) {sym_name = "mma", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// tmem: another role reads TMEM with nothing ordering it after the allocation.
func.func @tmem_before_alloc() {
  %slot = "fa4.smem_region"() {sym_name = "slot", bytes = 4, align = 4} : () -> !fa4.smem
  %d = "fa4.tmem_region"() {sym_name = "D", columns = 32} : () -> !fa4.tmem
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
      "fa4.named_barrier"() {sym_name = "done", threads = 64} : () -> ()
      "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
      gpu.yield
    }) {sym_name = "owner", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [tmem]: reader uses TMEM (TMEM 'D') before it is known to be allocated}}
      %x = "fa4.tmem_load"(%d) : (!fa4.tmem) -> vector<2xi32>
      "fa4.named_barrier"() {sym_name = "done", threads = 64} : () -> ()
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// cta-pair: the pair MMA is issued by both CTAs (no leader guard).
func.func @pair_mma_from_both(%map: !fa4.tensormap) attributes {nvvm.cluster_dim = array<i32: 2, 1, 1>} {
  %c0 = arith.constant 0 : i32
  %false = arith.constant false
  %a = "fa4.smem_region"() {sym_name = "a", bytes = 4096, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %b = "fa4.smem_region"() {sym_name = "b", bytes = 1024, align = 1024, swizzle = "128B"} : () -> !fa4.smem
  %slot = "fa4.smem_region"() {sym_name = "slot", bytes = 4, align = 4} : () -> !fa4.smem
  %d = "fa4.tmem_region"() {sym_name = "D", columns = 32} : () -> !fa4.tmem
  %tid = nvvm.read.ptx.sreg.tid.x : i32
  %c32 = arith.constant 32 : i32
  %warp0 = arith.cmpi ult, %tid, %c32 : i32
  scf.if %warp0 {
    "fa4.tmem_alloc"(%slot) {cta_group = 2} : (!fa4.smem) -> ()
  }
  %done = "fa4.mbarrier_alloc"() {sym_name = "mma_done", num_barriers = 1, arrive_count = 2, arrival = "commit"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%done) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        // expected-error @below {{protocol error [cta-pair]: a cta_group = 2 MMA is issued by mma in CTA 1, the odd CTA of its pair}}
        // expected-error @below {{protocol error [race]: race on TMEM 'D': fa4.tcgen05_mma}}
        "fa4.tcgen05_mma"(%d, %a, %b, %false) {m = 256, n = 32, ab_type = "bf16", cta_group = 2} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()
        "fa4.mma_commit"(%done, %c0) {multicast_mask = 3} : (!fa4.mbarriers, i32) -> ()
      }
      "fa4.mbarrier_try_wait_parity"(%done, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      "fa4.tmem_dealloc"(%slot) {cta_group = 2} : (!fa4.smem) -> ()
      gpu.yield
    }) {sym_name = "mma", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// cta-pair: the leader's multicast commit signals CTA 1, which exits without waiting for it.
func.func @pair_exit() attributes {nvvm.cluster_dim = array<i32: 2, 1, 1>} {
  %c0 = arith.constant 0 : i32
  %done = "fa4.mbarrier_alloc"() {sym_name = "done", num_barriers = 1, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%done) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
      %leader = arith.cmpi eq, %rank, %c0 : i32
      scf.if %leader {
        %e = "fa4.elect_one"() : () -> i1
        scf.if %e {
          // expected-error @below {{protocol error [cta-pair]: CTA 1 can exit while CTA 0 still signals it: signal (fa4.mma_commit}}
          "fa4.mma_commit"(%done, %c0) {multicast_mask = 3} : (!fa4.mbarriers, i32) -> ()
        }
        "fa4.mbarrier_try_wait_parity"(%done, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "signal", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// under-arrival across a cluster: the count includes the other CTA's arrivals, but without multicast_mask
// each CTA's barrier gets its own warp's 32 of 64.
func.func @multicast_missing() attributes {nvvm.cluster_dim = array<i32: 2, 1, 1>} {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 64, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [under-arrival]: ready[0] of CTA 0 phase 0 gets 32 of its 64 arrivals}}
      // expected-error @below {{protocol error [under-arrival]: ready[0] of CTA 1 phase 0 gets 32 of its 64 arrivals}}
      "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// cta-pair: each CTA arrives on both CTAs' barriers (multicast_mask) and nobody waits, so a CTA can exit
// while the other still arrives on its barrier.
func.func @multicast_exit() attributes {nvvm.cluster_dim = array<i32: 2, 1, 1>} {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 64, arrival = "threads", multicast_mask = 3} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [cta-pair]: CTA 0 can exit while CTA 1 still signals it: writer (fa4.mbarrier_arrive}}
      // expected-error @below {{protocol error [cta-pair]: CTA 1 can exit while CTA 0 still signals it: writer (fa4.mbarrier_arrive}}
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// bounds: the multicast mask names a CTA outside the kernel's cluster (it has none).
func.func @multicast_outside() {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 64, arrival = "threads", multicast_mask = 3} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [bounds]: multicast_mask 0x3 of 'ready' names CTAs outside the kernel's cluster of 1: declare the cluster or narrow the mask}}
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// unsupported: protocol ops inside a loop the verifier does not follow.
func.func @while_loop(%n: i32) {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [unsupported]: scf.while holds protocol ops, but the verifier only follows scf.if and scf.for}}
      scf.while : () -> () {
        %go = arith.cmpi slt, %c0, %n : i32
        scf.condition(%go)
      } do {
        "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
        scf.yield
      }
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// unsupported: a branch whose threads depend on a per-thread value the verifier cannot know.
func.func @unknown_threads(%data: !llvm.ptr<1>) {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %p = llvm.getelementptr %data[%tid] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
      %x = llvm.load %p : !llvm.ptr<1> -> i32
      %go = arith.cmpi eq, %x, %c0 : i32
      // expected-error @below {{protocol error [unsupported]: the verifier cannot tell which threads take this branch}}
      scf.if %go {
        "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// The producer's loop starts one tile late (1 + loop 2 to N) while the consumer takes N tiles.
func.func @peeled_one_short(%map: !fa4.tensormap, %tiles: i32) attributes {fa4.target = "sm_90a"} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 8192, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        "fa4.pipeline_producer_acquire"(%pipe, %s0#0, %s0#1) : (!fa4.pipeline, i32, i32) -> ()
        "fa4.pipeline_producer_commit"(%pipe, %s0#0) {tx_bytes = 4096} : (!fa4.pipeline, i32) -> ()
        %b0 = "fa4.smem_stage"(%ring, %s0#0) {bytes = 4096} : (!fa4.smem, i32) -> !fa4.smem
        "fa4.tma_load"(%map, %b0, %full, %s0#0, %c0, %c0) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
        %s1:2 = "fa4.pipeline_advance"(%pipe, %s0#0, %s0#1) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        %end:2 = scf.for %t = %c2 to %tiles step %c1 iter_args(%s = %s1#0, %p = %s1#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 4096} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 4096} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 4096} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %n:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %n#0, %n#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "load", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %end:2 = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        // expected-error @below {{protocol error [deadlock]: use waits at fa4.pipeline_consumer_wait}}
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %n:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %n#0, %n#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "use", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// ===== Run-time values: loop trip counts over kernel arguments, the CTA index (first and last CTA of the
// grid, an empty tile range), TMEM ownership, stage bounds, races inside a role, proxy fences. =====

// deadlock from trip counts: the producer loops n - 1 times, the consumer n times; the consumer
// waits for a tile that never comes, and the message names both loops and their bounds.
func.func @consumer_loops_one_more(%map: !fa4.tensormap, %n: i32, %m: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 2048, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %n1 = arith.subi %n, %c1 : i32
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        %end:2 = scf.for %t = %c0 to %n1 step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %nx#0, %nx#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "producer", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %end:2 = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        // expected-error @below {{no role arrives on it again (phase 0: 0 of 1 arrivals); the roles' loops with run-time bounds ran different numbers of times: producer 0 times (0 to (%arg1 - 1))}}
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
        %a = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>
        %x = llvm.load %a : !llvm.ptr<3> -> i32
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %nx#0, %nx#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "consumer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}


// -----

// The producer loops n times, the consumer n - 1: the last load is never waited for, so the CTA can
// exit while TMA still writes shared memory.
func.func @producer_loops_one_more(%map: !fa4.tensormap, %n: i32, %m: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 2048, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %n1 = arith.subi %n, %c1 : i32
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        %end:2 = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
          // expected-error @below {{(producer) still writes stage 0 of smem 'ring': nothing waits for it to finish; add a wait on full[0] (every load must be consumed before the CTA exits; a producer loop that runs more times than its consumer's leaves one in flight) before the role ends [%arg1 = 1]}}
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %nx#0, %nx#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "producer", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %end:2 = scf.for %t = %c0 to %n1 step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
        %a = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>
        %x = llvm.load %a : !llvm.ptr<3> -> i32
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %nx#0, %nx#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "consumer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}


// -----

// The producer loops over %n, the consumer over %m: the scenario that gives each argument its own
// trip count (1 and 2) tells them apart.
func.func @loops_over_different_arguments(%map: !fa4.tensormap, %n: i32, %m: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 2048, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %n1 = arith.subi %n, %c1 : i32
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        %end:2 = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %nx#0, %nx#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "producer", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %end:2 = scf.for %t = %c0 to %m step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        // expected-error @below {{; loops that walk one ring must run the same number of times (the same bound) [%arg1 = 1, %arg2 = 2]}}
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
        %a = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>
        %x = llvm.load %a : !llvm.ptr<3> -> i32
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %nx#0, %nx#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "consumer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}


// -----

// CTA index: a persistent split: CTA b streams tiles [b * per, min((b + 1) * per, total)) with
// per = ceil(total / nctaid). The consumer peels its first tile, assuming every CTA has one; a
// trailing CTA whose range is empty waits for it forever.
func.func @trailing_cta_without_tiles(%map: !fa4.tensormap, %total: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 2048, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %block = nvvm.read.ptx.sreg.ctaid.x : i32
  %grid = nvvm.read.ptx.sreg.nctaid.x : i32
  %per = arith.ceildivui %total, %grid : i32
  %first = arith.muli %block, %per : i32
  %next = arith.addi %first, %per : i32
  %last = arith.minui %next, %total : i32
  %second = arith.addi %first, %c1 : i32
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        %end:2 = scf.for %t = %first to %last step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %nx#0, %nx#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "producer", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      // expected-error @below {{for full[0] parity 0, which can never pass: no role arrives on it again (phase 0: 0 of 1 arrivals); check the phase the wait starts from [the last CTA of the grid: %ctaid.x = 2 of %nctaid.x = 3; %arg1 = 1]}}
      "fa4.pipeline_consumer_wait"(%pipe, %s0#0, %s0#1) : (!fa4.pipeline, i32, i32) -> ()
      "fa4.pipeline_consumer_release"(%pipe, %s0#0) : (!fa4.pipeline, i32) -> ()
      %s1:2 = "fa4.pipeline_advance"(%pipe, %s0#0, %s0#1) : (!fa4.pipeline, i32, i32) -> (i32, i32)
      %end:2 = scf.for %t = %second to %last step %c1 iter_args(%s = %s1#0, %p = %s1#1) -> (i32, i32) : i32 {
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %nx#0, %nx#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "consumer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// CTA index: The last CTA takes the remainder: per = total / nctaid, and CTA nctaid - 1 streams
// [first, total). The producer knows; the consumer loops per tiles in every CTA, so in the last
// CTA it waits for tiles that never come (or leaves loads in flight).
func.func @last_cta_takes_the_remainder(%map: !fa4.tensormap, %total: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 2048, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %block = nvvm.read.ptx.sreg.ctaid.x : i32
  %grid = nvvm.read.ptx.sreg.nctaid.x : i32
  %per = arith.divui %total, %grid : i32
  %first = arith.muli %block, %per : i32
  %next = arith.addi %first, %per : i32
  %final = arith.subi %grid, %c1 : i32
  %is_last = arith.cmpi eq, %block, %final : i32
  %last = arith.select %is_last, %total, %next : i32
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        %end:2 = scf.for %t = %first to %last step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
          // expected-error @below {{(producer) still writes stage 0 of smem 'ring': nothing waits for it to finish; add a wait on full[0] (every load must be consumed before the CTA exits; a producer loop that runs more times than its consumer's leaves one in flight) before the role ends [the last CTA of the grid: %ctaid.x = 2 of %nctaid.x = 3; %arg1 = 1]}}
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %nx#0, %nx#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "producer", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %end:2 = scf.for %t = %first to %next step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %nx#0, %nx#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "consumer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// CTA index: the producer streams [first, first + per) and forgets the clamp to the grid's end that
// its consumer keeps: min(first + per, total). In the first CTAs both agree; in a trailing CTA
// whose range is cut short, the producer loads a tile nobody consumes, still in flight at exit.
func.func @producer_without_the_clamp(%map: !fa4.tensormap, %total: i32, %per: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 2048, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 2, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 2} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  %block = nvvm.read.ptx.sreg.ctaid.x : i32
  %first = arith.muli %block, %per : i32
  %next = arith.addi %first, %per : i32
  %last = arith.minui %next, %total : i32
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        %end:2 = scf.for %t = %first to %next step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
          // expected-error @below {{(producer) still writes stage 1 of smem 'ring': nothing waits for it to finish; add a wait on full[1] (every load must be consumed before the CTA exits; a producer loop that runs more times than its consumer's leaves one in flight) before the role ends [the last CTA of the grid: %ctaid.x = 2 of %nctaid.x = 3; %arg1 = 5, %arg2 = 2]}}
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %nx#0, %nx#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "producer", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %end:2 = scf.for %t = %first to %last step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %nx#0, %nx#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "consumer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// tmem: the allocation is not guarded by a warp test, so each of the role's four warps allocates.
func.func @tmem_alloc_by_four_warps() attributes {fa4.target = "sm_100a"} {
  %c0 = arith.constant 0 : i32
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4} : () -> !fa4.smem
  %acc = "fa4.tmem_region"() {sym_name = "acc", columns = 32} : () -> !fa4.tmem
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [tmem]: fa4.tmem_alloc (TMEM regions 'acc' 32) must be executed by exactly one whole warp (its tcgen05 instruction is .sync.aligned, and one warp allocates for the CTA), got 128 threads of warps 0,1,2,3 of owner}}
      "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %c32 = arith.constant 32 : i32
      %warp = arith.divui %tid, %c32 : i32
      %w0 = arith.cmpi eq, %warp, %c0 : i32
      scf.if %w0 {
        "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
      }
      gpu.yield
    }) {sym_name = "owner", warps = array<i32: 0, 1, 2, 3>} : () -> ()
    gpu.yield
  }) {num_warps = 4} : () -> ()
  return
}

// -----

// tmem: warp 1 allocates, warp 0 frees (after a named barrier that orders them).
func.func @tmem_freed_by_another_warp() attributes {fa4.target = "sm_100a"} {
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4} : () -> !fa4.smem
  %acc = "fa4.tmem_region"() {sym_name = "acc", columns = 32} : () -> !fa4.tmem
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
      "fa4.named_barrier"() {sym_name = "handoff", threads = 64, kind = "arrive"} : () -> ()
      gpu.yield
    }) {sym_name = "allocator", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      "fa4.named_barrier"() {sym_name = "handoff", threads = 64} : () -> ()
      // expected-error @below {{protocol error [tmem]: TMEM (regions 'acc' 32) allocated by warp 1 (allocator}}
      "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
      gpu.yield
    }) {sym_name = "freer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// tmem: the allocation asks for 32 columns; the regions span 96.
func.func @tmem_allocation_too_small() attributes {fa4.target = "sm_100a"} {
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4} : () -> !fa4.smem
  %s = "fa4.tmem_region"() {sym_name = "S", columns = 64} : () -> !fa4.tmem
  %o = "fa4.tmem_region"() {sym_name = "O", columns = 32} : () -> !fa4.tmem
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [tmem]: fa4.tmem_alloc allocates 32 columns, but the kernel's TMEM regions span 96 ('S' 64, 'O' 32): allocate at least 96 columns}}
      "fa4.tmem_alloc"(%slot) {columns = 32} : (!fa4.smem) -> ()
      "fa4.tmem_dealloc"(%slot) {columns = 32} : (!fa4.smem) -> ()
      gpu.yield
    }) {sym_name = "owner", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// bounds: the pipeline walks three stages of a ring region that holds two.
func.func @stage_outside_its_ring(%map: !fa4.tensormap, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = "fa4.smem_region"() {sym_name = "ring", bytes = 2048, align = 1024} : () -> !fa4.smem
  %full = "fa4.mbarrier_alloc"() {sym_name = "full", num_barriers = 3, arrive_count = 1, arrival = "tx"} : () -> !fa4.mbarriers
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 3, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %pipe = "fa4.pipeline_create"(%full, %empty) {sym_name = "ring", num_stages = 3} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %e = "fa4.elect_one"() : () -> i1
      scf.if %e {
        %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
        %end:2 = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
          "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
          "fa4.pipeline_producer_commit"(%pipe, %s) {tx_bytes = 1024} : (!fa4.pipeline, i32) -> ()
          // expected-error @below {{protocol error [bounds]: stage 2 of smem 'ring' is bytes [2048, 3072) of a ring of 2048 bytes: every stage the kernel reaches must lie inside its ring}}
          %buf = "fa4.smem_stage"(%ring, %s) {bytes = 1024} : (!fa4.smem, i32) -> !fa4.smem
          "fa4.tma_load"(%map, %buf, %full, %s, %c0, %t) {bytes = 1024} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()
          %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
          scf.yield %nx#0, %nx#1 : i32, i32
        }
      }
      gpu.yield
    }) {sym_name = "producer", warps = array<i32: 1>} : () -> ()
    "fa4.warp_role"() ({
      %s0:2 = "fa4.pipeline_initial_state"(%pipe) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)
      %end:2 = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0#0, %p = %s0#1) -> (i32, i32) : i32 {
        "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()
        "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()
        %nx:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)
        scf.yield %nx#0, %nx#1 : i32, i32
      }
      gpu.yield
    }) {sym_name = "consumer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// race inside one role: warp 0 writes a scratch word that all four warps then read, with no
// barrier between (the role's threads run in no fixed order).
func.func @warp0_writes_all_warps_read() {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %scratch = "fa4.smem_region"() {sym_name = "scratch", bytes = 128} : () -> !fa4.smem
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %warp = arith.divui %tid, %c32 : i32
      %w0 = arith.cmpi eq, %warp, %c0 : i32
      %a = "fa4.smem_address"(%scratch) : (!fa4.smem) -> !llvm.ptr<3>
      scf.if %w0 {
        llvm.store %tid, %a : i32, !llvm.ptr<3>
      }
      // expected-error @below {{protocol error [race]: race on smem 'scratch': llvm.load at}}
      %x = llvm.load %a : !llvm.ptr<3> -> i32
      "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "team", warps = array<i32: 0, 1, 2, 3>} : () -> ()
    gpu.yield
  }) {num_warps = 4} : () -> ()
  return
}

// -----

// fence: the warpgroup writes the output tile and meets at a named barrier, but no thread fences
// its generic-proxy stores before thread 0's TMA store reads the tile through the async proxy.
func.func @tma_store_without_proxy_fence(%map: !fa4.tensormap) {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %out = "fa4.smem_region"() {sym_name = "out", bytes = 2048, align = 1024} : () -> !fa4.smem
  %done = "fa4.mbarrier_alloc"() {sym_name = "done", num_barriers = 1, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%done) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %me = arith.remui %tid, %c128 : i32
      %lead = arith.cmpi eq, %me, %c0 : i32
      %a = "fa4.smem_address"(%out) : (!fa4.smem) -> !llvm.ptr<3>
      %p = llvm.getelementptr %a[%me] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %tid, %p : i32, !llvm.ptr<3>
      "fa4.named_barrier"() {sym_name = "tile_written", threads = 128} : () -> ()
      scf.if %lead {
        // expected-error @below {{protocol error [fence]: the TMA store at fa4.tma_store at}}
        "fa4.tma_store"(%map, %out, %c0, %c0) {bytes = 2048} : (!fa4.tensormap, !fa4.smem, i32, i32) -> ()
        "fa4.tma_store_wait"() {pending = 0} : () -> ()
      }
      "fa4.mbarrier_arrive"(%done, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "epilogue", warps = array<i32: 0, 1, 2, 3>} : () -> ()
    gpu.yield
  }) {num_warps = 4} : () -> ()
  return
}

// -----

// bounds: a dynamic barrier index walks past its array (the ring has 2 barriers, the loop 3 tiles).
func.func @barrier_index_past_its_array() {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c3 = arith.constant 3 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 2, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      scf.for %i = %c0 to %c3 step %c1 : i32 {
        // expected-error @below {{protocol error [bounds]: barrier index 2 is out of range for 'ready' (2 barriers): every index the kernel reaches must be in [0, 2)}}
        "fa4.mbarrier_arrive"(%ready, %i) : (!fa4.mbarriers, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// fence: the stores are fenced, but after the barrier that hands the tile to the TMA store, so the
// fence is not ordered before the store's read.
func.func @proxy_fence_after_the_barrier(%map: !fa4.tensormap) {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %out = "fa4.smem_region"() {sym_name = "out", bytes = 2048, align = 1024} : () -> !fa4.smem
  %done = "fa4.mbarrier_alloc"() {sym_name = "done", num_barriers = 1, arrive_count = 128, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%done) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %me = arith.remui %tid, %c128 : i32
      %lead = arith.cmpi eq, %me, %c0 : i32
      %a = "fa4.smem_address"(%out) : (!fa4.smem) -> !llvm.ptr<3>
      %p = llvm.getelementptr %a[%me] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %tid, %p : i32, !llvm.ptr<3>
      "fa4.named_barrier"() {sym_name = "tile_written", threads = 128} : () -> ()
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      scf.if %lead {
        // expected-error @below {{the fence.proxy.async after the write is not ordered before the read}}
        "fa4.tma_store"(%map, %out, %c0, %c0) {bytes = 2048} : (!fa4.tensormap, !fa4.smem, i32, i32) -> ()
        "fa4.tma_store_wait"() {pending = 0} : () -> ()
      }
      "fa4.mbarrier_arrive"(%done, %c0) : (!fa4.mbarriers, i32) -> ()
      gpu.yield
    }) {sym_name = "epilogue", warps = array<i32: 0, 1, 2, 3>} : () -> ()
    gpu.yield
  }) {num_warps = 4} : () -> ()
  return
}

// -----

// under-arrival at exit: two consumer warps release every stage, but the second one's loop runs
// once less, so the last phase of 'empty' is half arrived when the kernel exits.
func.func @phase_half_arrived_at_exit(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %empty = "fa4.mbarrier_alloc"() {sym_name = "empty", num_barriers = 1, arrive_count = 64, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()
  %n1 = arith.subi %n, %c1 : i32
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      scf.for %t = %c0 to %n step %c1 : i32 {
        // expected-error @below {{protocol error [under-arrival]: empty[0] phase 0 has 32 of its 64 arrivals when the kernel exits (from first}}
        "fa4.mbarrier_arrive"(%empty, %c0) : (!fa4.mbarriers, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "first", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      scf.for %t = %c0 to %n1 step %c1 : i32 {
        "fa4.mbarrier_arrive"(%empty, %c0) : (!fa4.mbarriers, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "second", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// tmem: one warp allocates twice without freeing in between.
func.func @tmem_allocated_twice() attributes {fa4.target = "sm_100a"} {
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4} : () -> !fa4.smem
  %acc = "fa4.tmem_region"() {sym_name = "acc", columns = 32} : () -> !fa4.tmem
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
      // expected-error @below {{protocol error [tmem]: owner allocates TMEM at fa4.tmem_alloc}}
      "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
      "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
      gpu.yield
    }) {sym_name = "owner", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// tmem: the warp frees TMEM twice.
func.func @tmem_freed_twice() attributes {fa4.target = "sm_100a"} {
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4} : () -> !fa4.smem
  %acc = "fa4.tmem_region"() {sym_name = "acc", columns = 32} : () -> !fa4.tmem
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
      "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
      // expected-error @below {{protocol error [tmem]: owner deallocates TMEM at fa4.tmem_dealloc}}
      "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
      gpu.yield
    }) {sym_name = "owner", warps = array<i32: 0>} : () -> ()
    gpu.yield
  }) {num_warps = 1} : () -> ()
  return
}

// -----

// tmem: all four warps of the role free TMEM (no warp test), though warp 0 alone allocated it.
func.func @tmem_freed_by_four_warps() attributes {fa4.target = "sm_100a"} {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %slot = "fa4.smem_region"() {sym_name = "tmem_slot", bytes = 4, align = 4} : () -> !fa4.smem
  %acc = "fa4.tmem_region"() {sym_name = "acc", columns = 32} : () -> !fa4.tmem
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %warp = arith.divui %tid, %c32 : i32
      %w0 = arith.cmpi eq, %warp, %c0 : i32
      scf.if %w0 {
        "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()
      }
      "fa4.named_barrier"() {sym_name = "allocated", threads = 128} : () -> ()
      // expected-error @below {{protocol error [tmem]: fa4.tmem_dealloc (TMEM regions 'acc' 32) must be executed by exactly one whole warp (its tcgen05 instruction is .sync.aligned, and one warp frees the CTA's allocation), got 128 threads of warps 0,1,2,3 of owner}}
      "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()
      gpu.yield
    }) {sym_name = "owner", warps = array<i32: 0, 1, 2, 3>} : () -> ()
    gpu.yield
  }) {num_warps = 4} : () -> ()
  return
}

// -----

// A plain load (not ``invariant``: the kernel may write that memory) may differ per thread, even at
// one address: a branch on it around protocol ops is not verifiable.
func.func @plain_load_branch(%lengths: !llvm.ptr<1>) {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  %n = llvm.load %lengths : !llvm.ptr<1> -> i32
  %on = arith.cmpi sgt, %n, %c0 : i32
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      // expected-error @below {{protocol error [unsupported]: the verifier cannot tell which threads take this branch}}
      scf.if %on {
        "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// A loop the interpreter does not enter yields a lane's own prefix sum (shfl.sync.up: a function of the
// lane, not the same in every thread; protocol.uniformity): a branch on it around protocol ops is not
// verifiable.
func.func @lane_prefix_branch(%lengths: !llvm.ptr<1>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %c32 = arith.constant 32 : i32
      %sum = scf.for %first = %c0 to %n step %c32 iter_args(%acc = %c0) -> (i32) : i32 {
        %full = arith.constant -1 : i32
        %one = arith.constant 1 : i32
        %zero = arith.constant 0 : i32
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %i = arith.addi %first, %lane : i32
        %p = llvm.getelementptr %lengths[%i] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        %v = llvm.load %p invariant : !llvm.ptr<1> -> i32
        %up = nvvm.shfl.sync up %full, %v, %one, %zero : i32 -> i32
        %prefix = arith.addi %v, %up : i32
        scf.yield %prefix : i32
      }
      %on = arith.cmpi sgt, %sum, %c0 : i32
      // expected-error @below {{protocol error [unsupported]: the verifier cannot tell which threads take this branch}}
      scf.if %on {
        "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// A ballot of a predicate that differs per warp (it reads %tid.x) is not the same in every thread of the
// CTA, even though every lane of one warp holds it: a branch on it around protocol ops is not verifiable.
func.func @warp_ballot_branch(%n: i32) {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %c1 = arith.constant 1 : i32
      %votes = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %c0) -> (i32) : i32 {
        %full = arith.constant -1 : i32
        %c40 = arith.constant 40 : i32
        %tid = nvvm.read.ptx.sreg.tid.x : i32
        %low = arith.cmpi slt, %tid, %c40 : i32
        %bits = nvvm.vote.sync ballot %full, %low -> i32
        scf.yield %bits : i32
      }
      %on = arith.cmpi sgt, %votes, %c0 : i32
      // expected-error @below {{protocol error [unsupported]: the verifier cannot tell which threads take this branch}}
      scf.if %on {
        "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// Two roles branch on warp scans that differ (the reader's adds one more): two unknowns, not one, so in
// some run the writer does not arrive while the reader waits.
func.func @different_scans(%lengths: !llvm.ptr<1>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %ready = "fa4.mbarrier_alloc"() {sym_name = "ready", num_barriers = 1, arrive_count = 32, arrival = "threads"} : () -> !fa4.mbarriers
  "fa4.mbarrier_init"(%ready) : (!fa4.mbarriers) -> ()
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %c32 = arith.constant 32 : i32
      %sum = scf.for %first = %c0 to %n step %c32 iter_args(%acc = %c0) -> (i32) : i32 {
        %full = arith.constant -1 : i32
        %last = arith.constant 31 : i32
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %i = arith.addi %first, %lane : i32
        %p = llvm.getelementptr %lengths[%i] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        %v = llvm.load %p invariant : !llvm.ptr<1> -> i32
        %total = nvvm.shfl.sync idx %full, %v, %last, %last : i32 -> i32
        %next = arith.addi %acc, %total : i32
        scf.yield %next : i32
      }
      %on = arith.cmpi sgt, %sum, %c0 : i32
      scf.if %on {
        "fa4.mbarrier_arrive"(%ready, %c0) : (!fa4.mbarriers, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "writer", warps = array<i32: 0>} : () -> ()
    "fa4.warp_role"() ({
      %c32 = arith.constant 32 : i32
      %sum = scf.for %first = %c0 to %n step %c32 iter_args(%acc = %c0) -> (i32) : i32 {
        %full = arith.constant -1 : i32
        %last = arith.constant 31 : i32
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %i = arith.addi %first, %lane : i32
        %p = llvm.getelementptr %lengths[%i] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        %v = llvm.load %p invariant : !llvm.ptr<1> -> i32
        %total = nvvm.shfl.sync idx %full, %v, %last, %last : i32 -> i32
        %more = arith.addi %acc, %total : i32
        %next = arith.addi %more, %last : i32
        scf.yield %next : i32
      }
      %on = arith.cmpi sgt, %sum, %c0 : i32
      scf.if %on {
        // expected-error @below {{protocol error [deadlock]: reader waits at fa4.mbarrier_try_wait_parity}}
        "fa4.mbarrier_try_wait_parity"(%ready, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()
      }
      gpu.yield
    }) {sym_name = "reader", warps = array<i32: 1>} : () -> ()
    gpu.yield
  }) {num_warps = 2} : () -> ()
  return
}

// -----

// bounds: a role over two warpgroups (verified per warpgroup) takes member w + 1 of a family of two named barriers:
// warpgroup 1's is past the family.
func.func @named_family_index_out_of_range() {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %t = nvvm.read.ptx.sreg.tid.x : i32
      %c128 = arith.constant 128 : i32
      %c1 = arith.constant 1 : i32
      %w = arith.divui %t, %c128 : i32
      %next = arith.addi %w, %c1 : i32
      // expected-error @below {{protocol error [bounds]: named barrier index 2 is out of range for the family 'turn' (2 barriers): every index the kernel reaches must be in [0, 2)}}
      "fa4.named_barrier"(%next) {sym_name = "turn", threads = 128, count = 2} : (i32) -> ()
      gpu.yield
    }) {sym_name = "pair", warps = array<i32: 0, 1, 2, 3, 4, 5, 6, 7>} : () -> ()
    gpu.yield
  }) {num_warps = 8} : () -> ()
  return
}

// -----

// named-barrier: the warpgroups of one role wait on their own members, but only warpgroup 0 is handed its turn:
// warpgroup 1 (the role's process "pair/wg1") waits forever.
func.func @named_family_turn_never_given() {
  "fa4.warp_specialize"() ({
    "fa4.warp_role"() ({
      %t = nvvm.read.ptx.sreg.tid.x : i32
      %c128 = arith.constant 128 : i32
      %c0 = arith.constant 0 : i32
      %w = arith.divui %t, %c128 : i32
      %is0 = arith.cmpi eq, %w, %c0 : i32
      scf.if %is0 {
        "fa4.named_barrier"(%w) {sym_name = "turn", threads = 256, count = 2, kind = "arrive"} : (i32) -> ()
      }
      // expected-error @below {{protocol error [named-barrier]: named barrier 'turn[1]' counts 256 threads but only 128 arrive (pair/wg1 (128 threads of warps 4,5,6,7)) and no role arrives again}}
      "fa4.named_barrier"(%w) {sym_name = "turn", threads = 256, count = 2} : (i32) -> ()
      gpu.yield
    }) {sym_name = "pair", warps = array<i32: 0, 1, 2, 3, 4, 5, 6, 7>} : () -> ()
    gpu.yield
  }) {num_warps = 8} : () -> ()
  return
}
