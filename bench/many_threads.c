/*
 * many_threads — a program of many mostly sleeping threads (a server, a task pool): each
 * thread computes a little, sleeps 10 ms, and again, for SECONDS. For autopin's own cost
 * on programs with thousands of threads (bench/threads.sh).
 *
 * With NAP_MS 0 the threads only sleep (a pool waiting for work), for SECONDS.
 *
 * usage: many_threads [THREADS (default 2000)] [SECONDS (default 10)] [NAP_MS (default 10)]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds;
static long nap_ms = 10;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *work(void *arg)
{
    (void)arg;
    double end = now() + seconds;
    volatile unsigned long x = 0;
    struct timespec nap = {nap_ms / 1000, (nap_ms % 1000) * 1000000};
    if (nap_ms == 0) {
        /* Asleep for the whole time: nothing of the thread changes. */
        struct timespec all = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
        nanosleep(&all, NULL);
        return NULL;
    }
    while (now() < end) {
        for (int i = 0; i < 1000; i++)
            x += (unsigned long)i;
        nanosleep(&nap, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    seconds = argc > 2 ? atof(argv[2]) : 10;
    if (argc > 3)
        nap_ms = atol(argv[3]);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 65536);
    pthread_t *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return 1;
    for (int i = 0; i < n; i++) {
        if (pthread_create(&t[i], &attr, work, NULL)) {
            perror("pthread_create");
            n = i;
            break;
        }
    }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("%d threads done\n", n);
    free(t);
    return 0;
}
