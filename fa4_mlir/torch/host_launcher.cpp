// The host launcher: torch.ops.fa4.* calls with a layout seen before, launched without Python.
//
// A Python kernel behind the dispatcher costs about 12 us of host time per call on the H100 machine
// before it does anything (docs/PERF.md). This library registers one boxed C++ kernel on the CUDA key
// of the ops Python names (`fa4_host::attach`). A call computes its key from the argument stack (every
// tensor's sizes, strides, dtype and device; every scalar; the FA4_* variables that pick the build) and
// looks up a plan. A plan is what Python's full path checked, encoded and packed for that key
// (fa4_mlir.torch.fastpath): the kernel's function and context, its grid, a copy of its packed parameters,
// which parameters take which tensor's address, and the outputs' sizes, strides and dtypes. A hit
// allocates the outputs, writes the addresses that moved since the plan's last launch
// (cuTensorMapReplaceAddress for a tensor map, 8 bytes for a pointer) and calls cuLaunchKernelEx on the
// current stream. Anything else (no plan, a tensor-map address not 16-byte aligned, a driver error, an
// emulator block open) runs the op's full Python path, `fa4::_<op>_full`: it raises every error the op
// has, and for a plannable call it offers its plan (`fa4_host::offer`), which this library stores under
// the key of the call that made it. The driver is opened with dlopen: no link to libcuda.
//
// Built with FA4_HOST_LAUNCHER_CPU_TEST (test/python/test_host_launcher.py, on CPU-only PyTorch) it
// attaches to the CPU key, allocates the outputs on the CPU, launches on stream 0 and opens the stub
// driver that FA4_HOST_LAUNCHER_TEST_LIBCUDA names: the same logic, tested where no GPU is.
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>
#ifndef FA4_HOST_LAUNCHER_CPU_TEST
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using CUresult = int;
struct LaunchConfig {  // CUlaunchConfig (cuda.h)
  unsigned grid[3], block[3], smem;
  void* stream;
  void* attrs;
  unsigned num_attrs;
};

struct LaunchAttribute {  // CUlaunchAttribute (cuda.h): id, padding to 8 bytes, a 64-byte value union
  int id;
  char pad[4];
  unsigned value[16];
};
constexpr int kClusterDimension = 4;  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: value holds clusterDim x, y, z

struct Driver {
  CUresult (*launch)(const LaunchConfig*, void*, void**, void**) = nullptr;
  CUresult (*replace)(void*, void*) = nullptr;
  CUresult (*get_context)(void**) = nullptr;
  CUresult (*set_context)(void*) = nullptr;
  bool ok = false;
};

const Driver& driver() {
  static const Driver d = [] {
    Driver out;
#ifdef FA4_HOST_LAUNCHER_CPU_TEST
    const char* path = std::getenv("FA4_HOST_LAUNCHER_TEST_LIBCUDA");
    void* lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
#else
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
#endif
    if (lib == nullptr) return out;
    out.launch = reinterpret_cast<decltype(out.launch)>(dlsym(lib, "cuLaunchKernelEx"));
    out.replace = reinterpret_cast<decltype(out.replace)>(dlsym(lib, "cuTensorMapReplaceAddress"));
    out.get_context = reinterpret_cast<decltype(out.get_context)>(dlsym(lib, "cuCtxGetCurrent"));
    out.set_context = reinterpret_cast<decltype(out.set_context)>(dlsym(lib, "cuCtxSetCurrent"));
    out.ok = out.launch && out.replace && out.get_context && out.set_context;
    return out;
  }();
  return d;
}

constexpr size_t kMapBytes = 128, kMapAlign = 64, kMaxPlans = 1024;
const char* const kEnvNames[] = {"FA4_DEVICE", "FA4_DEBUG", "FA4_DEBUG_TIMEOUT_MS"};

struct Slot {
  size_t param;     // the packed parameter it writes
  bool is_map;      // a CUtensorMap (else an 8-byte pointer)
  int64_t source;   // argument index (>= 0) or -1 - output index
  uint64_t held;    // the address the parameter holds now (0: unknown)
};

struct Output {
  std::vector<int64_t> sizes, strides;
  at::TensorOptions options;
  bool contiguous;
};

struct Plan {
  std::mutex mutex;  // a launch writes the shared parameter buffer, then launches it
  void* function = nullptr;
  void* context = nullptr;
  LaunchConfig config{};
  LaunchAttribute cluster{};  // config.attrs points here for a cluster launch
  std::unique_ptr<uint8_t, decltype(&std::free)> blob{nullptr, &std::free};
  std::vector<void*> params;
  std::vector<Slot> slots;
  std::vector<Output> outputs;
  c10::DeviceIndex device = 0;
};

std::mutex table_mutex;
std::unordered_map<std::string, std::shared_ptr<Plan>> table;
std::deque<std::string> table_order;  // the oldest plan is dropped first
std::atomic<int64_t> bypass{0}, hits{0}, misses{0};
thread_local std::shared_ptr<Plan> offered;  // what the full path offered during this thread's fallback

template <typename T>
void put(std::string& key, const T& value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// The plan key of a call: false when an argument is of a kind no plan covers.
bool make_key(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t n_args, std::string& key) {
  key.append(op.operator_name().name).push_back('\0');
  for (const char* name : kEnvNames) {
    const char* value = std::getenv(name);
    key.push_back(value ? 'S' : 'U');
    if (value) key.append(value).push_back('\0');
  }
  for (size_t i = stack.size() - n_args; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) return false;
      key.push_back('T');
      put(key, static_cast<int64_t>(t.dim()));
      for (int64_t s : t.sizes()) put(key, s);
      for (int64_t s : t.strides()) put(key, s);
      put(key, static_cast<int8_t>(t.scalar_type()));
      put(key, static_cast<int8_t>(t.device().type()));
      put(key, static_cast<int8_t>(t.device().index()));
    } else if (v.isNone()) {
      key.push_back('N');
    } else if (v.isBool()) {
      key.push_back(v.toBool() ? 'Y' : 'F');
    } else if (v.isDouble()) {
      key.push_back('D');
      put(key, v.toDouble());
    } else if (v.isInt()) {
      key.push_back('I');
      put(key, v.toInt());
    } else {
      return false;
    }
  }
  return true;
}

at::Tensor allocate(const Output& o) {
#ifndef FA4_HOST_LAUNCHER_CPU_TEST
  // The caching allocator without the dispatcher (about 0.5 us less per output), unless deterministic
  // mode asks that empty tensors be filled (what at::empty does then).
  if (!at::globalContext().deterministicFillUninitializedMemory() || !at::globalContext().deterministicAlgorithms())
    return o.contiguous ? at::Tensor(at::detail::empty_cuda(o.sizes, o.options))
                        : at::Tensor(at::detail::empty_strided_cuda(o.sizes, o.strides, o.options));
#endif
  return o.contiguous ? at::empty(o.sizes, o.options) : at::empty_strided(o.sizes, o.strides, o.options);
}

void* current_stream(c10::DeviceIndex device) {
#ifdef FA4_HOST_LAUNCHER_CPU_TEST
  return nullptr;
#else
  return c10::cuda::getCurrentCUDAStream(device).stream();
#endif
}

// Launch `plan` for the call on `stack`: pops the arguments and pushes the outputs. False (stack
// untouched) when the call must take the full path instead.
bool run(Plan& plan, torch::jit::Stack& stack, size_t n_args) {
  const Driver& cuda = driver();
  const size_t base = stack.size() - n_args;
  std::vector<at::Tensor> outs;
  outs.reserve(plan.outputs.size());
  for (const Output& o : plan.outputs) outs.push_back(allocate(o));
  uint64_t addresses[16];
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const Slot& s = plan.slots[i];
    const at::Tensor& t = s.source >= 0 ? stack[base + s.source].toTensor() : outs[-1 - s.source];
    addresses[i] = reinterpret_cast<uint64_t>(t.data_ptr());
    if (s.is_map && addresses[i] % 16 != 0) return false;  // the full path names the misaligned tensor
  }
  void* stream = current_stream(plan.device);
  {
    std::lock_guard<std::mutex> lock(plan.mutex);
    for (size_t i = 0; i < plan.slots.size(); ++i) {
      Slot& s = plan.slots[i];
      if (s.held == addresses[i]) continue;
      s.held = 0;
      void* param = plan.params[s.param];
      if (s.is_map) {
        if (cuda.replace(param, reinterpret_cast<void*>(addresses[i])) != 0) return false;
      } else {
        std::memcpy(param, &addresses[i], sizeof(uint64_t));
      }
      s.held = addresses[i];
    }
    void* current = nullptr;
    if (cuda.get_context(&current) != 0) return false;
    if (current != plan.context && cuda.set_context(plan.context) != 0) return false;
    plan.config.stream = stream;
    // A failed launch takes the full path, which launches again and raises the driver's error by name.
    if (cuda.launch(&plan.config, plan.function, plan.params.data(), nullptr) != 0) return false;
  }
  torch::jit::drop(stack, n_args);
  for (at::Tensor& t : outs) stack.emplace_back(std::move(t));
  return true;
}

const c10::OperatorHandle& full_path(const c10::OperatorHandle& op) {
  static std::mutex mutex;
  static std::unordered_map<std::string, c10::OperatorHandle> found;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string& name = op.operator_name().name;  // "fa4::flash_attention"
  auto it = found.find(name);
  if (it == found.end()) {
    const size_t colons = name.find("::");
    const std::string full = name.substr(0, colons + 2) + "_" + name.substr(colons + 2) + "_full";
    it = found.emplace(name, c10::Dispatcher::singleton().findSchemaOrThrow(full.c_str(), "")).first;
  }
  return it->second;
}

void store(const std::string& key, std::shared_ptr<Plan> plan) {
  std::lock_guard<std::mutex> lock(table_mutex);
  if (table.find(key) == table.end()) {
    table_order.push_back(key);
    if (table_order.size() > kMaxPlans) {
      table.erase(table_order.front());
      table_order.pop_front();
    }
  }
  table[key] = std::move(plan);
}

void planned_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n_args = op.schema().arguments().size();
  std::string key;
  bool keyed = false;
  if (bypass.load(std::memory_order_relaxed) == 0 && driver().ok) {
    key.reserve(256);
    keyed = make_key(op, *stack, n_args, key);
    if (keyed) {
      std::shared_ptr<Plan> plan;
      {
        std::lock_guard<std::mutex> lock(table_mutex);
        auto it = table.find(key);
        if (it != table.end()) plan = it->second;
      }
      if (plan && run(*plan, *stack, n_args)) {
        hits.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    }
  }
  misses.fetch_add(1, std::memory_order_relaxed);
  offered.reset();
  full_path(op).callBoxed(stack);  // the checks, the errors, the launch; it may offer a plan
  std::shared_ptr<Plan> plan = std::move(offered);
  offered.reset();
  if (!plan || !keyed) return;
  const size_t n_returns = op.schema().returns().size();
  for (size_t i = stack->size() - n_returns; i < stack->size(); ++i) {
    if (!(*stack)[i].isTensor()) return;  // only tensor outputs are planned
    const at::Tensor& t = (*stack)[i].toTensor();
    plan->outputs.push_back(Output{t.sizes().vec(), t.strides().vec(), t.options(), t.is_contiguous()});
  }
  store(key, std::move(plan));
}

// What the full path hands over: the kernel (function, context, name for errors), the launch
// geometry, the packed parameters (copied here: address and size of each), and per address slot the
// parameter it writes, whether that is a tensor map, and its source (argument index, or -1 - output).
void offer(int64_t function, int64_t context, int64_t device, c10::IntArrayRef grid, c10::IntArrayRef block,
           int64_t smem, c10::IntArrayRef param_addresses, c10::IntArrayRef param_sizes,
           c10::IntArrayRef slot_params, c10::IntArrayRef slot_maps, c10::IntArrayRef slot_sources,
           c10::IntArrayRef cluster) {
  TORCH_CHECK(grid.size() == 3 && block.size() == 3, "fa4_host::offer: grid and block must have 3 entries, got ",
              grid.size(), " and ", block.size());
  TORCH_CHECK(cluster.size() == 3 && cluster[0] >= 1 && cluster[1] >= 1 && cluster[2] >= 1,
              "fa4_host::offer: cluster must be 3 sizes >= 1, got ", cluster);
  TORCH_CHECK(param_addresses.size() == param_sizes.size(), "fa4_host::offer: param_addresses and param_sizes "
              "must have one length, got ", param_addresses.size(), " and ", param_sizes.size());
  TORCH_CHECK(slot_params.size() == slot_maps.size() && slot_params.size() == slot_sources.size() &&
              slot_params.size() <= 16, "fa4_host::offer: the slot lists must have one length <= 16, got ",
              slot_params.size(), ", ", slot_maps.size(), ", ", slot_sources.size());
  auto plan = std::make_shared<Plan>();
  plan->function = reinterpret_cast<void*>(function);
  plan->context = reinterpret_cast<void*>(context);
  plan->device = static_cast<c10::DeviceIndex>(device);
  for (int i = 0; i < 3; ++i) {
    plan->config.grid[i] = static_cast<unsigned>(grid[i]);
    plan->config.block[i] = static_cast<unsigned>(block[i]);
  }
  plan->config.smem = static_cast<unsigned>(smem);
  if (cluster[0] * cluster[1] * cluster[2] > 1) {
    plan->cluster.id = kClusterDimension;
    for (int i = 0; i < 3; ++i) plan->cluster.value[i] = static_cast<unsigned>(cluster[i]);
    plan->config.attrs = &plan->cluster;
    plan->config.num_attrs = 1;
  }
  std::vector<size_t> offsets;
  size_t total = 0;
  for (int64_t size : param_sizes) {
    TORCH_CHECK(size > 0, "fa4_host::offer: a parameter size must be > 0, got ", size);
    total = (total + kMapAlign - 1) / kMapAlign * kMapAlign;  // every parameter 64-byte aligned
    offsets.push_back(total);
    total += static_cast<size_t>(size);
  }
  plan->blob.reset(static_cast<uint8_t*>(std::aligned_alloc(kMapAlign, std::max<size_t>(kMapAlign,
                                                                                      (total + 63) / 64 * 64))));
  TORCH_CHECK(plan->blob, "fa4_host::offer: out of host memory");
  for (size_t i = 0; i < offsets.size(); ++i) {
    std::memcpy(plan->blob.get() + offsets[i], reinterpret_cast<const void*>(param_addresses[i]), param_sizes[i]);
    plan->params.push_back(plan->blob.get() + offsets[i]);
  }
  for (size_t i = 0; i < slot_params.size(); ++i) {
    const size_t param = static_cast<size_t>(slot_params[i]);
    TORCH_CHECK(param < offsets.size(), "fa4_host::offer: slot ", i, " must name a parameter < ", offsets.size(),
                ", got ", param);
    const bool is_map = slot_maps[i] != 0;
    TORCH_CHECK(param_sizes[param] == (is_map ? static_cast<int64_t>(kMapBytes) : 8), "fa4_host::offer: slot ", i,
                " must name a ", is_map ? "128-byte tensor map" : "8-byte pointer", ", got ", param_sizes[param],
                " bytes");
    plan->slots.push_back(Slot{param, is_map, slot_sources[i], 0});
  }
  offered = std::move(plan);
}

std::vector<std::unique_ptr<torch::Library>> attached;

void attach(const std::string& ns, const std::string& name) {
#ifdef FA4_HOST_LAUNCHER_CPU_TEST
  const c10::DispatchKey key = c10::DispatchKey::CPU;
#else
  const c10::DispatchKey key = c10::DispatchKey::CUDA;
#endif
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, key, __FILE__, __LINE__);
  lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&planned_kernel>());
  attached.push_back(std::move(lib));
}


int64_t add_bypass(int64_t delta) { return bypass.fetch_add(delta) + delta; }

std::vector<int64_t> stats() {
  std::lock_guard<std::mutex> lock(table_mutex);
  return {hits.load(), misses.load(), static_cast<int64_t>(table.size()), static_cast<int64_t>(attached.size())};
}

void clear() {
  std::lock_guard<std::mutex> lock(table_mutex);
  table.clear();
  table_order.clear();
}

void detach() {
  attached.clear();
  clear();
}

}  // namespace

TORCH_LIBRARY(fa4_host, m) {
  m.def("offer(int function, int context, int device, int[] grid, int[] block, int smem, int[] param_addresses, "
        "int[] param_sizes, int[] slot_params, int[] slot_maps, int[] slot_sources, int[] cluster=[1, 1, 1]) -> ()",
        &offer);
  m.def("attach(str ns, str name) -> ()", &attach);
  m.def("detach() -> ()", &detach);
  m.def("add_bypass(int delta) -> int", &add_bypass);
  m.def("stats() -> int[]", &stats);
  m.def("clear() -> ()", &clear);
}
