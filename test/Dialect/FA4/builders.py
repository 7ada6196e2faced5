# IR built with the Python builders prints as the fa4 ops it declares.
# RUN: %PYTHON %s | FileCheck %s

from fa4_mlir._mlir import ir
from fa4_mlir.core.context import make_context
from fa4_mlir.dialects import fa4


def run(f):
    print("TEST:", f.__name__)
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            f()
        assert module.operation.verify()
        print(module)
    return f


# CHECK-LABEL: TEST: test_tma_pipeline
# CHECK: %[[FULL:.*]] = "fa4.mbarrier_alloc"() {arrival = "tx", arrive_count = 1 : i64, num_barriers = 3 : i64, sym_name = "kv_full"}
# CHECK: %[[EMPTY:.*]] = "fa4.mbarrier_alloc"() {arrival = "commit", arrive_count = 1 : i64, num_barriers = 3 : i64, sym_name = "kv_empty"}
# CHECK: %[[P:.*]] = "fa4.pipeline_create"(%[[FULL]], %[[EMPTY]]) {num_stages = 3 : i64, sym_name = "kv"}
# CHECK: %[[S:.*]]:2 = "fa4.pipeline_initial_state"(%[[P]]) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)
# CHECK: "fa4.pipeline_producer_acquire"(%[[P]], %[[S]]#0, %[[S]]#1) : (!fa4.pipeline, i32, i32) -> ()
# CHECK: "fa4.pipeline_producer_commit"(%[[P]], %[[S]]#0) {tx_bytes = 16384 : i64}
# CHECK: "fa4.pipeline_advance"(%[[P]], %[[S]]#0, %[[S]]#1) : (!fa4.pipeline, i32, i32) -> (i32, i32)
@run
def test_tma_pipeline():
    full = fa4.mbarrier_alloc(sym_name="kv_full", num_barriers=3, arrive_count=1, arrival="tx")
    empty = fa4.mbarrier_alloc(sym_name="kv_empty", num_barriers=3, arrive_count=1, arrival="commit")
    pipe = fa4.pipeline_create(full, empty, sym_name="kv", num_stages=3)
    stage, phase = fa4.pipeline_initial_state(pipe, side="producer")
    fa4.pipeline_producer_acquire(pipe, stage, phase)
    fa4.pipeline_producer_commit(pipe, stage, tx_bytes=16384)
    fa4.pipeline_advance(pipe, stage, phase)


# CHECK-LABEL: TEST: test_roles_and_regions
# CHECK: "fa4.smem_region"() {align = 1024 : i64, bytes = 32768 : i64, swizzle = "128B", sym_name = "q"}
# CHECK: "fa4.smem_alias"(%{{.*}}) {bytes = 32768 : i64, sym_name = "o"}
# CHECK: "fa4.tmem_region"() {columns = 128 : i64, sym_name = "S0"}
# CHECK: "fa4.warp_specialize"() ({
# CHECK-NEXT: "fa4.warp_role"() ({
# CHECK-NEXT: "fa4.elect_one"() : () -> i1
# CHECK-NEXT: gpu.yield
# CHECK-NEXT: }) {registers = 40 : i64, sym_name = "load", warps = array<i32: 4>} : () -> ()
# CHECK-NEXT: gpu.yield
# CHECK-NEXT: }) {num_warps = 8 : i64} : () -> ()
@run
def test_roles_and_regions():
    q = fa4.smem_region(sym_name="q", bytes=32768, align=1024, swizzle="128B")
    fa4.smem_alias(q, sym_name="o", bytes=32768)
    fa4.tmem_region(sym_name="S0", columns=128)
    ws = fa4.warp_specialize(num_warps=8)
    with ws.region_ip():
        role = fa4.warp_role(sym_name="load", warps=[4], registers=40)
        with role.region_ip():
            fa4.elect_one()
