/*
 * spin — a busy neighbour: THREADS threads spin for SECONDS, then print how many loop
 * iterations they managed (a crude measure of the CPU time they got). Start it under
 * `autopin pin -c 0 -- spin` to occupy CPU 0 while another program runs.
 *
 * usage: spin [SECONDS (default 10, 0 = forever)] [THREADS (default 1)]
 */
#define _GNU_SOURCE
#include "autopin.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds = 10;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *spin(void *out)
{
    double end = now() + seconds;
    unsigned long long loops = 0;
    while (seconds == 0 || now() < end) {
        for (volatile int k = 0; k < 10000; k++)
            ;
        loops++;
        autopin_heartbeat(1);
    }
    *(unsigned long long *)out = loops;
    return NULL;
}

int main(int argc, char **argv)
{
    char *end;
    if (argc > 1) {
        seconds = strtod(argv[1], &end);
        if (*end || seconds < 0) {
            fprintf(stderr, "spin: SECONDS must be a number >= 0, got %s\n", argv[1]);
            return 2;
        }
    }
    long threads = 1;
    if (argc > 2) {
        threads = strtol(argv[2], &end, 10);
        if (*end || threads < 1 || threads > 4096) {
            fprintf(stderr, "spin: THREADS must be 1..4096, got %s\n", argv[2]);
            return 2;
        }
    }
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    unsigned long long *loops = calloc((size_t)threads, sizeof *loops);
    if (!t || !loops)
        return 1;
    autopin_phase("spin");
    for (long i = 1; i < threads; i++)
        if (pthread_create(&t[i], NULL, spin, &loops[i]) != 0) {
            fprintf(stderr, "spin: cannot create thread %ld\n", i);
            return 1;
        }
    spin(&loops[0]);
    for (long i = 1; i < threads; i++)
        pthread_join(t[i], NULL);
    for (long i = 0; i < threads; i++)
        printf("spin: thread %ld loops=%llu\n", i, loops[i]);
    return 0;
}
