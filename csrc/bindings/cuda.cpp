// Bindings for CUDA device timing: events, timing loops bracketed by events,
// the cold-L2 flush buffer and clock readings.
//
// The driver is reached through detail/cuda_driver.h's tables, loaded on first
// use, so this file compiles without CUDA and `import opbench` works on any
// machine; only constructing a CudaContext needs a GPU.
//
// Launch hold: a statement whose host-side launch takes longer than its kernel
// leaves the GPU idle between launches, and events around a block of calls
// would then time the host. Like nvbench's blocking kernel, each block is
// queued behind a cuStreamWaitValue32 on a host-mapped flag that the loop
// writes only once the whole block is queued, so the GPU runs it back to back.
// A statement that waits for the GPU inside the block (.item(), a synchronize)
// would deadlock against the hold, so a watchdog thread releases the flag when
// the loop makes no progress; the run is then repeated without the hold and a
// warning says why.
#include <Python.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pybind11/stl.h>

#include "bindings/registry.h"
#include "detail/cuda_driver.h"
#include "detail/cuda_fake.h"
#include "detail/pycall.h"
#include "opbench/clock.h"

namespace py = pybind11;
using namespace opbench::cuda;

namespace {

// --- which driver -----------------------------------------------------------

struct DriverSource {
  std::string libcuda = "libcuda.so.1";
  std::string libnvml = "libnvidia-ml.so.1";
  std::shared_ptr<Driver> current;  // null until first use (or after a switch)
  bool fake = false;
};

DriverSource& source() {
  static DriverSource s;
  return s;
}

// Loading failures are not cached: a later call retries (cheap), and the
// error is raised at each use, never at import.
std::shared_ptr<Driver> current_driver() {
  DriverSource& s = source();
  if (!s.current) s.current = load_driver(s.libcuda, s.libnvml);
  return s.current;
}

// --- the launch-hold watchdog ----------------------------------------------

// Releases a held stream if the timing loop stops making progress, which only
// happens when the statement waits for work queued behind the hold.
class Watchdog {
 public:
  Watchdog(std::uint32_t* flag, double timeout_s)
      : flag_(flag), timeout_ns_(static_cast<std::int64_t>(timeout_s * 1e9)) {
    if (flag_ != nullptr) thread_ = std::thread([this] { watch(); });
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lk(m_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void arm(std::uint32_t value) {
    value_.store(value);
    progress();
    armed_.store(true);
  }
  void disarm() { armed_.store(false); }
  void progress() { last_ns_.store(opbench::now_ns()); }
  bool fired() const { return fired_.load(); }

 private:
  void watch() {
    std::unique_lock<std::mutex> lk(m_);
    const auto poll = std::chrono::nanoseconds(std::max<std::int64_t>(timeout_ns_ / 4, 1000000));
    while (!done_) {
      cv_.wait_for(lk, poll);
      if (done_ || !armed_.load()) continue;
      if (opbench::now_ns() - last_ns_.load() >= timeout_ns_) {
        __atomic_store_n(flag_, value_.load(), __ATOMIC_RELEASE);
        fired_.store(true);
        armed_.store(false);
      }
    }
  }

  std::uint32_t* flag_;
  std::int64_t timeout_ns_;
  std::atomic<std::uint32_t> value_{0};
  std::atomic<std::int64_t> last_ns_{0};
  std::atomic<bool> armed_{false}, fired_{false};
  bool done_ = false;
  std::mutex m_;
  std::condition_variable cv_;
  std::thread thread_;
};

// The watchdog released a hold. `calls_queued`: calls that returned before
// the stall. None means the statement itself waits for the GPU; some means
// the launch queue filled up, and a smaller block fits.
struct HoldTimedOut {
  long long calls_queued;
};

// --- the context ------------------------------------------------------------

// One device's primary context (the one the CUDA runtime, hence torch, uses),
// retained for the object's lifetime, plus the reusable timing resources:
// an event pool, the L2 flush buffer and the hold flag.
class Context {
 public:
  explicit Context(int ordinal) : d_(current_driver()), ordinal_(ordinal) {
    const CudaTable& cu = d_->cu;
    const CUresult init = cu.cuInit(0);
    if (init == CUDA_ERROR_NO_DEVICE)
      throw CudaError("no CUDA device: cuInit reports " + d_->describe(init) +
                          " (the NVIDIA driver is installed but sees no GPU; check "
                          "CUDA_VISIBLE_DEVICES)",
                      "cuInit", init);
    d_->check(init, "cuInit");
    int count = 0;
    d_->check(cu.cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= count)
      throw CudaError("CUDA device " + std::to_string(ordinal) + " requested, but this machine has " +
                          std::to_string(count) + " (valid: 0.." + std::to_string(count - 1) + ")",
                      "cuDeviceGet", CUDA_ERROR_INVALID_DEVICE);
    d_->check(cu.cuDeviceGet(&dev_, ordinal), "cuDeviceGet");
    d_->check(cu.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
    make_current();
    hold_ = cu.cuStreamWaitValue32 && cu.cuMemHostAlloc && cu.cuMemHostGetDevicePointer && cu.cuMemFreeHost;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Teardown never throws: at interpreter exit the driver may already be
  // shutting down, and a leaked event is better than an abort.
  ~Context() {
    const CudaTable& cu = d_->cu;
    cu.cuCtxSetCurrent(ctx_);
    for (CUevent e : events_) cu.cuEventDestroy(e);
    if (flush_buf_) cu.cuMemFree(flush_buf_);
    if (flag_host_) cu.cuMemFreeHost(flag_host_);
    cu.cuDevicePrimaryCtxRelease(dev_);
  }

  const Driver& driver() const { return *d_; }
  // The primary context must be current on the calling thread; torch makes it
  // current lazily, and only on threads that touched CUDA.
  void make_current() const { d_->check(d_->cu.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

  py::dict info() {
    make_current();
    const CudaTable& cu = d_->cu;
    char name[256] = {0};
    char bus[64] = {0};
    int l2 = 0;
    int version = 0;
    d_->check(cu.cuDeviceGetName(name, sizeof name, dev_), "cuDeviceGetName");
    d_->check(cu.cuDeviceGetPCIBusId(bus, sizeof bus, dev_), "cuDeviceGetPCIBusId");
    d_->check(cu.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev_),
              "cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)");
    d_->check(cu.cuDriverGetVersion(&version), "cuDriverGetVersion");
    py::dict out;
    out["name"] = std::string(name);
    out["index"] = ordinal_;
    out["pci_bus_id"] = std::string(bus);
    out["l2_cache_bytes"] = l2;
    out["cuda_driver_version"] = version;
    out["driver_version"] = py::none();
    if (nvml_ready()) {
      char v[96] = {0};
      if (d_->nvml.nvmlSystemGetDriverVersion(v, sizeof v) == NVML_SUCCESS) out["driver_version"] = std::string(v);
    }
    out["driver"] = d_->origin;
    return out;
  }

  /// (SM MHz, memory MHz) now, or None when NVML cannot say (see clock_problem).
  py::object clocks() {
    if (!nvml_ready()) return py::none();
    unsigned sm = 0;
    unsigned mem = 0;
    const nvmlReturn_t a = d_->nvml.nvmlDeviceGetClockInfo(nvml_dev_, NVML_CLOCK_SM, &sm);
    const nvmlReturn_t b = d_->nvml.nvmlDeviceGetClockInfo(nvml_dev_, NVML_CLOCK_MEM, &mem);
    if (a != NVML_SUCCESS || b != NVML_SUCCESS) {
      clock_problem_ = std::string("nvmlDeviceGetClockInfo failed: ") +
                       d_->nvml.nvmlErrorString(a != NVML_SUCCESS ? a : b);
      return py::none();
    }
    return py::make_tuple(sm, mem);
  }
  std::string clock_problem() const { return clock_problem_; }

  /// Allocates the cold-cache flush buffer once; resizing frees the old one.
  void set_flush_bytes(std::size_t bytes) {
    if (bytes == flush_bytes_) return;
    make_current();
    if (flush_buf_) {
      d_->check(d_->cu.cuMemFree(flush_buf_), "cuMemFree");
      flush_buf_ = 0;
      flush_bytes_ = 0;
    }
    if (bytes == 0) return;
    d_->check(d_->cu.cuMemAlloc(&flush_buf_, bytes), "cuMemAlloc (L2 flush buffer)");
    flush_bytes_ = bytes;
  }
  std::size_t flush_bytes() const { return flush_bytes_; }

  /// Device seconds, one entry per timed window: per call (per_call) or per
  /// block of calls. Cold-cache flushes (flush) go before each call's window.
  std::vector<double> run(py::handle fn, long long number, std::uintptr_t stream, bool per_call, bool flush) {
    if (number < 0) throw py::value_error("number must be >= 0, got " + std::to_string(number));
    if (flush && !per_call) throw py::value_error("a cold-L2 flush needs per-call windows (per_call=True)");
    if (flush && flush_bytes_ == 0) throw py::value_error("no flush buffer: call set_flush_bytes(n) first");
    const opbench::detail::NoArgCall call(fn);
    make_current();
    const auto s = reinterpret_cast<CUstream>(stream);
    for (;;) {
      try {
        return run_once(call, number, s, per_call, flush);
      } catch (const HoldTimedOut& stall) {
        if (stall.calls_queued > 0) {
          hold_chunk = std::max(1LL, stall.calls_queued / 2);
          continue;
        }
        hold_ = false;
        // The run's windows are invalid (they include the stall); repeat it unheld.
        // Through opbench.errors.warn, so the warning is also kept on the Measurement.
        py::module_ errors = py::module_::import("opbench.errors");
        errors.attr("warn")(errors.attr("LaunchHoldWarning"),
                            "opbench.cuda: the statement waited for the GPU while its launches were held "
                            "back (it synchronizes, e.g. .item(), .cpu() or torch.cuda.synchronize(), or "
                            "queues more work than the launch queue holds); timing continues without the "
                            "hold, so launch gaps between calls count as device time");
      }
    }
  }

  bool hold_enabled() const { return hold_; }
  void set_hold(bool on) {
    if (on && !(d_->cu.cuStreamWaitValue32 && d_->cu.cuMemHostAlloc))
      throw py::value_error("this driver lacks cuStreamWaitValue32: launches cannot be held");
    hold_ = on;
  }
  // Calls queued behind one hold: a real launch queue takes on the order of a
  // thousand launches, and a fill-up stall halves this (see run()).
  long long hold_chunk = 256;
  double watchdog_s = 2.0;     // no progress for this long means the statement waits on the hold

  CUevent new_event() {
    make_current();
    CUevent e = nullptr;
    d_->check(d_->cu.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    return e;
  }

  /// Waits for `e`, with the GIL released. A fault in work queued before it
  /// (the statement's kernels) is reported here, so the message says so.
  void wait(CUevent e, const char* what) const {
    CUresult r;
    {
      py::gil_scoped_release nogil;
      r = d_->cu.cuEventSynchronize(e);
    }
    if (r != CUDA_SUCCESS)
      throw CudaError(std::string("cuEventSynchronize failed: ") + d_->describe(r) + " (raised by GPU work " +
                          what + ")",
                      "cuEventSynchronize", r);
  }

  double elapsed_s(CUevent a, CUevent b) const {
    float ms = 0;
    d_->check(d_->cu.cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime");
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  bool nvml_ready() {
    if (nvml_dev_ != nullptr) return true;
    if (!d_->has_nvml) {
      clock_problem_ = d_->nvml_problem;
      return false;
    }
    if (!d_->nvml_initialised) {
      const nvmlReturn_t r = d_->nvml.nvmlInit();
      if (r != NVML_SUCCESS) {
        clock_problem_ = std::string("nvmlInit failed: ") + d_->nvml.nvmlErrorString(r);
        return false;
      }
      d_->nvml_initialised = true;
    }
    // By PCI bus id: NVML numbers all GPUs, CUDA only the visible ones.
    char bus[64] = {0};
    if (d_->cu.cuDeviceGetPCIBusId(bus, sizeof bus, dev_) != CUDA_SUCCESS) return false;
    const nvmlReturn_t r = d_->nvml.nvmlDeviceGetHandleByPciBusId(bus, &nvml_dev_);
    if (r != NVML_SUCCESS) {
      nvml_dev_ = nullptr;
      clock_problem_ = std::string("nvmlDeviceGetHandleByPciBusId failed: ") + d_->nvml.nvmlErrorString(r);
      return false;
    }
    return true;
  }

  void ensure_events(std::size_t n) {
    while (events_.size() < n) events_.push_back(new_event());
  }

  // The pinned, device-mapped word a held stream waits on. Written by the
  // host only; the sequence number only grows, so a wait already queued can
  // never be stranded by a later write.
  bool ensure_flag() {
    if (flag_host_) return true;
    void* p = nullptr;
    if (d_->cu.cuMemHostAlloc(&p, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS)
      return false;
    CUdeviceptr dp = 0;
    if (d_->cu.cuMemHostGetDevicePointer(&dp, p, 0) != CUDA_SUCCESS) {
      d_->cu.cuMemFreeHost(p);
      return false;
    }
    flag_host_ = static_cast<std::uint32_t*>(p);
    __atomic_store_n(flag_host_, 0u, __ATOMIC_RELEASE);
    flag_dev_ = dp;
    return true;
  }

  // Queues a wait for the next sequence number; false (hold turned off) when
  // the device refuses stream memory operations.
  bool hold_stream(CUstream s) {
    if (!ensure_flag() ||
        d_->cu.cuStreamWaitValue32(s, flag_dev_, seq_ + 1, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
      hold_ = false;
      return false;
    }
    ++seq_;
    return true;
  }

  void release_stream() { __atomic_store_n(flag_host_, seq_, __ATOMIC_RELEASE); }

  std::vector<double> run_once(const opbench::detail::NoArgCall& call, long long number, CUstream s,
                               bool per_call, bool flush) {
    const CudaTable& cu = d_->cu;
    if (per_call && number == 0) return {};
    if (hold_ && !ensure_flag()) hold_ = false;
    const bool hold = hold_ && hold_chunk > 0;
    const long long chunk_calls = per_call ? std::min<long long>(hold ? hold_chunk : 256, std::max(number, 1LL))
                                           : (hold ? hold_chunk : std::max(number, 1LL));
    ensure_events(per_call ? 2 * static_cast<std::size_t>(chunk_calls) : 2);
    std::vector<double> out;
    Watchdog dog(hold ? flag_host_ : nullptr, watchdog_s);
    long long done = 0;
    do {
      const long long n = std::min(chunk_calls, number - done);
      bool held = hold && hold_ && hold_stream(s);
      // Whatever leaves this block (a Python exception, a CUDA error) must not
      // leave the stream held, or everything later on it would hang.
      struct Release {
        Context* c;
        Watchdog* dog;
        bool* held;
        ~Release() {
          if (*held) c->release_stream();
          dog->disarm();
        }
      } release{this, &dog, &held};
      if (held) dog.arm(seq_);
      if (!per_call) d_->check(cu.cuEventRecord(events_[0], s), "cuEventRecord");
      for (long long i = 0; i < n; ++i) {
        if (flush) {
          const auto fill = static_cast<unsigned char>(flush_count_++ & 1);
          d_->check(cu.cuMemsetD8Async(flush_buf_, fill, flush_bytes_, s), "cuMemsetD8Async (L2 flush)");
        }
        if (per_call) d_->check(cu.cuEventRecord(events_[2 * i], s), "cuEventRecord");
        call();
        if (per_call) d_->check(cu.cuEventRecord(events_[2 * i + 1], s), "cuEventRecord");
        if (held) {
          if (dog.fired()) throw HoldTimedOut{i};
          dog.progress();
        }
      }
      if (!per_call) d_->check(cu.cuEventRecord(events_[1], s), "cuEventRecord");
      if (held) {
        release_stream();
        dog.disarm();
        held = false;
      }
      const std::size_t windows = per_call ? static_cast<std::size_t>(n) : 1;
      wait(events_[2 * windows - 1], "queued in the timed region");
      if (dog.fired()) throw HoldTimedOut{n};
      for (std::size_t w = 0; w < windows; ++w) out.push_back(elapsed_s(events_[2 * w], events_[2 * w + 1]));
      done += n;
    } while (done < number);
    return out;
  }

  std::shared_ptr<Driver> d_;
  int ordinal_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::vector<CUevent> events_;
  CUdeviceptr flush_buf_ = 0;
  std::size_t flush_bytes_ = 0;
  unsigned long long flush_count_ = 0;
  bool hold_ = false;
  std::uint32_t* flag_host_ = nullptr;
  CUdeviceptr flag_dev_ = 0;
  std::uint32_t seq_ = 0;
  nvmlDevice_t nvml_dev_ = nullptr;
  std::string clock_problem_;
};

// A CUDA event on a context, for user code that brackets its own regions.
class Event {
 public:
  explicit Event(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)), e_(ctx_->new_event()) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { ctx_->driver().cu.cuEventDestroy(e_); }

  void record(std::uintptr_t stream) {
    ctx_->make_current();
    ctx_->driver().check(ctx_->driver().cu.cuEventRecord(e_, reinterpret_cast<CUstream>(stream)),
                         "cuEventRecord");
    recorded_ = true;
  }
  void synchronize() {
    require_recorded("synchronize");
    ctx_->wait(e_, "queued before this event");
  }
  bool query() {
    require_recorded("query");
    const CUresult r = ctx_->driver().cu.cuEventQuery(e_);
    if (r == CUDA_ERROR_NOT_READY) return false;
    ctx_->driver().check(r, "cuEventQuery");
    return true;
  }
  /// Milliseconds from this event to `end`, as torch.cuda.Event.elapsed_time.
  double elapsed_time(const Event& end) {
    require_recorded("elapsed_time");
    if (!end.recorded_) throw py::value_error("the end event was never recorded: call end.record() first");
    return ctx_->elapsed_s(e_, end.e_) * 1e3;
  }

 private:
  void require_recorded(const char* what) const {
    if (!recorded_) throw py::value_error(std::string("Event.") + what + "() before Event.record()");
  }
  std::shared_ptr<Context> ctx_;
  CUevent e_;
  bool recorded_ = false;
};

fake::Config fake_config(const py::dict& d) {
  fake::Config c;
  for (auto item : d) {
    const auto key = item.first.cast<std::string>();
    const py::handle v = item.second;
    if (key == "device_count") c.device_count = v.cast<int>();
    else if (key == "name") c.name = v.cast<std::string>();
    else if (key == "l2_bytes") c.l2_bytes = v.cast<int>();
    else if (key == "driver_version") c.driver_version = v.cast<int>();
    else if (key == "nvml") c.nvml = v.cast<bool>();
    else if (key == "nvml_driver_version") c.nvml_driver_version = v.cast<std::string>();
    else if (key == "sm_clocks") c.sm_clocks = v.cast<std::vector<unsigned>>();
    else if (key == "mem_clocks") c.mem_clocks = v.cast<std::vector<unsigned>>();
    else if (key == "memset_bytes_per_ms") c.memset_bytes_per_ms = v.cast<double>();
    else if (key == "stream_mem_ops") c.stream_mem_ops = v.cast<bool>();
    else if (key == "queue_depth") c.queue_depth = v.cast<long>();
    else
      throw py::value_error("unknown fake driver option '" + key +
                            "'; valid: device_count, name, l2_bytes, driver_version, nvml, "
                            "nvml_driver_version, sm_clocks, mem_clocks, memset_bytes_per_ms, stream_mem_ops, "
                            "queue_depth");
  }
  return c;
}

PyObject* cuda_error_type = nullptr;

}  // namespace

OPBENCH_BINDINGS(cuda) {
  // The Python class (opbench.errors.CudaError: an opbench.Error and a
  // RuntimeError), so one `except opbench.Error` covers driver failures too.
  py::object cuda_error = py::module_::import("opbench.errors").attr("CudaError");
  cuda_error_type = cuda_error.release().ptr();  // kept for the module's lifetime
  m.add_object("CudaError", py::reinterpret_borrow<py::object>(cuda_error_type));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CudaError& e) {
      py::object exc = py::reinterpret_borrow<py::object>(cuda_error_type)(e.what());
      exc.attr("code") = e.code;
      exc.attr("function") = e.function;
      PyErr_SetObject(cuda_error_type, exc.ptr());
    }
  });

  py::class_<Context, std::shared_ptr<Context>>(m, "CudaContext",
                                                "The primary CUDA context of one device, with timing resources.")
      .def(py::init<int>(), py::arg("device") = 0)
      .def("info", &Context::info, "Device name, index, L2 size, driver versions.")
      .def("clocks", &Context::clocks, "(SM MHz, memory MHz) from NVML now, or None.")
      .def_property_readonly("clock_problem", &Context::clock_problem, "Why clocks() returned None.")
      .def("set_flush_bytes", &Context::set_flush_bytes, py::arg("bytes"),
           "Allocate the cold-L2 flush buffer once (0 frees it).")
      .def_property_readonly("flush_bytes", &Context::flush_bytes)
      .def_property("hold", &Context::hold_enabled, &Context::set_hold,
                    "Queue each block behind a host-released wait so the GPU runs it back to back.")
      .def_readwrite("hold_chunk", &Context::hold_chunk)
      .def_readwrite("watchdog_s", &Context::watchdog_s)
      .def("run", &Context::run, py::arg("fn"), py::arg("number"), py::arg("stream") = 0,
           py::arg("per_call") = false, py::arg("flush") = false,
           "Call fn() `number` times on `stream`; device seconds per event window (one per call when "
           "per_call, else per block). flush memsets the L2 flush buffer before each call's window.")
      .def(
          "event", [](std::shared_ptr<Context> self) { return std::make_unique<Event>(std::move(self)); },
          "A new CUDA event on this context.");

  py::class_<Event>(m, "CudaEvent", "A CUDA event (created with CudaContext.event()).")
      .def("record", &Event::record, py::arg("stream") = 0, "Record on a stream handle (int).")
      .def("synchronize", &Event::synchronize, "Wait for the event; raises the CUDA error of faulted work.")
      .def("query", &Event::query, "True when the work before the event has finished.")
      .def("elapsed_time", &Event::elapsed_time, py::arg("end"), "Milliseconds from this event to `end`.");

  // Test hooks: a fake driver for machines without a GPU (tests/test_cuda.py).
  m.def(
      "_cuda_use_fake_driver",
      [](py::object config) {
        DriverSource& s = source();
        s.fake = !config.is_none();
        s.current = s.fake ? fake::make_driver(fake_config(config.cast<py::dict>())) : nullptr;
      },
      py::arg("config"), "Route CUDA calls to the fake driver configured by `config` (None: the real one).");
  m.def(
      "_cuda_set_libraries",
      [](const std::string& libcuda, const std::string& libnvml) {
        DriverSource& s = source();
        s.libcuda = libcuda;
        s.libnvml = libnvml;
        s.fake = false;
        s.current = nullptr;
      },
      py::arg("libcuda") = "libcuda.so.1", py::arg("libnvml") = "libnvidia-ml.so.1",
      "Library names for the real driver (tests point them at missing files).");
  m.def(
      "_cuda_fake_advance",
      [](double ms) {
        py::gil_scoped_release nogil;  // a launch into a full queue blocks
        fake::launch(ms);
      },
      py::arg("ms"), "Move the fake device clock, as a kernel of `ms` milliseconds would.");
  m.def(
      "_cuda_fake_fail",
      [](const std::string& function, int code) {
        if (code == 0) fake::state().failures.erase(function);
        else fake::state().failures[function] = code;
      },
      py::arg("function"), py::arg("code"), "Make a fake entry point return `code` (0 clears).");
  m.def(
      "_cuda_fake_kernel_error", [](int code) { fake::state().pending_error = code; }, py::arg("code"),
      "A sticky asynchronous error, reported by the next synchronisation.");
  m.def(
      "_cuda_fake_synchronize",
      [] {
        CUresult r;
        {
          py::gil_scoped_release nogil;
          r = fake::cuStreamSynchronize(nullptr);
        }
        return r;
      },
      "cuStreamSynchronize on the fake: blocks while a stream is held, like a statement calling .item().");
  m.def(
      "_cuda_fake_stats",
      [] {
        const fake::Stats& s = fake::state().stats;
        py::dict d;
        d["events_created"] = s.events_created;
        d["events_live"] = s.events_live;
        d["records"] = s.records;
        d["event_syncs"] = s.event_syncs;
        d["stream_syncs"] = s.stream_syncs;
        d["memsets"] = s.memsets;
        d["memset_bytes"] = s.memset_bytes;
        d["allocs_live"] = s.allocs_live;
        d["host_allocs_live"] = s.host_allocs_live;
        d["stream_waits"] = s.stream_waits;
        d["contexts_retained"] = s.contexts_retained;
        d["streams"] = py::cast(std::vector<std::uintptr_t>(s.streams.begin(), s.streams.end()));
        d["now_ms"] = fake::state().now_ms;
        return d;
      },
      "Counters of the fake driver: live events, allocations, records, syncs, streams used.");
}
