// libopbench_memory: the allocation counter behind Timer.memory (opbench/memory/).
//
// Loaded with LD_PRELOAD at the start of a process (the memory child, or a pytest
// session in memory mode), it defines malloc, calloc, realloc, reallocarray, free,
// posix_memalign, aligned_alloc, memalign, valloc and pvalloc ahead of the C
// library's, so every allocation of the process passes through here: C++'s operator
// new (libstdc++ calls malloc), torch's CPU tensor storage (posix_memalign) and any
// library's own. Each forwards to glibc's allocator (__libc_malloc, ...), so the
// memory handed out is glibc's, exactly as without the library; what is added is a
// tally, kept only while counting is on (one relaxed load otherwise).
//
// Why interposition at process start rather than the alternatives (measured and
// argued in opbench/memory/__init__.py): glibc removed its malloc hooks (2.34);
// torch's profiler memory events see torch's allocators only, not a C++ `new` or a
// library's malloc; patching each library's PLT (what memray does) misses libraries
// loaded later and calls made inside one library. A preloaded definition is the one
// every call binds to.
//
// Python objects are counted apart: opbench_memory_hook_python() wraps CPython's three
// allocator domains (PyMem_SetAllocator, as tracemalloc does), and while a wrapper
// runs, the C library calls it makes are not counted as native (a thread-local
// depth), so the two sources never count one block twice.
//
// What is tallied, per source (native, Python) and for both together ("host"):
// allocations and bytes asked for, live bytes and blocks among the blocks allocated
// since counting began, the most live bytes since the last mark; a mark also keeps a
// copy of the tallies, so one window yields two halves (opbench/memory/in_process.py).
// Blocks allocated before counting began are not known: freeing one changes nothing.
// Sizes are the ones asked for (not malloc's rounded-up sizes), kept in a hash table
// of this library's own (mmap'd: nothing here calls malloc).
//
// Processes: a fork, vfork or posix_spawn while counting is recorded
// (opbench_memory_processes): the other process's allocations are not counted, and
// opbench refuses the figures. vfork is served by fork (vfork's contract is a subset
// of fork's; a wrapper cannot return into a vfork child).
//
// Written in C: the library is preloaded into every process the measured one starts
// (compilers and shells included) and needs nothing but the C library.
#define _GNU_SOURCE
#include <Python.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* __libc_valloc(size_t);
void* __libc_pvalloc(size_t);

#define OPBENCH_EXPORT __attribute__((visibility("default")))
#define OPBENCH_LIKELY(x) __builtin_expect(!!(x), 1)
#define OPBENCH_UNLIKELY(x) __builtin_expect(!!(x), 0)

enum { kNative = 0, kPython = 1, kHost = 2, kTallies = 3 };
enum { kOff = 0, kCounting = 1, kFreesOnly = 2 };

typedef struct {
  int64_t allocations;
  int64_t bytes;
  int64_t live;
  int64_t live_blocks;
  int64_t peak; /* most live bytes since the last mark (or since counting began) */
} Tally;

/* What opbench_memory_read copies out (the layout csrc/bindings/memory.cpp reads). */
typedef struct {
  Tally now[kTallies];
  Tally mark[kTallies];
  int64_t processes; /* processes started while counting */
  int64_t failed;    /* blocks the table could not hold (0 unless mmap failed) */
} Snapshot;

static int g_state = kOff; /* read and written with __atomic builtins */
static Snapshot g_snap;
static int g_lock = 0;
static __thread int t_depth __attribute__((tls_model("initial-exec"))) = 0;

static void lock(void) {
  while (__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE)) {
  }
}
static void unlock(void) { __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE); }

static int counting(void) { return __atomic_load_n(&g_state, __ATOMIC_RELAXED) == kCounting; }
static int watching(void) { return __atomic_load_n(&g_state, __ATOMIC_RELAXED) != kOff; }
static int in_python(void) { return t_depth != 0; }

/* -- the table of live blocks: pointer -> (size, source) --------------------------------
   Open addressing, linear probing, tombstones; storage from mmap, never malloc. */
typedef struct {
  uintptr_t key;  /* 0: empty, 1: deleted */
  uint64_t value; /* size << 1 | source */
} Slot;
#define kEmpty ((uintptr_t)0)
#define kDeleted ((uintptr_t)1)

static Slot* g_slots = NULL;
static size_t g_capacity = 0; /* a power of two */
static size_t g_used = 0;     /* live + deleted slots */

static size_t hash(uintptr_t p) {
  uint64_t x = p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

static void insert_into(Slot* slots, size_t capacity, uintptr_t key, uint64_t value) {
  for (size_t i = hash(key) & (capacity - 1);; i = (i + 1) & (capacity - 1)) {
    if (slots[i].key == kEmpty || slots[i].key == kDeleted) {
      slots[i].key = key;
      slots[i].value = value;
      return;
    }
  }
}

/* Room for one more block (lock held); 0 when no memory could be mapped. */
static int reserve(void) {
  if (g_slots != NULL && (g_used + 1) * 2 <= g_capacity) return 1;
  size_t live = 0;
  for (size_t i = 0; i < g_capacity; ++i) live += g_slots[i].key > kDeleted;
  size_t capacity = g_capacity == 0 ? ((size_t)1 << 16) : g_capacity;
  while ((live + 1) * 4 > capacity) capacity *= 2;
  void* m = mmap(NULL, capacity * sizeof(Slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 0;
  Slot* slots = (Slot*)m;
  for (size_t i = 0; i < g_capacity; ++i) {
    if (g_slots[i].key > kDeleted) insert_into(slots, capacity, g_slots[i].key, g_slots[i].value);
  }
  if (g_slots != NULL) munmap(g_slots, g_capacity * sizeof(Slot));
  g_slots = slots;
  g_capacity = capacity;
  g_used = live;
  return 1;
}

static void clear_table(void) {
  if (g_slots != NULL) memset(g_slots, 0, g_capacity * sizeof(Slot));
  g_used = 0;
}

/* The slot holding `key`, or NULL. */
static Slot* find(uintptr_t key) {
  if (g_slots == NULL) return NULL;
  for (size_t i = hash(key) & (g_capacity - 1);; i = (i + 1) & (g_capacity - 1)) {
    if (g_slots[i].key == key) return &g_slots[i];
    if (g_slots[i].key == kEmpty) return NULL;
  }
}

/* -- tallies (lock held) ------------------------------------------------------------------ */

static void add_live_to(Tally* y, int64_t bytes, int64_t blocks) {
  y->live += bytes;
  y->live_blocks += blocks;
  if (y->live > y->peak) y->peak = y->live;
}

static void note_allocation(int source, void* p, size_t size) {
  Tally* mine = &g_snap.now[source];
  Tally* host = &g_snap.now[kHost];
  mine->allocations += 1;
  host->allocations += 1;
  mine->bytes += (int64_t)size;
  host->bytes += (int64_t)size;
  if (!reserve()) {
    ++g_snap.failed;
    return;
  }
  insert_into(g_slots, g_capacity, (uintptr_t)p, ((uint64_t)size << 1) | (uint64_t)source);
  ++g_used;
  add_live_to(mine, (int64_t)size, 1);
  add_live_to(host, (int64_t)size, 1);
}

static void note_free(void* p) {
  Slot* s = find((uintptr_t)p);
  if (s == NULL) return; /* allocated before counting began */
  const int64_t size = (int64_t)(s->value >> 1);
  const int source = (int)(s->value & 1);
  s->key = kDeleted;
  add_live_to(&g_snap.now[source], -size, -1);
  add_live_to(&g_snap.now[kHost], -size, -1);
}

static void allocated(int source, void* p, size_t size) {
  if (p == NULL || !counting()) return;
  lock();
  if (counting()) note_allocation(source, p, size);
  unlock();
}

static void freeing(void* p) {
  if (p == NULL || !watching()) return;
  lock();
  note_free(p);
  unlock();
}

/* realloc of either source, tallied under the lock held across the call, so no other
   thread can be handed the freed address (and tally it) before the old block is
   forgotten. `call` is glibc's realloc or a CPython domain's. */
typedef void* (*ReallocFn)(void* ctx, void* p, size_t size);

static void* tallied_realloc(int source, void* p, size_t size, ReallocFn call, void* ctx) {
  if (!watching()) return call(ctx, p, size);
  lock();
  void* q = call(ctx, p, size);
  if (q != NULL || size == 0) { /* else it failed: the old block stands */
    if (p != NULL) note_free(p);
    if (q != NULL && counting()) note_allocation(source, q, size);
  }
  unlock();
  return q;
}

static void* libc_realloc(void* ctx, void* p, size_t size) {
  (void)ctx;
  return __libc_realloc(p, size);
}

static void note_process(void) {
  if (watching()) {
    lock();
    ++g_snap.processes;
    unlock();
  }
}

/* The child of a fork counts nothing, and must not wait on a lock a thread of the
   parent held at the fork. */
static void forked_child(void) {
  __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&g_state, kOff, __ATOMIC_RELAXED);
}

/* -- CPython's allocator domains -----------------------------------------------------------
   A domain's allocator may call another's (pymalloc hands large blocks to the raw
   domain): only the outermost call is tallied, as one block, and no call holds the
   lock while another is made. */

typedef struct {
  PyMemAllocatorEx previous;
  int hooked;
} Domain;
static Domain g_domains[3];

static void* py_malloc(void* ctx, size_t size) {
  Domain* d = (Domain*)ctx;
  if (in_python()) return d->previous.malloc(d->previous.ctx, size);
  ++t_depth;
  void* p = d->previous.malloc(d->previous.ctx, size);
  --t_depth;
  allocated(kPython, p, size);
  return p;
}

static void* py_calloc(void* ctx, size_t n, size_t size) {
  Domain* d = (Domain*)ctx;
  if (in_python()) return d->previous.calloc(d->previous.ctx, n, size);
  ++t_depth;
  void* p = d->previous.calloc(d->previous.ctx, n, size);
  --t_depth;
  allocated(kPython, p, n * size);
  return p;
}

static void* previous_realloc(void* ctx, void* p, size_t size) {
  Domain* d = (Domain*)ctx;
  return d->previous.realloc(d->previous.ctx, p, size);
}

static void* py_realloc(void* ctx, void* ptr, size_t size) {
  if (in_python()) return previous_realloc(ctx, ptr, size);
  ++t_depth;
  void* q = tallied_realloc(kPython, ptr, size, &previous_realloc, ctx);
  --t_depth;
  return q;
}

static void py_free(void* ctx, void* ptr) {
  Domain* d = (Domain*)ctx;
  if (in_python()) {
    d->previous.free(d->previous.ctx, ptr);
    return;
  }
  freeing(ptr);
  ++t_depth;
  d->previous.free(d->previous.ctx, ptr);
  --t_depth;
}

/* -- the C library's allocator, interposed ------------------------------------------------- */

OPBENCH_EXPORT void* malloc(size_t size) {
  void* p = __libc_malloc(size);
  if (OPBENCH_UNLIKELY(counting()) && !in_python()) allocated(kNative, p, size);
  return p;
}

OPBENCH_EXPORT void free(void* p) {
  if (OPBENCH_UNLIKELY(watching()) && !in_python()) freeing(p);
  __libc_free(p);
}

OPBENCH_EXPORT void* calloc(size_t n, size_t size) {
  void* p = __libc_calloc(n, size);
  if (OPBENCH_UNLIKELY(counting()) && !in_python()) allocated(kNative, p, n * size);
  return p;
}

OPBENCH_EXPORT void* realloc(void* p, size_t size) {
  if (OPBENCH_LIKELY(!watching()) || in_python()) return __libc_realloc(p, size);
  return tallied_realloc(kNative, p, size, &libc_realloc, NULL);
}

OPBENCH_EXPORT void* reallocarray(void* p, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, total);
}

OPBENCH_EXPORT void* memalign(size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  if (OPBENCH_UNLIKELY(counting()) && !in_python()) allocated(kNative, p, size);
  return p;
}

OPBENCH_EXPORT void* aligned_alloc(size_t alignment, size_t size) { return memalign(alignment, size); }

OPBENCH_EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment % sizeof(void*) != 0 || alignment == 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, size);
  if (p == NULL) return ENOMEM;
  if (OPBENCH_UNLIKELY(counting()) && !in_python()) allocated(kNative, p, size);
  *out = p;
  return 0;
}

OPBENCH_EXPORT void* valloc(size_t size) {
  void* p = __libc_valloc(size);
  if (OPBENCH_UNLIKELY(counting()) && !in_python()) allocated(kNative, p, size);
  return p;
}

OPBENCH_EXPORT void* pvalloc(size_t size) {
  void* p = __libc_pvalloc(size);
  if (OPBENCH_UNLIKELY(counting()) && !in_python()) allocated(kNative, p, size);
  return p;
}

/* -- processes ----------------------------------------------------------------------------- */

OPBENCH_EXPORT pid_t vfork(void) { return fork(); } /* fork's handlers note it */

typedef int (*SpawnFn)(pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*,
                       char* const[], char* const[]);
static SpawnFn g_next_spawn = NULL; /* the C library's, found when the library loads */
static SpawnFn g_next_spawnp = NULL;

OPBENCH_EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                               const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  note_process();
  return g_next_spawn(pid, path, actions, attr, argv, envp);
}

OPBENCH_EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                                const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  note_process();
  return g_next_spawnp(pid, file, actions, attr, argv, envp);
}

/* At load: fork's handlers, and the C library's posix_spawn entry points. */
__attribute__((constructor)) static void on_load(void) {
  pthread_atfork(&note_process, NULL, &forked_child);
  g_next_spawn = (SpawnFn)dlsym(RTLD_NEXT, "posix_spawn");
  g_next_spawnp = (SpawnFn)dlsym(RTLD_NEXT, "posix_spawnp");
}

/* -- the API opbench._C.memory drives ------------------------------------------------------- */

/* 1: the layout of Snapshot and the meaning of every function below. */
OPBENCH_EXPORT int opbench_memory_version(void) { return 1; }

/* Whether the process's malloc is this library's: true when it was preloaded, false
   when it was loaded later (dlopen), where only Python objects can be counted. */
OPBENCH_EXPORT int opbench_memory_interposing(void) {
  /* By the object the global malloc lives in: inside this library, `&malloc` would be
     resolved through the same global lookup. */
  Dl_info global, here;
  void* found = dlsym(RTLD_DEFAULT, "malloc");
  if (found == NULL || !dladdr(found, &global) || !dladdr((void*)&opbench_memory_version, &here)) return 0;
  return global.dli_fbase == here.dli_fbase;
}

/* Starts counting afresh: every tally zero, no block known. */
OPBENCH_EXPORT void opbench_memory_begin(void) {
  lock();
  clear_table();
  memset(&g_snap, 0, sizeof g_snap);
  __atomic_store_n(&g_state, kCounting, __ATOMIC_RELAXED);
  unlock();
}

/* kOff, kCounting, or kFreesOnly (frees of known blocks tallied, allocations not: the
   measuring code's own work between the halves of a window). */
OPBENCH_EXPORT void opbench_memory_set_state(int state) {
  lock();
  __atomic_store_n(&g_state, state, __ATOMIC_RELAXED);
  unlock();
}

/* Copies the tallies as they are into `mark` and starts each peak again from the
   live bytes of now. */
OPBENCH_EXPORT void opbench_memory_mark(void) {
  lock();
  for (int i = 0; i < kTallies; ++i) g_snap.now[i].peak = g_snap.now[i].live;
  memcpy(g_snap.mark, g_snap.now, sizeof g_snap.now);
  unlock();
}

OPBENCH_EXPORT void opbench_memory_read(Snapshot* out) {
  lock();
  *out = g_snap;
  unlock();
}

OPBENCH_EXPORT size_t opbench_memory_snapshot_size(void) { return sizeof(Snapshot); }

/* Wraps CPython's allocator domains (call with the GIL held; later calls do nothing).
   Returns 0, or -1 when this process has no CPython. */
OPBENCH_EXPORT int opbench_memory_hook_python(void) {
  typedef void (*Access)(PyMemAllocatorDomain, PyMemAllocatorEx*);
  Access get = (Access)dlsym(RTLD_DEFAULT, "PyMem_GetAllocator");
  Access set = (Access)dlsym(RTLD_DEFAULT, "PyMem_SetAllocator");
  if (get == NULL || set == NULL) return -1;
  const PyMemAllocatorDomain domains[3] = {PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ};
  for (int i = 0; i < 3; ++i) {
    Domain* d = &g_domains[i];
    if (d->hooked) continue;
    get(domains[i], &d->previous);
    PyMemAllocatorEx mine = {d, &py_malloc, &py_calloc, &py_realloc, &py_free};
    set(domains[i], &mine);
    d->hooked = 1;
  }
  return 0;
}
