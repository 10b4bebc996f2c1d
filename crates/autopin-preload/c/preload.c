/*
 * autopin LD_PRELOAD library: pins every thread of the target at birth and tells the
 * autopin engine which threads exist.
 *
 * Environment contract (all optional; with none set the library does nothing beyond
 * reading them once at load time):
 *
 *   AUTOPIN_CPUS="0,1,0,1"   CPU for each thread in creation order. The main thread is
 *                            thread 0; the i-th pinned thread created by pthread_create
 *                            gets entry i. Past the end the list wraps around (entry
 *                            i % length), like likwid-pin's round-robin. Ranges "0-3" are
 *                            accepted. Until the program's threads begin, the main thread
 *                            may use every CPU of the list (see "The main thread" below).
 *   AUTOPIN_SKIP=0x...       likwid-pin skip mask: bit i set = the i-th thread created by
 *                            pthread_create (0-based, main not counted) is neither pinned
 *                            nor consumes an entry of AUTOPIN_CPUS. Any length of hex.
 *                            A skipped thread gets the affinity the process had before
 *                            we set its main thread's (it would otherwise inherit the
 *                            creator's single CPU).
 *   AUTOPIN_REGISTRY=/path   file created and sized by the engine; we record every thread.
 *                            When it is set but cannot be mapped (the autopin run ended
 *                            and removed it), AUTOPIN_CPUS is not applied.
 *   AUTOPIN_QUIET=1          suppress our one-line diagnostics.
 *   AUTOPIN_HEARTBEAT=/path  the heartbeat file (include/autopin.h). When it is at least
 *                            OMP_FILE_MIN bytes, the library also counts completed OpenMP
 *                            work there (see "OpenMP progress" below).
 *
 * The main thread: a program sizes itself from its main thread's CPU mask before it
 * creates threads (sched_getaffinity, nproc, omp_get_num_procs(); libgomp's default team
 * when OMP_NUM_THREADS is unset), as it would under taskset -c or likwid-pin -c. So at
 * load the main thread gets the union of the AUTOPIN_CPUS entries within the mask it
 * started with (when none of them is allowed, it is pinned to entry 0, which fails with a
 * warning, as before), and it is narrowed to entry 0 when the program's threads begin: at
 * the process's first pthread_create (from whichever thread) or its first OpenMP parallel
 * region (GOMP_parallel*, __kmpc_fork_call), whichever comes first; each of those pays one
 * relaxed load for it. The narrowing is done once, on the main thread's tid (getpid()),
 * and only while its mask is still the union it got: a mask the program set itself stays,
 * and so does one autopin's engine set (it says so in the registry's `managed` word before
 * it first moves a thread); nothing is narrowed once autopin is gone (autopin_gone()).
 * At a libomp region omp_get_num_procs() is called first, once, so that libomp counts the
 * CPUs of the union (libgomp counts them when it loads). A forked child whose one thread
 * still has the union narrows it likewise at its own first thread or region.
 *
 * Registry layout (little-endian, naturally aligned; mirrored in
 * crates/autopin-os/src/process/registry.rs):
 *   offset 0  u64 magic    = 0x31474552504f5441 ("ATOPREG1")
 *   offset 8  u32 capacity   number of slots after the header
 *   offset 12 u32 count      atomic; slots claimed so far (may exceed capacity: overflow)
 *   offset 16 u64 owner      atomic; pid of the process that records (0 = unclaimed)
 *   offset 24 slot[capacity], 16 bytes each:
 *     +0  i32 tid     atomic; 0 until the slot is filled, stored last (release)
 *     +4  u32 state   atomic; 1 alive, 2 exited, 3 skipped (unpinned) and alive,
 *                     4 skipped and exited
 *     +8  u32 index   thread number in creation order within the owning process image
 *                     (main = 0); the same numbering as AUTOPIN_CPUS / AUTOPIN_SKIP
 *     +12 u32 reserved
 *   offset 24 + 16 * capacity: the processes of the program's tree (may be absent in a
 *   registry made by an older autopin; the file's size says):
 *     +0  u32 forks   atomic; processes that recorded themselves (may exceed FORK_SLOTS)
 *     +4  u32 managed atomic; set (release) by autopin before it first sets a thread's
 *                     mask: from then on the main thread's mask is autopin's, and the
 *                     library does not narrow it (see "The main thread")
 *     +8  i32 pid[FORK_SLOTS]  each stored (release) by the process itself: every
 *                     process of the launched tree but the owner, at fork and again when
 *                     it execs a new image that loads this library (the launched process
 *                     too, before it owns the registry)
 *
 * Processes: the registry belongs to ONE process, the first one that creates a thread
 * (CAS on `owner`). That is the program itself for `autopin run -- prog` and also for
 * `sh -c 'prog; echo done'`, where the shell never creates threads. The owner records its
 * main thread as slot 0 when it claims the registry. If the owner execs, the new image
 * finds owner == getpid(): the old image's threads are gone, so it marks their slots
 * exited and appends its own (indexes restart at 1 for created threads; slot 0 stays the
 * main thread, whose tid survives exec). Every other process ignores the registry.
 * Pinning from AUTOPIN_CPUS applies in every process (like likwid-pin, which pins the
 * shell too): each process image numbers its own threads from 0, and a fork()ed child
 * restarts the numbering at 1 for the threads it creates (pthread_atfork). With a
 * registry (`autopin run`) it applies only up to the owner: a process the owner forks,
 * and whatever that execs, gets the mask the program started with and pins nothing, so
 * no child keeps a probe's CPU for life.
 *
 * OpenMP progress (mirrored in crates/autopin-perf/src/heartbeat.rs): the heartbeat file
 * continues after its 128-byte heartbeat part with
 *   offset 128 u64 magic     = 0x3130504d4f504f41 ("AOPOMP01"), stored (release) once the
 *                              library has seen an OpenMP runtime call
 *   offset 136 u32 slots     number of per-thread slots (OMP_SLOTS)
 *   offset 140 u32 used      atomic; threads that took a slot. Threads take every other
 *                            slot (1, 3, 5, ...); slot 0 is shared (atomic adds) by threads
 *                            that find none left
 *   offset 144 u32 runtime   1 libgomp (GOMP_* entry points), 2 libomp/libiomp5 (__kmpc_*)
 *   offset 148 u32 reserved
 *   offset 192 slot[slots], 64 bytes (one cache line) each, u64 counters:
 *     +0 regions   parallel regions (GNU: counted when over; libomp: when started, on
 *                  x86-64 only), by the thread that starts them
 *     +8 chunks    work-sharing loop chunks / sections / single blocks completed
 *     +16 barriers explicit barriers and those ending work-sharing constructs, taskwait and
 *                  taskgroup ends, counted as each thread arrives
 *     +24 tasks    explicit tasks created
 *     +32 other    critical sections and ordered blocks left, work-sharing loops ended
 *                  without a barrier (nowait) or, with libomp, static loops ended
 * Each thread owns its slot and adds with plain relaxed stores (no lock prefix, no shared
 * cache line): the cost is a TLS load and an add per OpenMP call. Readers sum all slots.
 * GNU: the compiler calls GOMP_* entry points; LLVM/Intel: __kmpc_* ones. We interpose
 * both and forward unchanged. Nothing is registered with the runtime, so a tool the
 * program brings (OMPT) is unaffected.
 *
 * Never crash the target: every failure prints at most one line "autopin-preload: ..."
 * and the program continues unpinned.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define REG_MAGIC 0x31474552504f5441ULL
#define REG_HEADER 24u
#define REG_SLOT 16u
#define FORK_SLOTS 64u
#define ST_ALIVE 1u
#define ST_EXITED 2u
#define ST_SKIPPED 3u
#define ST_SKIPPED_EXITED 4u

#define MAX_CPUS 8192
#define SKIP_WORDS 64 /* 4096 threads of skip mask */

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static create_fn real_create;
static int active;        /* any env var present */
static int quiet;
static int *cpus;         /* AUTOPIN_CPUS entries */
static unsigned ncpus;
static uint64_t skip[SKIP_WORDS];
static unsigned created;  /* pthread_create calls in this process image (atomic) */
static unsigned pinned;   /* entries of AUTOPIN_CPUS consumed by created threads (atomic) */
static unsigned char *reg; /* mapped registry, NULL when unused */
static int reg_fd = -1;    /* the registry's file, kept open: see autopin_gone() */
static size_t reg_len;
static int reg_mine;      /* 1: this image records, -1: someone else does, 0: undecided */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static int exit_key_ok;
static int warned_affinity;
static cpu_set_t initial_mask; /* affinity before we pinned anything: skipped threads get it */
static int have_initial_mask;
static cpu_set_t main_union; /* the main thread's mask from load until its threads begin */
static int main_wide;        /* 1 until the main thread is narrowed to entry 0 (atomic) */

static void say(const char *fmt, ...)
{
    if (quiet)
        return;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof buf - 2)
        n = sizeof buf - 2;
    buf[n++] = '\n';
    /* write(2) directly: stdio may not be safe this early or inside a new thread. */
    ssize_t r = write(2, "autopin-preload: ", 17);
    r = write(2, buf, (size_t)n);
    (void)r;
}

static pid_t my_tid(void) { return (pid_t)syscall(SYS_gettid); }

/* ---------------------------------------------------------------- parsing */

/* Parses "0,1,0-3" keeping order and duplicates. Returns 0 on success. */
static int parse_cpus(const char *s)
{
    size_t cap = 64;
    int *out = malloc(cap * sizeof *out);
    unsigned n = 0;
    if (!out)
        return -1;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10);
        if (end == p || errno || a < 0 || a >= MAX_CPUS)
            goto bad;
        long b = a;
        p = end;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || errno || b < a || b >= MAX_CPUS)
                goto bad;
            p = end;
        }
        for (long c = a; c <= b; c++) {
            if (n == cap) {
                int *grown = realloc(out, cap * 2 * sizeof *out);
                if (!grown)
                    goto bad;
                out = grown;
                cap *= 2;
            }
            out[n++] = (int)c;
        }
        if (*p == ',')
            p++;
        else if (*p)
            goto bad;
    }
    if (n == 0)
        goto bad;
    cpus = out;
    ncpus = n;
    return 0;
bad:
    free(out);
    say("AUTOPIN_CPUS=\"%.100s\" is not a CPU list like 0,1,4-7; not pinning", s);
    return -1;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Parses a hex mask of any length ("0x5", "5"); bit 0 is the last digit's lowest bit. */
static int parse_skip(const char *s)
{
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    size_t len = strlen(s);
    if (len == 0)
        goto bad;
    for (size_t i = 0; i < len; i++) {
        int v = hexval(s[len - 1 - i]);
        if (v < 0)
            goto bad;
        for (int b = 0; b < 4; b++) {
            size_t bit = i * 4 + (size_t)b;
            if ((v >> b) & 1) {
                if (bit >= SKIP_WORDS * 64)
                    continue; /* threads beyond 4096 are never skipped */
                skip[bit / 64] |= 1ULL << (bit % 64);
            }
        }
    }
    return 0;
bad:
    memset(skip, 0, sizeof skip);
    say("AUTOPIN_SKIP=\"%.100s\" is not a hex mask like 0x5; skipping none", s);
    return -1;
}

static int skipped(unsigned i)
{
    return i < SKIP_WORDS * 64 && ((skip[i / 64] >> (i % 64)) & 1);
}

/* ---------------------------------------------------------------- pinning */

static void pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0 &&
        !__atomic_exchange_n(&warned_affinity, 1, __ATOMIC_RELAXED))
        say("cannot pin thread to CPU %d: %s; it runs unpinned", cpu, strerror(errno));
}

/* A skipped thread would inherit its creator's pinning; "not pinned" means it may run
 * wherever the process could before we pinned anything. */
static void unpin_self(void)
{
    if (have_initial_mask)
        (void)sched_setaffinity(0, sizeof initial_mask, &initial_mask);
}

/* ---------------------------------------------------------------- registry */

static uint32_t *reg_u32(size_t off) { return (uint32_t *)(reg + off); }
static uint64_t *reg_u64(size_t off) { return (uint64_t *)(reg + off); }
static uint32_t reg_capacity(void) { return *reg_u32(8); }

static void map_registry(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        say("cannot open AUTOPIN_REGISTRY %.150s: %s; not pinning", path, strerror(errno));
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)REG_HEADER) {
        say("AUTOPIN_REGISTRY %.150s is too small", path);
        close(fd);
        return;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        say("cannot map AUTOPIN_REGISTRY %.150s: %s", path, strerror(errno));
        return;
    }
    reg_fd = fd;
    unsigned char *r = p;
    uint64_t magic;
    uint32_t cap;
    memcpy(&magic, r, 8);
    memcpy(&cap, r + 8, 4);
    if (magic != REG_MAGIC || (uint64_t)REG_HEADER + (uint64_t)cap * REG_SLOT > (uint64_t)st.st_size) {
        say("AUTOPIN_REGISTRY %.150s has a bad header; not recording threads", path);
        munmap(p, (size_t)st.st_size);
        return;
    }
    reg = r;
    reg_len = (size_t)st.st_size;
}

/* Records this process among the program's processes, unless it is the one whose
 * threads are recorded (the launched program records itself too; autopin knows its PID).
 * autopin reads the list to say when work moved into processes it does not manage, and
 * when the program leaves some running. Nothing when the registry has no room for it. */
static void reg_record_process(void)
{
    if (!reg)
        return;
    if (__atomic_load_n(reg_u64(16), __ATOMIC_ACQUIRE) == (uint64_t)getpid())
        return;
    size_t area = REG_HEADER + (size_t)reg_capacity() * REG_SLOT;
    if (reg_len < area + 8 + 4 * (size_t)FORK_SLOTS)
        return;
    uint32_t i = __atomic_fetch_add(reg_u32(area), 1, __ATOMIC_ACQ_REL);
    if (i < FORK_SLOTS)
        __atomic_store_n((int32_t *)(reg + area + 8 + 4 * (size_t)i), (int32_t)getpid(),
                         __ATOMIC_RELEASE);
}

/* Claims a slot and fills it; returns the slot number or UINT32_MAX when full. */
static uint32_t reg_record(pid_t tid, uint32_t state, uint32_t index)
{
    uint32_t slot = __atomic_fetch_add(reg_u32(12), 1, __ATOMIC_ACQ_REL);
    if (slot >= reg_capacity())
        return UINT32_MAX; /* count > capacity tells the engine to scan /proc */
    size_t off = REG_HEADER + (size_t)slot * REG_SLOT;
    __atomic_store_n(reg_u32(off + 8), index, __ATOMIC_RELAXED);
    __atomic_store_n(reg_u32(off + 4), state, __ATOMIC_RELAXED);
    __atomic_store_n((int32_t *)(reg + off), (int32_t)tid, __ATOMIC_RELEASE);
    return slot;
}

static void reg_mark_exited(uint32_t slot)
{
    size_t off = REG_HEADER + (size_t)slot * REG_SLOT;
    uint32_t st = __atomic_load_n(reg_u32(off + 4), __ATOMIC_ACQUIRE);
    __atomic_store_n(reg_u32(off + 4), st == ST_SKIPPED ? ST_SKIPPED_EXITED : ST_EXITED,
                     __ATOMIC_RELEASE);
}

/* Decides, once per process image, whether this image records into the registry. */
static int reg_claim(void)
{
    if (!reg)
        return 0;
    int mine = __atomic_load_n(&reg_mine, __ATOMIC_ACQUIRE);
    if (mine)
        return mine > 0;
    pthread_mutex_lock(&reg_lock);
    if (reg_mine == 0) {
        uint64_t zero = 0, me = (uint64_t)getpid();
        if (__atomic_compare_exchange_n(reg_u64(16), &zero, me, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            reg_record(getpid(), ST_ALIVE, 0);
            __atomic_store_n(&reg_mine, 1, __ATOMIC_RELEASE);
        } else if (zero == me) {
            /* We are an exec'd successor of the owner: its threads died with its image. */
            uint32_t used = __atomic_load_n(reg_u32(12), __ATOMIC_ACQUIRE);
            uint32_t cap = reg_capacity();
            for (uint32_t s = 1; s < used && s < cap; s++) {
                size_t off = REG_HEADER + (size_t)s * REG_SLOT;
                uint32_t st = __atomic_load_n(reg_u32(off + 4), __ATOMIC_ACQUIRE);
                if (st == ST_ALIVE || st == ST_SKIPPED)
                    reg_mark_exited(s);
            }
            __atomic_store_n(&reg_mine, 1, __ATOMIC_RELEASE);
        } else {
            __atomic_store_n(&reg_mine, -1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return reg_mine > 0;
}

/* Runs when a recorded thread ends, whether it returned, called pthread_exit or was
 * cancelled: thread-specific-data destructors run in all three cases. */
static void on_thread_exit(void *value)
{
    uintptr_t slot_plus_one = (uintptr_t)value;
    if (reg && slot_plus_one)
        reg_mark_exited((uint32_t)(slot_plus_one - 1));
}

/* ---------------------------------------------------------------- wrapper */

struct start {
    void *(*fn)(void *);
    void *arg;
    unsigned index; /* creation number, main = 0 */
    int cpu;        /* -1: do not pin */
    int record;
};

/* autopin is gone: its registry was unlinked (by autopin at its end, or by its guardian
 * when autopin died, before the guardian gives the threads their masks back). A thread
 * born then is not pinned to a probe's CPU that no one will ever move it from. (A program
 * that closed our descriptor and reused its number reads as "not gone": pinning goes on,
 * as it did before this check.) */
static int autopin_gone(void)
{
    struct stat st;
    return reg_fd >= 0 && fstat(reg_fd, &st) == 0 && st.st_nlink == 0;
}

/* ---------------------------------------------------------------- the main thread */

/* Whether autopin's engine has begun to set the threads' masks itself (registry word
 * `managed`; absent in a registry too small to have it). */
static int engine_moves_threads(void)
{
    if (!reg)
        return 0;
    size_t area = REG_HEADER + (size_t)reg_capacity() * REG_SLOT;
    if (reg_len < area + 8)
        return 0;
    return __atomic_load_n(reg_u32(area + 4), __ATOMIC_ACQUIRE) != 0;
}

/* At load, on the main thread: every CPU of the list that it may use, until its threads
 * begin. Where none of them may be used, or the kernel refuses the set, entry 0 alone, as
 * before (with its warning when that fails too). */
static void widen_main(void)
{
    cpu_set_t u;
    CPU_ZERO(&u);
    for (unsigned i = 0; i < ncpus; i++)
        if (cpus[i] < CPU_SETSIZE)
            CPU_SET(cpus[i], &u);
    if (have_initial_mask)
        CPU_AND(&u, &u, &initial_mask);
    if (CPU_COUNT(&u) == 0 || sched_setaffinity(0, sizeof u, &u) != 0) {
        pin_self(cpus[0]);
        return;
    }
    /* What the kernel kept (a cpuset may narrow it further): the narrowing compares with it. */
    if (sched_getaffinity(0, sizeof main_union, &main_union) != 0)
        return;
    int only_first = CPU_COUNT(&main_union) == 1 && cpus[0] < CPU_SETSIZE &&
                     CPU_ISSET(cpus[0], &main_union);
    if (!only_first)
        __atomic_store_n(&main_wide, 1, __ATOMIC_RELEASE);
}

/* The program's threads begin: the main thread goes to entry 0, unless its mask is no
 * longer the union (the program or autopin's engine set it) or autopin is gone. Once per
 * process, from whichever thread gets here first. `kmpc`: at a libomp region, which counts
 * the CPUs when it first needs them: it is asked now, while the union is in force. */
static __attribute__((noinline)) void narrow_main_slow(int kmpc)
{
    if (!__atomic_exchange_n(&main_wide, 0, __ATOMIC_ACQ_REL))
        return;
    if (autopin_gone() || engine_moves_threads())
        return;
    if (kmpc) {
        /* The runtime's own (RTLD_NEXT): ours would take the call for the program's. */
        int (*procs)(void) = (int (*)(void))dlsym(RTLD_NEXT, "omp_get_num_procs");
        if (procs)
            (void)procs();
    }
    pid_t main_tid = getpid();
    cpu_set_t now;
    if (sched_getaffinity(main_tid, sizeof now, &now) != 0 || !CPU_EQUAL(&now, &main_union))
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    if (sched_setaffinity(main_tid, sizeof one, &one) != 0 &&
        !__atomic_exchange_n(&warned_affinity, 1, __ATOMIC_RELAXED))
        say("cannot pin the main thread to CPU %d: %s; it keeps the list's CPUs", cpus[0],
            strerror(errno));
}

/* Hot path (every parallel region): one relaxed load. */
static inline void narrow_main(int kmpc)
{
    if (__builtin_expect(__atomic_load_n(&main_wide, __ATOMIC_RELAXED), 0))
        narrow_main_slow(kmpc);
}

static void *start_thread(void *p)
{
    struct start s = *(struct start *)p;
    free(p);
    /* With autopin gone, the thread keeps its creator's mask, as any thread does: the
     * guardian gave the creator its mask back (the mask this library read at its start may
     * already have been a probe's, should autopin have pinned the main thread first). */
    if ((s.cpu >= 0 || ncpus) && autopin_gone())
        s.cpu = -1;
    else if (s.cpu >= 0)
        pin_self(s.cpu);
    else if (ncpus)
        unpin_self();
    if (s.record) {
        uint32_t slot = reg_record(my_tid(), s.cpu >= 0 || !ncpus ? ST_ALIVE : ST_SKIPPED, s.index);
        if (slot != UINT32_MAX && exit_key_ok)
            pthread_setspecific(exit_key, (void *)((uintptr_t)slot + 1));
    }
    return s.fn(s.arg);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    if (!real_create) {
        real_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
        if (!real_create)
            return EAGAIN; /* cannot happen with a libc that has threads */
    }
    if (!active)
        return real_create(thread, attr, fn, arg);
    narrow_main(0);
    struct start *s = malloc(sizeof *s);
    if (!s)
        return real_create(thread, attr, fn, arg);
    unsigned n = __atomic_fetch_add(&created, 1, __ATOMIC_ACQ_REL); /* 0-based */
    s->fn = fn;
    s->arg = arg;
    s->index = n + 1;
    s->cpu = -1;
    if (ncpus && !skipped(n)) {
        unsigned k = __atomic_add_fetch(&pinned, 1, __ATOMIC_ACQ_REL);
        s->cpu = cpus[k % ncpus];
    }
    s->record = reg_claim();
    int rc = real_create(thread, attr, start_thread, s);
    if (rc != 0)
        free(s);
    return rc;
}

/* ---------------------------------------------------------------- OpenMP progress */

#define OMP_MAGIC 0x3130504d4f504f41ULL
#define OMP_OFF 128u
#define OMP_SLOTS_OFF 192u
#define OMP_SLOT 64u
#define OMP_FILE_MIN 16384u
#define OMP_SLOTS ((OMP_FILE_MIN - OMP_SLOTS_OFF) / OMP_SLOT)
#define RT_GNU 1u
#define RT_KMPC 2u

enum { C_REGIONS, C_CHUNKS, C_BARRIERS, C_TASKS, C_OTHER, C_TEAM };

struct omp_slot {
    uint64_t c[8];
};

static unsigned char *omp_map_base; /* the heartbeat file, NULL when not counting */
static pthread_once_t omp_once = PTHREAD_ONCE_INIT;
/* Where a thread's counts go when there is no file: its own, so that threads never
 * write one cache line (a shared dummy cost 4% on a barrier loop). */
static __thread struct omp_slot my_dummy __attribute__((tls_model("initial-exec")));
static __thread struct omp_slot *my_slot __attribute__((tls_model("initial-exec")));
static __thread int my_slot_shared __attribute__((tls_model("initial-exec")));

static void omp_map_file(void)
{
    const char *path = getenv("AUTOPIN_HEARTBEAT");
    if (!path || !*path)
        return;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)OMP_FILE_MIN) {
        close(fd); /* an older autopin's 128-byte file: heartbeats only */
        return;
    }
    void *p = mmap(NULL, OMP_FILE_MIN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return;
    uint32_t slots = OMP_SLOTS;
    __atomic_store_n((uint32_t *)((unsigned char *)p + OMP_OFF + 8), slots, __ATOMIC_RELAXED);
    omp_map_base = p;
}

static struct omp_slot *omp_slot_at(uint32_t i)
{
    return (struct omp_slot *)(omp_map_base + OMP_SLOTS_OFF + (size_t)i * OMP_SLOT);
}

/* First count of this thread: find the file, announce the runtime, take a slot. */
static __attribute__((noinline)) struct omp_slot *omp_slot_slow(unsigned runtime)
{
    pthread_once(&omp_once, omp_map_file);
    if (!omp_map_base) {
        my_slot = &my_dummy;
        return my_slot;
    }
    uint32_t *rt = (uint32_t *)(omp_map_base + OMP_OFF + 16);
    uint32_t zero = 0;
    __atomic_compare_exchange_n(rt, &zero, runtime, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    __atomic_store_n((uint64_t *)(omp_map_base + OMP_OFF), OMP_MAGIC, __ATOMIC_RELEASE);
    uint32_t *used = (uint32_t *)(omp_map_base + OMP_OFF + 12);
    /* Slot 0 is shared. Threads take every other slot (1, 3, 5, ...): two threads' slots
     * never sit in one 128-byte pair of cache lines, which adjacent-line prefetchers move
     * together (counting cost 2-4% more on a barrier loop with neighbouring slots). */
    uint32_t i = 2 * __atomic_fetch_add(used, 1, __ATOMIC_RELAXED) + 1;
    if (i < OMP_SLOTS) {
        my_slot = omp_slot_at(i);
    } else {
        my_slot = omp_slot_at(0);
        my_slot_shared = 1;
    }
    return my_slot;
}

static inline void omp_count(int what, unsigned runtime)
{
    struct omp_slot *s = my_slot;
    if (__builtin_expect(s == NULL, 0))
        s = omp_slot_slow(runtime);
    if (__builtin_expect(my_slot_shared, 0)) {
        __atomic_fetch_add(&s->c[what], 1, __ATOMIC_RELAXED);
        return;
    }
    /* One writer per slot: a relaxed load-add-store is enough and takes no lock. */
    __atomic_store_n(&s->c[what], __atomic_load_n(&s->c[what], __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
}

/* Which family of entry points this process counts: the first one the program calls.
 * libomp implements GOMP_* on top of its own __kmpc_* entry points, so a GCC program run
 * against libomp would otherwise count its constructs twice. (A program that mixes code
 * from both compilers is counted through one family only.) */
static unsigned omp_family; /* 0 until the first call, then RT_GNU or RT_KMPC */

static inline void family_count(int what, unsigned family)
{
    unsigned f = __atomic_load_n(&omp_family, __ATOMIC_RELAXED);
    if (__builtin_expect(f == 0, 0)) {
        unsigned zero = 0;
        __atomic_compare_exchange_n(&omp_family, &zero, family, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
        f = __atomic_load_n(&omp_family, __ATOMIC_RELAXED);
    }
    if (__builtin_expect(f == family, 1))
        omp_count(what, family);
}
#define gnu_count(what) family_count(what, RT_GNU)
#define kmpc_count(what) family_count(what, RT_KMPC)

/* The thread that starts the program's parallel regions (the master of every outermost
 * team): its arrivals at barriers and construct ends count once per team in C_TEAM, a
 * count that does not grow with the team's size (see "The team's size" below). */
static __thread int i_start_regions __attribute__((tls_model("initial-exec")));

static inline void barrier_count(int what, unsigned family)
{
    family_count(what, family);
    if (what == C_BARRIERS && __builtin_expect(i_start_regions, 0))
        family_count(C_TEAM, family);
}

/* The next definition of an entry point (libgomp's). It exists whenever the program calls
 * it, since the program was linked against it; if not, there is nothing sane to forward
 * to, and we stop the program with a message rather than jump to NULL. */
static __attribute__((noinline)) void *next_fn_slow(void **cache, const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        say("%s called but no OpenMP runtime defines it", name);
        abort();
    }
    __atomic_store_n(cache, f, __ATOMIC_RELAXED);
    return f;
}

/* Inline fast path: every wrapped call pays only a load here. */
static inline void *next_fn(void **cache, const char *name)
{
    void *f = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (__builtin_expect(f != NULL, 1))
        return f;
    return next_fn_slow(cache, name);
}

#define NEXT(type, name)                                                                    \
    static void *cache_##name;                                                              \
    __typeof__(type) real = (__typeof__(type))next_fn(&cache_##name, #name)

typedef void (*omp_fn)(void *);
typedef struct ident ident_t; /* libomp's source location; passed through untouched */
typedef _Bool (*next_l)(long *, long *);
typedef _Bool (*next_ull)(unsigned long long *, unsigned long long *);

/* Loop chunk hand-out: every call after the first of a loop ends the caller's previous
 * chunk, so counting calls counts completed chunks (the last call, returning false, ends
 * the last one). */
#define LOOP_NEXT(name)                                                                     \
    _Bool name(long *istart, long *iend)                                                    \
    {                                                                                       \
        NEXT(next_l, name);                                                                 \
        gnu_count(C_CHUNKS);                                                                \
        return real(istart, iend);                                                          \
    }
#define LOOP_NEXT_ULL(name)                                                                 \
    _Bool name(unsigned long long *istart, unsigned long long *iend)                        \
    {                                                                                       \
        NEXT(next_ull, name);                                                               \
        gnu_count(C_CHUNKS);                                                                \
        return real(istart, iend);                                                          \
    }

LOOP_NEXT(GOMP_loop_static_next)
LOOP_NEXT(GOMP_loop_dynamic_next)
LOOP_NEXT(GOMP_loop_guided_next)
LOOP_NEXT(GOMP_loop_runtime_next)
LOOP_NEXT(GOMP_loop_nonmonotonic_dynamic_next)
LOOP_NEXT(GOMP_loop_nonmonotonic_guided_next)
LOOP_NEXT(GOMP_loop_nonmonotonic_runtime_next)
LOOP_NEXT(GOMP_loop_maybe_nonmonotonic_runtime_next)
LOOP_NEXT(GOMP_loop_ordered_static_next)
LOOP_NEXT(GOMP_loop_ordered_dynamic_next)
LOOP_NEXT(GOMP_loop_ordered_guided_next)
LOOP_NEXT(GOMP_loop_ordered_runtime_next)
LOOP_NEXT_ULL(GOMP_loop_ull_static_next)
LOOP_NEXT_ULL(GOMP_loop_ull_dynamic_next)
LOOP_NEXT_ULL(GOMP_loop_ull_guided_next)
LOOP_NEXT_ULL(GOMP_loop_ull_runtime_next)
LOOP_NEXT_ULL(GOMP_loop_ull_nonmonotonic_dynamic_next)
LOOP_NEXT_ULL(GOMP_loop_ull_nonmonotonic_guided_next)
LOOP_NEXT_ULL(GOMP_loop_ull_nonmonotonic_runtime_next)
LOOP_NEXT_ULL(GOMP_loop_ull_maybe_nonmonotonic_runtime_next)
LOOP_NEXT_ULL(GOMP_loop_ull_ordered_static_next)
LOOP_NEXT_ULL(GOMP_loop_ull_ordered_dynamic_next)
LOOP_NEXT_ULL(GOMP_loop_ull_ordered_guided_next)
LOOP_NEXT_ULL(GOMP_loop_ull_ordered_runtime_next)

/* Barriers and construct ends, counted on arrival: the forwarding call is then the last
 * thing the wrapper does, a jump, and a thread that arrives early counts while it would
 * wait anyway. A count leads its barrier's completion by at most one per thread, nothing
 * against a probe's thousands. (Counting after the call cost 3% on a loop of 250 ns
 * barriers; on arrival it is within the noise.) */
#define VOID_ON_ARRIVAL(name, what)                                                         \
    void name(void)                                                                         \
    {                                                                                       \
        NEXT(void (*)(void), name);                                                         \
        barrier_count(what, RT_GNU);                                                        \
        real();                                                                             \
    }
#define BOOL_ON_ARRIVAL(name, what)                                                         \
    _Bool name(void)                                                                        \
    {                                                                                       \
        NEXT(_Bool (*)(void), name);                                                        \
        barrier_count(what, RT_GNU);                                                        \
        return real();                                                                      \
    }

VOID_ON_ARRIVAL(GOMP_barrier, C_BARRIERS)
BOOL_ON_ARRIVAL(GOMP_barrier_cancel, C_BARRIERS)
VOID_ON_ARRIVAL(GOMP_loop_end, C_BARRIERS)
BOOL_ON_ARRIVAL(GOMP_loop_end_cancel, C_BARRIERS)
VOID_ON_ARRIVAL(GOMP_loop_end_nowait, C_OTHER)
VOID_ON_ARRIVAL(GOMP_sections_end, C_BARRIERS)
BOOL_ON_ARRIVAL(GOMP_sections_end_cancel, C_BARRIERS)
VOID_ON_ARRIVAL(GOMP_sections_end_nowait, C_OTHER)
VOID_ON_ARRIVAL(GOMP_taskwait, C_BARRIERS)
VOID_ON_ARRIVAL(GOMP_taskgroup_end, C_BARRIERS)
VOID_ON_ARRIVAL(GOMP_critical_end, C_OTHER)
VOID_ON_ARRIVAL(GOMP_ordered_end, C_OTHER)
VOID_ON_ARRIVAL(GOMP_parallel_end, C_REGIONS)

void GOMP_critical_name_end(void **pptr)
{
    NEXT(void (*)(void **), GOMP_critical_name_end);
    gnu_count(C_OTHER);
    real(pptr);
}

_Bool GOMP_single_start(void)
{
    NEXT(_Bool (*)(void), GOMP_single_start);
    _Bool mine = real();
    gnu_count(C_CHUNKS);
    return mine;
}

unsigned GOMP_sections_next(void)
{
    NEXT(unsigned (*)(void), GOMP_sections_next);
    gnu_count(C_CHUNKS);
    return real();
}

/* ---------------------------------------------------------------- the team's size
 *
 * autopin may ask for smaller teams in the program's next outermost parallel regions (the
 * thread count is a dimension of its search). The heartbeat file's OpenMP header holds:
 *   offset 152 u32 want     written by autopin: the team size wanted from the next
 *                           outermost region on (0: the program's own)
 *   offset 156 u32 applied  written here: the want in force (0: the program's own count)
 *   offset 160 u32 flags    written here (atomic or), what the library saw:
 *                             1 asked: the program asked omp_get_max_threads,
 *                               omp_get_num_procs or omp_get_thread_limit outside a
 *                               parallel region (it may have sized its work by the answer)
 *                             2 set: the program set its count (omp_set_num_threads)
 *                             4 dynamic: dyn-var was true at a region (OMP_DYNAMIC,
 *                               omp_set_dynamic): the runtime may size every team itself
 *                             8 clause: a region with a num_threads clause ran (it keeps
 *                               its count)
 *                            16 threadprivate: libomp's threadprivate cache was used
 *                            32 refused: a want was not applied (1, 2, 16 or 64 without 4)
 *                            64 kept: the program asked its team's size inside an
 *                               outermost region (omp_get_num_threads) and later began
 *                               one that did not ask: it may split its work by the size
 *                               it kept from the earlier answer
 *   offset 164 u32 own      the team size the program's regions get on their own: what
 *                           omp_get_max_threads() said at its first region
 *   offset 168 u32 starts   outermost parallel regions begun so far (atomic): a program
 *                           whose count stops growing runs one long region, whose team
 *                           no want can change until it ends
 *   offset 172 u32 named    the largest team size the program named itself
 *                           (omp_set_num_threads, a num_threads clause; atomic max): one
 *                           that names the count its environment gave it (GROMACS and
 *                           LAMMPS read OMP_NUM_THREADS) takes a smaller one at its start
 *
 * The rule (docs/threads.md): a team's size changes mid-run only between outermost
 * regions, only to fewer threads than the program's own count, and only when no
 * conforming program can tell: dyn-var true (the runtime may then size any team, so a
 * conforming program cannot depend on it), or a program that never asked for its count
 * or its CPUs outside a region, never set its count, uses no libomp threadprivate data,
 * and never kept a team size it asked inside a region: its asks of omp_get_num_threads
 * inside regions come in every outermost region since its first (GCC's static loop
 * schedules ask in each region they run in), or in none. One region that asked is not yet
 * a pattern: a want waits for the next region's start to see whether it asked too. The
 * first outermost region always runs the program's own count.
 * (autopin also leaves alone a program with thread-local data of its own, which may be
 * OpenMP threadprivate data that persists only while the team keeps its size: it reads
 * that from the executable.) The change is omp_set_num_threads() on the thread that starts
 * the regions, so omp_get_max_threads() agrees from then on; a want of 0 restores the
 * program's own count. */
#define TEAM_WANT 152u
#define TEAM_APPLIED 156u
#define TEAM_FLAGS 160u
#define TEAM_OWN 164u
#define TEAM_STARTS 168u
#define TEAM_NAMED 172u
enum {
    T_ASKED = 1,
    T_SET = 2,
    T_DYNAMIC = 4,
    T_CLAUSE = 8,
    T_THREADPRIVATE = 16,
    T_REFUSED = 32,
    T_KEPT = 64
};

/* The program's asks of its team's size inside regions: whether the outermost region
 * running now asked (any of its threads, any nesting level), and how many outermost
 * regions asked so far (taken at each outermost start, for the region before). */
static uint32_t region_asked, asking_regions;

static uint32_t *team_word(unsigned off)
{
    return (uint32_t *)(omp_map_base + OMP_OFF + (off - OMP_OFF));
}

static void team_flag(uint32_t f)
{
    pthread_once(&omp_once, omp_map_file);
    if (omp_map_base && !(__atomic_load_n(team_word(TEAM_FLAGS), __ATOMIC_RELAXED) & f))
        __atomic_fetch_or(team_word(TEAM_FLAGS), f, __ATOMIC_RELAXED);
}

/* A team size the program named itself (set or clause): the largest is kept. */
static void team_named(int n)
{
    pthread_once(&omp_once, omp_map_file);
    if (!omp_map_base || n <= 0)
        return;
    uint32_t *w = team_word(TEAM_NAMED);
    uint32_t old = __atomic_load_n(w, __ATOMIC_RELAXED);
    while (old < (uint32_t)n &&
           !__atomic_compare_exchange_n(w, &old, (uint32_t)n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* The runtime's own functions (not our wrappers of them). */
static int real_int_call(void **cache, const char *name)
{
    int (*f)(void) = (int (*)(void))__atomic_load_n(cache, __ATOMIC_RELAXED);
    if (!f) {
        f = (int (*)(void))dlsym(RTLD_NEXT, name);
        if (!f)
            return -1;
        __atomic_store_n(cache, (void *)f, __ATOMIC_RELAXED);
    }
    return f();
}
static void *cache_level, *cache_max, *cache_dyn, *cache_set;
static int in_region(void) { return real_int_call(&cache_level, "omp_get_level") > 0; }

/* At the start of an outermost region on the thread that starts it: apply a new want. */
static __attribute__((noinline)) void team_change(uint32_t want, uint32_t applied)
{
    if (in_region())
        return;
    uint32_t *own = team_word(TEAM_OWN);
    if (__atomic_load_n(own, __ATOMIC_RELAXED) == 0) {
        int n = real_int_call(&cache_max, "omp_get_max_threads");
        __atomic_store_n(own, n > 0 ? (uint32_t)n : 1u, __ATOMIC_RELAXED);
    }
    if (want == applied)
        return;
    if (real_int_call(&cache_dyn, "omp_get_dynamic") > 0)
        team_flag(T_DYNAMIC);
    uint32_t flags = __atomic_load_n(team_word(TEAM_FLAGS), __ATOMIC_RELAXED);
    if (!(flags & T_DYNAMIC) && (flags & (T_ASKED | T_SET | T_THREADPRIVATE | T_KEPT))) {
        team_flag(T_REFUSED);
        return;
    }
    /* The first outermost region keeps the program's own count (a want written before the
     * program started, fewer threads plausible at launch, waits for the second): a program
     * that runs in one long region would otherwise keep the smaller team to its end,
     * where no search can undo it. */
    if (__atomic_load_n(team_word(TEAM_STARTS), __ATOMIC_RELAXED) < 2)
        return;
    /* One region asked its size so far: whether the next asks again (a fresh answer each
     * region) or keeps that answer is seen at the next region's start; wait for it. */
    if (!(flags & T_DYNAMIC) && __atomic_load_n(&asking_regions, __ATOMIC_RELAXED) == 1)
        return;
    void (*set)(int) = (void (*)(int))__atomic_load_n(&cache_set, __ATOMIC_RELAXED);
    if (!set) {
        set = (void (*)(int))dlsym(RTLD_NEXT, "omp_set_num_threads");
        if (!set)
            return;
        __atomic_store_n(&cache_set, (void *)set, __ATOMIC_RELAXED);
    }
    uint32_t n = __atomic_load_n(own, __ATOMIC_RELAXED);
    if (want > 0 && want < n)
        n = want;
    set((int)n);
    __atomic_store_n(team_word(TEAM_APPLIED), want, __ATOMIC_RELEASE);
}

/* Every region start, on the thread that starts it: one load and compare of the shared
 * words when nothing changes. `nthreads` is the region's num_threads clause (0: none). */
static inline void team_region(unsigned nthreads)
{
    i_start_regions = 1;
    if (__builtin_expect(omp_map_base == NULL, 0)) {
        pthread_once(&omp_once, omp_map_file);
        if (!omp_map_base)
            return;
    }
    if (nthreads) {
        team_flag(T_CLAUSE);
        team_named((int)nthreads);
    }
    if (!in_region()) {
        __atomic_fetch_add(team_word(TEAM_STARTS), 1, __ATOMIC_RELAXED);
        /* The region before this one: did it ask its size, after an earlier one had? */
        if (__atomic_load_n(&region_asked, __ATOMIC_RELAXED)) {
            __atomic_store_n(&region_asked, 0, __ATOMIC_RELAXED);
            __atomic_fetch_add(&asking_regions, 1, __ATOMIC_RELAXED);
        } else if (__atomic_load_n(&asking_regions, __ATOMIC_RELAXED)) {
            team_flag(T_KEPT);
        }
    }
    uint32_t want = __atomic_load_n(team_word(TEAM_WANT), __ATOMIC_ACQUIRE);
    uint32_t applied = __atomic_load_n(team_word(TEAM_APPLIED), __ATOMIC_RELAXED);
    if (__builtin_expect(want != applied, 0) ||
        __builtin_expect(__atomic_load_n(team_word(TEAM_OWN), __ATOMIC_RELAXED) == 0, 0))
        team_change(want, applied);
}

/* The team's size asked inside a region: noted for the region (see region_asked). */
static void asked_size(void)
{
    if (!__atomic_load_n(&region_asked, __ATOMIC_RELAXED) && in_region())
        __atomic_store_n(&region_asked, 1, __ATOMIC_RELAXED);
}

/* What the program asks of its count outside a region, and its own setting of it. */
/* (`size`: inside a region the answer may stand for the team's size too: the count a
 * nested region would get is the outer count, and programs read it as such.) */
#define ASKS(name, size)                                                                    \
    int name(void)                                                                          \
    {                                                                                       \
        NEXT(int (*)(void), name);                                                          \
        if (!in_region())                                                                   \
            team_flag(T_ASKED);                                                             \
        else if (size)                                                                      \
            asked_size();                                                                   \
        return real();                                                                      \
    }
ASKS(omp_get_max_threads, 1)
ASKS(omp_get_num_procs, 0)
ASKS(omp_get_thread_limit, 0)
ASKS(omp_get_max_threads_, 1)
ASKS(omp_get_num_procs_, 0)
ASKS(omp_get_thread_limit_, 0)

int omp_get_num_threads(void)
{
    NEXT(int (*)(void), omp_get_num_threads);
    asked_size();
    return real();
}

int omp_get_num_threads_(void)
{
    NEXT(int (*)(void), omp_get_num_threads_);
    asked_size();
    return real();
}

void omp_set_num_threads(int n)
{
    NEXT(void (*)(int), omp_set_num_threads);
    team_flag(T_SET);
    team_named(n);
    real(n);
}

void omp_set_num_threads_(int *n)
{
    NEXT(void (*)(int *), omp_set_num_threads_);
    team_flag(T_SET);
    if (n)
        team_named(*n);
    real(n);
}

/* A num_threads clause, compiled by clang: the region keeps its count. */
void __kmpc_push_num_threads(ident_t *loc, int32_t gtid, int32_t n)
{
    NEXT(void (*)(ident_t *, int32_t, int32_t), __kmpc_push_num_threads);
    team_flag(T_CLAUSE);
    team_named(n);
    real(loc, gtid, n);
}

void *__kmpc_threadprivate_cached(ident_t *loc, int32_t gtid, void *data, size_t size,
                                  void ***cache)
{
    NEXT(void *(*)(ident_t *, int32_t, void *, size_t, void ***), __kmpc_threadprivate_cached);
    team_flag(T_THREADPRIVATE);
    return real(loc, gtid, data, size, cache);
}

/* Whole parallel regions: the starting thread counts one when the region is over. */
void GOMP_parallel(omp_fn fn, void *data, unsigned nthreads, unsigned flags)
{
    NEXT(void (*)(omp_fn, void *, unsigned, unsigned), GOMP_parallel);
    narrow_main(0);
    team_region(nthreads);
    real(fn, data, nthreads, flags);
    gnu_count(C_REGIONS);
}

unsigned GOMP_parallel_reductions(omp_fn fn, void *data, unsigned nthreads, unsigned flags)
{
    NEXT(unsigned (*)(omp_fn, void *, unsigned, unsigned), GOMP_parallel_reductions);
    narrow_main(0);
    team_region(nthreads);
    unsigned r = real(fn, data, nthreads, flags);
    gnu_count(C_REGIONS);
    return r;
}

void GOMP_parallel_sections(omp_fn fn, void *data, unsigned nthreads, unsigned count,
                            unsigned flags)
{
    NEXT(void (*)(omp_fn, void *, unsigned, unsigned, unsigned), GOMP_parallel_sections);
    narrow_main(0);
    team_region(nthreads);
    real(fn, data, nthreads, count, flags);
    gnu_count(C_REGIONS);
}

#define PARALLEL_LOOP_CHUNK(name)                                                           \
    void name(omp_fn fn, void *data, unsigned nthreads, long start, long end, long incr,    \
              long chunk, unsigned flags)                                                   \
    {                                                                                       \
        NEXT(void (*)(omp_fn, void *, unsigned, long, long, long, long, unsigned), name);   \
        narrow_main(0);                                                                     \
        team_region(nthreads);                                                              \
        real(fn, data, nthreads, start, end, incr, chunk, flags);                           \
        gnu_count(C_REGIONS);                                                               \
    }
#define PARALLEL_LOOP_RUNTIME(name)                                                         \
    void name(omp_fn fn, void *data, unsigned nthreads, long start, long end, long incr,    \
              unsigned flags)                                                               \
    {                                                                                       \
        NEXT(void (*)(omp_fn, void *, unsigned, long, long, long, unsigned), name);         \
        narrow_main(0);                                                                     \
        team_region(nthreads);                                                              \
        real(fn, data, nthreads, start, end, incr, flags);                                  \
        gnu_count(C_REGIONS);                                                               \
    }

PARALLEL_LOOP_CHUNK(GOMP_parallel_loop_static)
PARALLEL_LOOP_CHUNK(GOMP_parallel_loop_dynamic)
PARALLEL_LOOP_CHUNK(GOMP_parallel_loop_guided)
PARALLEL_LOOP_CHUNK(GOMP_parallel_loop_nonmonotonic_dynamic)
PARALLEL_LOOP_CHUNK(GOMP_parallel_loop_nonmonotonic_guided)
PARALLEL_LOOP_RUNTIME(GOMP_parallel_loop_runtime)
PARALLEL_LOOP_RUNTIME(GOMP_parallel_loop_nonmonotonic_runtime)
PARALLEL_LOOP_RUNTIME(GOMP_parallel_loop_maybe_nonmonotonic_runtime)

/* GOMP_task grew arguments over GCC releases (depend, priority, detach); libgomp reads the
 * later ones only when `flags` says they were passed, so forwarding all ten is what a
 * direct call would do. */
void GOMP_task(omp_fn fn, void *data, void (*cpyfn)(void *, void *), long arg_size,
               long arg_align, _Bool if_clause, unsigned flags, void **depend, int priority,
               void *detach)
{
    NEXT(void (*)(omp_fn, void *, void (*)(void *, void *), long, long, _Bool, unsigned,
                  void **, int, void *),
         GOMP_task);
    gnu_count(C_TASKS);
    real(fn, data, cpyfn, arg_size, arg_align, if_clause, flags, depend, priority, detach);
}

/* ---- LLVM/Intel libomp (and libiomp5): the __kmpc_* entry points compiled code calls.
 * Interposed like the GNU ones. (The OpenMP tools interface, OMPT, would see the same
 * events, but a runtime with a tool attached keeps its bookkeeping on for every barrier:
 * 9% on a loop of 250 ns barriers, where these wrappers are within the noise.) */


/* Barriers, task waits and task group ends, counted on arrival (see VOID_ON_ARRIVAL); so
 * are static loops ending and serialized regions. The implicit barrier that ends a
 * parallel region is inside libomp; the region itself is counted. */
#define KMPC_ON_ARRIVAL(ret, name, what)                                                    \
    ret name(ident_t *loc, int32_t gtid)                                                    \
    {                                                                                       \
        NEXT(ret (*)(ident_t *, int32_t), name);                                            \
        barrier_count(what, RT_KMPC);                                                       \
        return real(loc, gtid);                                                             \
    }
KMPC_ON_ARRIVAL(void, __kmpc_barrier, C_BARRIERS)
KMPC_ON_ARRIVAL(int32_t, __kmpc_cancel_barrier, C_BARRIERS)
KMPC_ON_ARRIVAL(int32_t, __kmpc_omp_taskwait, C_BARRIERS)
KMPC_ON_ARRIVAL(void, __kmpc_end_taskgroup, C_BARRIERS)
KMPC_ON_ARRIVAL(void, __kmpc_for_static_fini, C_OTHER)
KMPC_ON_ARRIVAL(void, __kmpc_end_serialized_parallel, C_REGIONS)

/* The thread that runs a single block. */
int32_t __kmpc_single(ident_t *loc, int32_t gtid)
{
    NEXT(int32_t (*)(ident_t *, int32_t), __kmpc_single);
    int32_t mine = real(loc, gtid);
    if (mine)
        kmpc_count(C_CHUNKS);
    return mine;
}

/* Explicit tasks, counted when created (as GOMP_task). */
int32_t __kmpc_omp_task(ident_t *loc, int32_t gtid, void *task)
{
    NEXT(int32_t (*)(ident_t *, int32_t, void *), __kmpc_omp_task);
    kmpc_count(C_TASKS);
    return real(loc, gtid, task);
}

int32_t __kmpc_omp_task_with_deps(ident_t *loc, int32_t gtid, void *task, int32_t ndeps,
                                  void *deps, int32_t ndeps_noalias, void *noalias)
{
    NEXT(int32_t (*)(ident_t *, int32_t, void *, int32_t, void *, int32_t, void *),
         __kmpc_omp_task_with_deps);
    kmpc_count(C_TASKS);
    return real(loc, gtid, task, ndeps, deps, ndeps_noalias, noalias);
}

/* Dynamic-schedule chunk hand-out: each call ends the caller's previous chunk (as for
 * GOMP_loop_*_next). */
#define KMPC_DISPATCH_NEXT(name, T, ST)                                                     \
    int name(ident_t *loc, int32_t gtid, int32_t *p_last, T *p_lb, T *p_ub, ST *p_st)       \
    {                                                                                       \
        NEXT(int (*)(ident_t *, int32_t, int32_t *, T *, T *, ST *), name);                 \
        kmpc_count(C_CHUNKS);                                                               \
        return real(loc, gtid, p_last, p_lb, p_ub, p_st);                                   \
    }
KMPC_DISPATCH_NEXT(__kmpc_dispatch_next_4, int32_t, int32_t)
KMPC_DISPATCH_NEXT(__kmpc_dispatch_next_4u, uint32_t, int32_t)
KMPC_DISPATCH_NEXT(__kmpc_dispatch_next_8, int64_t, int64_t)
KMPC_DISPATCH_NEXT(__kmpc_dispatch_next_8u, uint64_t, int64_t)

#if defined(__x86_64__)
/* Parallel regions, counted when they start (and the main thread narrowed at the first).
 * __kmpc_fork_call(loc, argc, microtask, ...)
 * is variadic, and C cannot forward a variable argument list: a few instructions save the
 * argument registers around the count and jump to libomp's entry point with registers and
 * stack as the caller left them. (Elsewhere libomp regions go uncounted; their barriers,
 * loops and tasks still are.) */
__attribute__((visibility("hidden"), used)) void *autopin_kmpc_fork_prologue(void)
{
    NEXT(void *, __kmpc_fork_call);
    narrow_main(1);
    team_region(0);
    kmpc_count(C_REGIONS);
    return real;
}

__asm__(".text\n"
        ".globl __kmpc_fork_call\n"
        ".type __kmpc_fork_call, @function\n"
        "__kmpc_fork_call:\n"
        "  .cfi_startproc\n"
        "  endbr64\n"
        /* Seven pushes after the return address keep the stack 16-byte aligned. */
        "  push %rdi\n"
        "  push %rsi\n"
        "  push %rdx\n"
        "  push %rcx\n"
        "  push %r8\n"
        "  push %r9\n"
        "  push %rax\n"
        "  .cfi_adjust_cfa_offset 56\n"
        "  call autopin_kmpc_fork_prologue\n"
        "  mov %rax, %r11\n"
        "  pop %rax\n"
        "  pop %r9\n"
        "  pop %r8\n"
        "  pop %rcx\n"
        "  pop %rdx\n"
        "  pop %rsi\n"
        "  pop %rdi\n"
        "  .cfi_adjust_cfa_offset -56\n"
        "  jmp *%r11\n"
        "  .cfi_endproc\n"
        ".size __kmpc_fork_call, .-__kmpc_fork_call\n");
#endif

static void after_fork_child(void)
{
    /* A forked child is a new process with one thread; it numbers its own threads. */
    __atomic_store_n(&created, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&pinned, 0, __ATOMIC_RELAXED);
    if (reg && __atomic_load_n(reg_u64(16), __ATOMIC_ACQUIRE) != (uint64_t)getpid())
        reg_mine = -1;
    pthread_mutex_init(&reg_lock, NULL);
    if (exit_key_ok)
        pthread_setspecific(exit_key, NULL); /* the forking thread's slot is the parent's */
    my_slot = NULL; /* the parent's thread owns that OpenMP slot; take our own */
    my_slot_shared = 0;
    /* A child of the process autopin searches is not managed by it: it would keep the
     * forking thread's probe CPU for life (and pass it on through exec). It gets the mask
     * the program started with instead, and pins none of its own threads. */
    if (reg && reg_mine < 0 && __atomic_load_n(reg_u64(16), __ATOMIC_ACQUIRE) != 0) {
        __atomic_store_n(&ncpus, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&main_wide, 0, __ATOMIC_RELAXED);
        if (have_initial_mask)
            (void)sched_setaffinity(0, sizeof initial_mask, &initial_mask);
    }
    reg_record_process();
}

__attribute__((constructor)) static void autopin_preload_init(void)
{
    const char *c = getenv("AUTOPIN_CPUS");
    const char *s = getenv("AUTOPIN_SKIP");
    const char *r = getenv("AUTOPIN_REGISTRY");
    if ((!c || !*c) && (!r || !*r))
        return;
    const char *q = getenv("AUTOPIN_QUIET");
    quiet = q && *q && strcmp(q, "0") != 0;
    real_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!real_create) {
        say("pthread_create not found; not pinning");
        return;
    }
    if (c && *c && parse_cpus(c) == 0 && s && *s)
        parse_skip(s);
    if (r && *r) {
        map_registry(r);
        /* The registry is made before the launch and removed only when the autopin run
         * ends or dies (its guardian removes it). A process that cannot map it was started
         * after that (the program exec'd a new image once autopin was killed): pinning it
         * to a probe's CPUs would last for life, since nobody restores it any more. */
        if (!reg)
            ncpus = 0;
    }
    if (reg) {
        /* A process started by the program autopin searches (a child that exec'd): autopin
         * manages the program, not this one, which keeps the mask it was started with. */
        uint64_t owner = __atomic_load_n(reg_u64(16), __ATOMIC_ACQUIRE);
        if (owner != 0 && owner != (uint64_t)getpid())
            ncpus = 0;
        /* Started by posix_spawn or vfork (no fork handler ran) or exec'd after a fork:
         * the reader keeps each pid once. */
        reg_record_process();
    }
    exit_key_ok = pthread_key_create(&exit_key, on_thread_exit) == 0;
    pthread_atfork(NULL, NULL, after_fork_child);
    /* The mask the program started with: "unpinned" for skipped threads, and what a
     * forked child of a searched program gets back. */
    have_initial_mask = sched_getaffinity(0, sizeof initial_mask, &initial_mask) == 0;
    /* The main thread: the list's CPUs until the program's threads begin. */
    if (ncpus && !autopin_gone())
        widen_main();
    active = 1;
}
