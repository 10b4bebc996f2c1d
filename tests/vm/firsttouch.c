/* First-touch workload for the NUMA tests: T threads each write their share of MiB of
 * anonymous memory (so it lands on the nodes they run on), say so in /tmp/ready, wait for
 * /tmp/go, then read everything back and print a checksum (the same whatever node the pages
 * ended on). With "maps" as third argument it prints, instead of waiting, how many of its
 * anonymous pages each node holds (from /proc/self/numa_maps). With FT_TOUCH_CPUS=N in the
 * environment, thread t touches its share on CPU t % N and then takes the process's whole
 * mask back, so the pages sit on the first N CPUs' node while the threads may run anywhere
 * (an attached process whose mask autopin may use). With FT_READ_SECONDS=S it does not wait
 * for /tmp/go: each thread reads its share over and over for S seconds, on CPU
 * FT_RUN_FROM + t when that is set (threads far from their pages, for `autopin stat`).
 * usage: firsttouch MIB THREADS [maps] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static unsigned char *mem;
static size_t share;
static int wait_go = 1;
static unsigned long long sums[64];

static cpu_set_t whole;
static int touch_cpus;
static double read_seconds;
static int run_from = -1;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Reads a share again and again for read_seconds, on CPU run_from + t when set. */
static void keep_reading(long t, const unsigned char *p) {
    if (run_from >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(run_from + t, &one);
        sched_setaffinity(0, sizeof one, &one);
    }
    volatile unsigned long long sink = 0;
    double end = now() + read_seconds;
    while (now() < end)
        for (size_t i = 0; i < share; i += 64) sink += p[i];
}

static void *work(void *arg) {
    long t = (long)arg;
    unsigned char *p = mem + t * share;
    if (touch_cpus > 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(t % touch_cpus, &one);
        sched_setaffinity(0, sizeof one, &one);
    }
    for (size_t i = 0; i < share; i++) p[i] = (unsigned char)(i * 7 + t);
    if (touch_cpus > 0) sched_setaffinity(0, sizeof whole, &whole);
    __atomic_add_fetch(&sums[63], 1, __ATOMIC_SEQ_CST);
    if (read_seconds > 0) keep_reading(t, p);
    while (wait_go && access("/tmp/go", F_OK) != 0) usleep(20000);
    unsigned long long s = 0;
    for (size_t i = 0; i < share; i++) s += p[i] * (i % 13 + 1);
    sums[t] = s;
    return NULL;
}

static void print_maps(void) {
    FILE *f = fopen("/proc/self/numa_maps", "r");
    char line[4096];
    long nodes[16] = {0};
    while (f && fgets(line, sizeof line, f)) {
        if (!strstr(line, "anon=")) continue;
        for (char *p = strstr(line, " N"); p; p = strstr(p + 1, " N")) {
            int n; long c;
            if (sscanf(p, " N%d=%ld", &n, &c) == 2 && n >= 0 && n < 16) nodes[n] += c;
        }
    }
    for (int n = 0; n < 16; n++) if (nodes[n]) printf("node%d=%ld\n", n, nodes[n]);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: firsttouch MIB THREADS [maps]\n"); return 2; }
    size_t bytes = (size_t)atol(argv[1]) << 20;
    long threads = atol(argv[2]);
    int maps = argc > 3 && strcmp(argv[3], "maps") == 0;
    if (threads < 1 || threads > 62) return 2;
    if (maps) wait_go = 0;
    if (getenv("FT_TOUCH_CPUS")) touch_cpus = atoi(getenv("FT_TOUCH_CPUS"));
    if (getenv("FT_READ_SECONDS")) read_seconds = atof(getenv("FT_READ_SECONDS"));
    if (getenv("FT_RUN_FROM")) run_from = atoi(getenv("FT_RUN_FROM"));
    if (read_seconds > 0) wait_go = 0;
    sched_getaffinity(0, sizeof whole, &whole);
    share = bytes / threads;
    mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) { perror("mmap"); return 1; }
    pthread_t th[64];
    for (long t = 0; t < threads; t++) pthread_create(&th[t], NULL, work, (void *)t);
    if (!maps) {
        while (__atomic_load_n(&sums[63], __ATOMIC_SEQ_CST) < (unsigned long long)threads) usleep(10000);
        FILE *r = fopen("/tmp/ready.tmp", "w");
        fprintf(r, "%d\n", getpid());
        fclose(r);
        rename("/tmp/ready.tmp", "/tmp/ready");
    }
    for (long t = 0; t < threads; t++) pthread_join(th[t], NULL);
    if (maps) { print_maps(); return 0; }
    unsigned long long s = 0;
    for (long t = 0; t < threads; t++) s += sums[t];
    printf("checksum %llu\n", s);
    return 0;
}
