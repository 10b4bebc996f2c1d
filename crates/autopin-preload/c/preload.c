/*
 * autopin LD_PRELOAD library: pins every thread of the target at birth and tells the
 * autopin engine which threads exist.
 *
 * Environment contract (all optional; with none set the library does nothing beyond
 * reading them once at load time):
 *
 *   AUTOPIN_CPUS="0,1,0,1"   CPU for each thread in creation order. The main thread is
 *                            thread 0 and is pinned when the library initialises; the
 *                            i-th pinned thread created by pthread_create gets entry i.
 *                            Past the end the list wraps around (entry i % length), like
 *                            likwid-pin's round-robin. Ranges "0-3" are accepted.
 *   AUTOPIN_SKIP=0x...       likwid-pin skip mask: bit i set = the i-th thread created by
 *                            pthread_create (0-based, main not counted) is neither pinned
 *                            nor consumes an entry of AUTOPIN_CPUS. Any length of hex.
 *                            A skipped thread gets the affinity the process had before
 *                            we pinned its main thread (it would otherwise inherit the
 *                            creator's single CPU).
 *   AUTOPIN_REGISTRY=/path   file created and sized by the engine; we record every thread.
 *   AUTOPIN_QUIET=1          suppress our one-line diagnostics.
 *
 * Registry layout (little-endian, naturally aligned; mirrored in
 * crates/autopin-engine/src/target/registry.rs):
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
 * restarts the numbering at 1 for the threads it creates (pthread_atfork).
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
static size_t reg_len;
static int reg_mine;      /* 1: this image records, -1: someone else does, 0: undecided */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static int exit_key_ok;
static int warned_affinity;
static cpu_set_t initial_mask; /* affinity before we pinned anything: skipped threads get it */
static int have_initial_mask;

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
        say("cannot open AUTOPIN_REGISTRY %.150s: %s", path, strerror(errno));
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)REG_HEADER) {
        say("AUTOPIN_REGISTRY %.150s is too small", path);
        close(fd);
        return;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        say("cannot map AUTOPIN_REGISTRY %.150s: %s", path, strerror(errno));
        return;
    }
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

static void *start_thread(void *p)
{
    struct start s = *(struct start *)p;
    free(p);
    if (s.cpu >= 0)
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
    if (r && *r)
        map_registry(r);
    exit_key_ok = pthread_key_create(&exit_key, on_thread_exit) == 0;
    pthread_atfork(NULL, NULL, after_fork_child);
    if (ncpus) {
        have_initial_mask = sched_getaffinity(0, sizeof initial_mask, &initial_mask) == 0;
        pin_self(cpus[0]);
    }
    active = 1;
}
