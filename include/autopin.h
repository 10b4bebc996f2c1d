/*
 * autopin.h — header-only back channel from an application to autopin.
 *
 *   autopin_heartbeat(n)    adds n units of finished work (iterations, cells, requests)
 *   autopin_phase("name")   names what the program is doing now
 *
 * autopin then optimizes the program's own progress rate instead of a hardware counter
 * proxy. Without autopin (no AUTOPIN_HEARTBEAT in the environment) both calls cost one
 * cached load and a branch. Include it in C or C++; no library to link.
 *
 * Contract: the environment variable AUTOPIN_HEARTBEAT names a file of at least 128 bytes
 * that autopin created. The first call maps it (MAP_SHARED) once per translation unit,
 * thread-safely; every call after that is lock-free. Layout (little-endian, naturally
 * aligned, 128 bytes; the reader is in autopin-perf):
 *
 *   offset  0  u64  magic      0x3142485450504f41 ("AOPPTHB1" in memory order)
 *   offset  8  u32  version    1
 *   offset 12  u32  reserved
 *   offset 16  u64  beats      atomic, relaxed fetch-add by autopin_heartbeat
 *   offset 24  u64  phase_seq  seqlock: odd while a writer updates phase[], even when
 *                              stable; each update adds 2. Readers copy phase[] between
 *                              two equal even reads of phase_seq.
 *   offset 32  char phase[64]  NUL-terminated name (truncated to 63 bytes)
 *   offset 96  u64  reserved2[4]
 *
 * autopin writes magic and version when it creates the file; a file whose first 8 bytes
 * are still zero is initialised by the first writer. A file with any other magic, or a
 * version other than 1, disables the calls (one line on stderr, once).
 */
#ifndef AUTOPIN_H
#define AUTOPIN_H

#include <stdint.h>

#if defined(__linux__)
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#define AUTOPIN_HB_MAGIC 0x3142485450504f41ULL
#define AUTOPIN_HB_VERSION 1u
#define AUTOPIN_HB_SIZE 128

struct autopin_hb {
    uint64_t magic;
    uint32_t version;
    uint32_t reserved;
    uint64_t beats;
    uint64_t phase_seq;
    char phase[64];
    uint64_t reserved2[4];
};

#ifdef __cplusplus
static_assert(sizeof(struct autopin_hb) == AUTOPIN_HB_SIZE, "autopin heartbeat layout");
extern "C" {
#else
_Static_assert(sizeof(struct autopin_hb) == AUTOPIN_HB_SIZE, "autopin heartbeat layout");
#endif

/* Sentinel for "looked, nothing to do". */
#define AUTOPIN__OFF ((struct autopin_hb *)(uintptr_t)1)

static struct autopin_hb *autopin__hb; /* NULL: not looked yet */

static inline struct autopin_hb *autopin__map(void)
{
#if defined(__linux__)
    const char *path = getenv("AUTOPIN_HEARTBEAT");
    struct autopin_hb *hb = AUTOPIN__OFF;
    if (path && *path) {
        int fd = open(path, O_RDWR | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= AUTOPIN_HB_SIZE) {
            void *p = mmap(NULL, AUTOPIN_HB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED) {
                struct autopin_hb *m = (struct autopin_hb *)p;
                uint64_t zero = 0;
                /* A zero file is ours to initialise; version is stored before magic is
                 * visible to a reader that checks magic first. */
                if (__atomic_load_n(&m->magic, __ATOMIC_ACQUIRE) == 0) {
                    __atomic_store_n(&m->version, AUTOPIN_HB_VERSION, __ATOMIC_RELAXED);
                    __atomic_compare_exchange_n(&m->magic, &zero, AUTOPIN_HB_MAGIC, 0,
                                                __ATOMIC_RELEASE, __ATOMIC_RELAXED);
                }
                if (__atomic_load_n(&m->magic, __ATOMIC_ACQUIRE) == AUTOPIN_HB_MAGIC &&
                    __atomic_load_n(&m->version, __ATOMIC_RELAXED) == AUTOPIN_HB_VERSION)
                    hb = m;
                else
                    munmap(p, AUTOPIN_HB_SIZE);
            }
        }
        if (fd >= 0)
            close(fd);
        if (hb == AUTOPIN__OFF) {
            static const char msg[] = "autopin.h: AUTOPIN_HEARTBEAT is not a usable heartbeat file; heartbeats off\n";
            ssize_t r = write(2, msg, sizeof msg - 1);
            (void)r;
        }
    }
    struct autopin_hb *expected = NULL;
    if (!__atomic_compare_exchange_n(&autopin__hb, &expected, hb, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        /* Another thread won the race; keep its mapping, drop ours. */
        if (hb != AUTOPIN__OFF)
            munmap(hb, AUTOPIN_HB_SIZE);
        hb = expected;
    }
    return hb;
#else
    __atomic_store_n(&autopin__hb, AUTOPIN__OFF, __ATOMIC_RELEASE);
    return AUTOPIN__OFF;
#endif
}

static inline struct autopin_hb *autopin__get(void)
{
    struct autopin_hb *hb = __atomic_load_n(&autopin__hb, __ATOMIC_ACQUIRE);
    if (__builtin_expect(hb == NULL, 0))
        hb = autopin__map();
    return hb == AUTOPIN__OFF ? NULL : hb;
}

/* Adds n units of finished work. */
static inline void autopin_heartbeat(uint64_t n)
{
    struct autopin_hb *hb = autopin__get();
    if (hb)
        __atomic_fetch_add(&hb->beats, n, __ATOMIC_RELAXED);
}

/* Names the current phase (NULL or "" clears it). Safe from several threads: writers
 * take turns on the seqlock. */
static inline void autopin_phase(const char *name)
{
    struct autopin_hb *hb = autopin__get();
    if (!hb)
        return;
    uint64_t seq = __atomic_load_n(&hb->phase_seq, __ATOMIC_RELAXED);
    for (;;) {
        if ((seq & 1) == 0 &&
            __atomic_compare_exchange_n(&hb->phase_seq, &seq, seq + 1, 1, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            break;
        seq = __atomic_load_n(&hb->phase_seq, __ATOMIC_RELAXED);
    }
    size_t i = 0;
    if (name)
        for (; i < sizeof hb->phase - 1 && name[i]; i++)
            __atomic_store_n(&hb->phase[i], name[i], __ATOMIC_RELAXED);
    for (; i < sizeof hb->phase; i++)
        __atomic_store_n(&hb->phase[i], '\0', __ATOMIC_RELAXED);
    __atomic_store_n(&hb->phase_seq, seq + 2, __ATOMIC_RELEASE);
}

#ifdef __cplusplus
}
#endif

#endif /* AUTOPIN_H */
