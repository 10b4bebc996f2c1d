/*
 * ompwork — small OpenMP kernels whose best pinning is known, with no heartbeat: autopin
 * sees their progress only through the OpenMP runtime (the preload library's counting).
 *
 *   -m imbalance  each round the master thread computes alone while the others wait at a
 *                 barrier (spinning with OMP_WAIT_POLICY=active), then all pass it. CPU time
 *                 per thread looks the same wherever the master runs; the runtime depends on
 *                 whether the master shares its CPU with a busy neighbour.
 *   -m shared     a dynamic loop whose iterations all add to one shared cache line (atomic):
 *                 threads on different CPUs fight over the line; on one CPU they do not.
 *   -m private    the same loop, each thread adding to its own cache line.
 *   -m loops      ROUNDS short parallel loops (static schedule) of WORK/100 iterations,
 *                 one region each: the barrier at each loop's end bounds the time, and a
 *                 program of many regions that never keeps its count may get fewer
 *                 threads mid-run.
 *
 * usage: ompwork [-m MODE] [-r ROUNDS] [-w WORK] [-t SECONDS] [-s SECONDS]   prints seconds
 * and a checksum on stdout (the checksum depends only on the arguments). -t stops after that
 * many seconds instead of after ROUNDS rounds (the same run time however loaded the machine
 * is). -s first computes alone for that many seconds, before any OpenMP construct (a serial
 * start-up, as a program reading its input has): the OpenMP threads are created after it.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct line {
    volatile unsigned long v;
    char pad[64 - sizeof(unsigned long)];
} __attribute__((aligned(64)));

static unsigned long spin_work(long n, unsigned long x)
{
    for (long i = 0; i < n; i++)
    {
        /* xorshift: no closed form a compiler could substitute for the loop */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

int main(int argc, char **argv)
{
    const char *mode = "imbalance";
    long rounds = 2000, work = 20000;
    double limit = 0, serial = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m"))
            mode = argv[i + 1];
        else if (!strcmp(argv[i], "-r"))
            rounds = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-w"))
            work = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-t"))
            limit = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "-s"))
            serial = atof(argv[i + 1]);
        else {
            fprintf(stderr, "ompwork: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (rounds < 1 || work < 1) {
        fprintf(stderr, "ompwork: -r and -w need integers >= 1\n");
        return 2;
    }
    double t0 = now();
    if (serial > 0) {
        /* The serial start-up's result does not enter the checksum: its length is in
         * seconds, not work. Kept in a volatile so that the work is done. */
        volatile unsigned long scratch = 1;
        while (now() - t0 < serial)
            scratch = spin_work(work, scratch);
    }
    if (limit > 0)
        rounds = 1L << 60;
    unsigned long sum = 0;
    if (!strcmp(mode, "imbalance")) {
        unsigned long acc = 1;
        int stop = 0;
#pragma omp parallel
        for (long r = 0; r < rounds; r++) {
#pragma omp master
            {
                acc = spin_work(work, acc);
                stop = limit > 0 && now() - t0 > limit;
            }
#pragma omp barrier
            if (stop)
                break;
#pragma omp barrier
        }
        sum = acc;
    } else if (!strcmp(mode, "shared") || !strcmp(mode, "private")) {
        static struct line lines[65];
        int shared = !strcmp(mode, "shared");
        for (long r = 0; r < rounds && !(limit > 0 && now() - t0 > limit); r++) {
#pragma omp parallel for schedule(dynamic, 256)
            for (long i = 0; i < work; i++) {
                int t = shared ? 0 : 1 + (omp_get_thread_num() % 64);
                __atomic_fetch_add(&lines[t].v, 1, __ATOMIC_RELAXED);
            }
        }
        for (int i = 0; i < 65; i++)
            sum += lines[i].v;
    } else if (!strcmp(mode, "loops")) {
        static unsigned long v[4096];
        long n = work / 100 < 1 ? 1 : work / 100 > 4096 ? 4096 : work / 100;
        for (long r = 0; r < rounds && !(limit > 0 && now() - t0 > limit); r++) {
#pragma omp parallel for schedule(static)
            for (long i = 0; i < n; i++)
                v[i] = spin_work(20, (unsigned long)(i + r + 1));
            sum += v[n - 1];
        }
    } else {
        fprintf(stderr, "ompwork: -m must be imbalance, shared, private or loops, not %s\n", mode);
        return 2;
    }
    printf("ompwork %s: %.3f s, checksum %lu\n", mode, now() - t0, sum);
    return 0;
}
