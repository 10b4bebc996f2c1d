/* Two threads hand a token back and forth through one shared flag, ITERS times.
 * On two different CPUs each hand-off is a cache-line transfer (sub-microsecond); on one
 * CPU every hand-off needs the other thread to be scheduled, so the run is many times
 * slower. The waiting side spins a little, then yields, so the one-CPU case still makes
 * progress at context-switch speed instead of a time slice per hand-off.
 * Build: gcc -O2 -pthread compare_pingpong.c -o pingpong; run: ./pingpong [ITERS]
 * Prints "handoffs/s = <rate>" for `autopin compare --metric`. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Atomic long turn; /* even: ping's turn, odd: pong's turn */
static long iters = 200000;

static void wait_for(long parity_value, long *next) {
    int spins = 0;
    while (atomic_load_explicit(&turn, memory_order_acquire) != *next) {
        if (++spins > 2000) {
            sched_yield();
            spins = 0;
        }
    }
    (void)parity_value;
}

static void *pong(void *arg) {
    (void)arg;
    for (long i = 0; i < iters; i++) {
        long want = 2 * i + 1;
        wait_for(1, &want);
        atomic_store_explicit(&turn, want + 1, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) iters = atol(argv[1]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t t;
    if (pthread_create(&t, NULL, pong, NULL) != 0) return 1;
    for (long i = 0; i < iters; i++) {
        long want = 2 * i;
        wait_for(0, &want);
        atomic_store_explicit(&turn, want + 1, memory_order_release);
    }
    pthread_join(t, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("handoffs/s = %.1f\n", 2.0 * iters / s);
    return 0;
}
