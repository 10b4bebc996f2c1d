/*
 * syncbench — a demo workload whose best pinning is known.
 *
 * Phase "barrier": every thread does a little work and then waits at an OpenMP barrier,
 * thousands of times. With OMP_WAIT_POLICY=active (spinning waits), two threads sharing
 * one CPU make every barrier wait for a time slice, so this phase becomes orders of
 * magnitude slower; one thread per CPU is the right pinning.
 * Phase "triad": the STREAM triad a = b + s*c over arrays larger than the caches; it is
 * bound by memory bandwidth, so spreading threads over memory controllers helps and SMT
 * siblings do not.
 *
 * It reports progress to autopin through include/autopin.h (one heartbeat per barrier
 * round and per triad sweep) and prints its own timings and a checksum on stdout. The
 * checksum depends only on the arguments, never on the pinning or the thread count.
 *
 * usage: syncbench [-b BARRIERS] [-s SWEEPS] [-n ELEMENTS] [-r ROUNDS] [-t THREADS] [-p]
 *   -p  print which CPU each OpenMP thread ran on (placement: tid:cpu ...)
 */
#define _GNU_SOURCE
#include "autopin.h"
#include <omp.h>
#include <sched.h>
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

static long arg_long(const char *opt, const char *v, long min)
{
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || x < min) {
        fprintf(stderr, "syncbench: %s needs an integer >= %ld\n", opt, min);
        exit(2);
    }
    return x;
}

int main(int argc, char **argv)
{
    long barriers = 20000, sweeps = 20, n = 4 << 20, rounds = 1, threads = 0;
    int show = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-b")) barriers = arg_long(a, v, 0), i++;
        else if (!strcmp(a, "-s")) sweeps = arg_long(a, v, 0), i++;
        else if (!strcmp(a, "-n")) n = arg_long(a, v, 1), i++;
        else if (!strcmp(a, "-r")) rounds = arg_long(a, v, 1), i++;
        else if (!strcmp(a, "-t")) threads = arg_long(a, v, 1), i++;
        else if (!strcmp(a, "-p")) show = 1;
        else {
            fprintf(stderr, "usage: syncbench [-b BARRIERS] [-s SWEEPS] [-n ELEMENTS] [-r ROUNDS] [-t THREADS] [-p]\n");
            return 2;
        }
    }
    if (threads)
        omp_set_num_threads((int)threads);
    double *a = malloc(sizeof(double) * (size_t)n);
    double *b = malloc(sizeof(double) * (size_t)n);
    double *c = malloc(sizeof(double) * (size_t)n);
    if (!a || !b || !c) {
        fprintf(stderr, "syncbench: cannot allocate 3 x %ld doubles\n", n);
        return 1;
    }
    int nthreads = 1;
    int cpu_of[1024];
    /* First touch in parallel, so pages land near the threads that use them. */
#pragma omp parallel
    {
#pragma omp single
        nthreads = omp_get_num_threads();
        int me = omp_get_thread_num();
        if (me < 1024)
            cpu_of[me] = sched_getcpu();
#pragma omp for schedule(static)
        for (long i = 0; i < n; i++) {
            a[i] = 0.0;
            b[i] = (double)(i % 7);
            c[i] = (double)(i % 5);
        }
    }
    if (show) {
        printf("placement:");
        for (int t = 0; t < nthreads && t < 1024; t++)
            printf(" %d:%d", t, cpu_of[t]);
        printf("\n");
    }
    double t_barrier = 0, t_triad = 0;
    unsigned long long work = 0;
    for (long r = 0; r < rounds; r++) {
        autopin_phase("barrier");
        double t0 = now();
#pragma omp parallel reduction(+ : work)
        {
            unsigned long long x = (unsigned long long)omp_get_thread_num() + 1;
            for (long i = 0; i < barriers; i++) {
                /* A few hundred cycles of work between barriers. */
                for (int k = 0; k < 64; k++)
                    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
#pragma omp barrier
#pragma omp master
                autopin_heartbeat(1);
            }
            work += x & 1; /* keep the loop alive; result is pinning-independent */
        }
        t_barrier += now() - t0;

        autopin_phase("triad");
        t0 = now();
        for (long s = 0; s < sweeps; s++) {
            const double scalar = 3.0;
#pragma omp parallel for schedule(static)
            for (long i = 0; i < n; i++)
                a[i] = b[i] + scalar * c[i];
            autopin_heartbeat(1);
        }
        t_triad += now() - t0;
    }
    autopin_phase("done");
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += a[i];
    (void)work; /* depends on the thread count, so it stays out of the checksum */
    double bytes = 3.0 * 8.0 * (double)n * (double)sweeps * (double)rounds;
    printf("syncbench: threads=%d barrier_s=%.4f us_per_barrier=%.3f triad_s=%.4f triad_GBps=%.2f checksum=%.1f\n",
           nthreads, t_barrier, barriers ? 1e6 * t_barrier / (double)(barriers * rounds) : 0.0, t_triad,
           t_triad > 0 ? bytes / t_triad / 1e9 : 0.0, sum);
    free(a);
    free(b);
    free(c);
    return 0;
}
