// opbench/scheduler.h: what the OS scheduler did to this process while it was timed.
//
// A timing is only as good as the CPU time its threads got. On a busy machine
// a thread that is runnable can still wait for a CPU, and a parallel region
// (OpenMP, torch's intra-op pool) stalls at its barrier until its slowest
// thread is scheduled again: a 200 us op can read 30 ms. Linux counts that
// wait per thread (/proc/<pid>/task/<tid>/schedstat: time on a CPU, time
// runnable in a run queue, timeslices), so a block's waiting can be measured
// instead of guessed from its duration.
//
// SchedProbe reads those counters for every thread of the process (and, apart,
// for the thread that created the probe) around one block: begin() before the
// block's first clock read, end() after its last, outside the timed region.
// Reading costs about 1 us per thread; the thread list is rescanned only when
// the kernel's thread count (the link count of /proc/self/task) changes.
// Where the counters cannot be read (not Linux, a kernel without
// CONFIG_SCHED_INFO) available() is false and every delta is zero.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#if defined(__linux__)
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace opbench {

/// What the scheduler did during one block, in nanoseconds, summed over threads.
struct SchedDelta {
  std::int64_t ran_ns = 0;         ///< time the process's threads spent on a CPU
  std::int64_t waited_ns = 0;      ///< time they were runnable but waited for a CPU
  std::int64_t own_waited_ns = 0;  ///< the wait of the probing (timing) thread alone
  std::int64_t timeslices = 0;     ///< times a thread was put on a CPU
  int threads = 0;                 ///< threads seen at the block's end
};

/// Reads the schedstat counters of every thread of this process around a block.
class SchedProbe {
 public:
  SchedProbe() {
#if defined(__linux__)
    task_dir_ = ::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const long tid = ::syscall(SYS_gettid);
    own_tid_ = static_cast<int>(tid);
    if (task_dir_ >= 0) rescan();
#endif
  }
  ~SchedProbe() { close_all(); }
  SchedProbe(const SchedProbe&) = delete;
  SchedProbe& operator=(const SchedProbe&) = delete;

  /// Whether this kernel gives per-thread scheduler counters.
  bool available() const noexcept { return !threads_.empty(); }

  /// Snapshots the counters: call right before a block.
  void begin() {
    refresh_if_threads_changed();
    for (auto& t : threads_) t.start = read(t.fd);
  }

  /// The counters' change since begin(): call right after the block. A thread
  /// born during the block counts from zero; one that ended counts nothing.
  SchedDelta end() {
    SchedDelta d;
    refresh_if_threads_changed();
    for (auto& t : threads_) {
      const Counters now = read(t.fd);
      if (!now.ok) continue;
      const Counters from = t.start.ok ? t.start : Counters{0, 0, 0, true};
      const std::int64_t waited = now.waited_ns - from.waited_ns;
      d.ran_ns += now.ran_ns - from.ran_ns;
      d.waited_ns += waited;
      d.timeslices += now.timeslices - from.timeslices;
      if (t.tid == own_tid_) d.own_waited_ns = waited;
      t.start = now;
    }
    d.threads = static_cast<int>(threads_.size());
    return d;
  }

 private:
  struct Counters {
    std::int64_t ran_ns = 0, waited_ns = 0, timeslices = 0;
    bool ok = false;
  };
  struct Thread {
    int tid;
    int fd;
    Counters start;
  };

  static Counters read(int fd) {
    Counters c;
#if defined(__linux__)
    char buf[96];
    const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) return c;
    buf[n] = '\0';
    char* p = buf;
    c.ran_ns = std::strtoll(p, &p, 10);
    c.waited_ns = std::strtoll(p, &p, 10);
    c.timeslices = std::strtoll(p, &p, 10);
    c.ok = true;
#else
    (void)fd;
#endif
    return c;
  }

  void refresh_if_threads_changed() {
#if defined(__linux__)
    struct stat st;
    if (task_dir_ >= 0 && ::fstat(task_dir_, &st) == 0 && st.st_nlink != links_) rescan();
#endif
  }

  // Opens the schedstat file of every thread, keeping the counters already
  // snapshotted for threads that were there before.
  void rescan() {
#if defined(__linux__)
    struct stat st;
    if (::fstat(task_dir_, &st) != 0) return;
    links_ = st.st_nlink;
    std::vector<Thread> next;
    const int dup_fd = ::dup(task_dir_);
    DIR* dir = dup_fd >= 0 ? ::fdopendir(dup_fd) : nullptr;
    if (dir == nullptr) {
      if (dup_fd >= 0) ::close(dup_fd);
      return;
    }
    ::rewinddir(dir);
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      const int tid = std::atoi(e->d_name);
      Thread* kept = find(tid);
      if (kept != nullptr) {
        next.push_back(*kept);
        kept->fd = -1;  // moved
        continue;
      }
      const std::string path = std::string(e->d_name) + "/schedstat";
      const int fd = ::openat(task_dir_, path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      if (!read(fd).ok) {
        ::close(fd);
        continue;
      }
      next.push_back(Thread{tid, fd, Counters{}});
    }
    ::closedir(dir);
    for (auto& t : threads_)
      if (t.fd >= 0) ::close(t.fd);
    threads_.swap(next);
#endif
  }

  Thread* find(int tid) {
    for (auto& t : threads_)
      if (t.tid == tid && t.fd >= 0) return &t;
    return nullptr;
  }

  void close_all() {
#if defined(__linux__)
    for (auto& t : threads_)
      if (t.fd >= 0) ::close(t.fd);
    threads_.clear();
    if (task_dir_ >= 0) ::close(task_dir_);
    task_dir_ = -1;
#endif
  }

  int task_dir_ = -1;
  int own_tid_ = 0;
  unsigned long links_ = 0;
  std::vector<Thread> threads_;
};

}  // namespace opbench
