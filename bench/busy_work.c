/* A fixed amount of single-threaded CPU work (argv[1] million loop steps), for timing a
 * program beside a busy neighbour: its runtime is how much CPU it got. */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    long n = (argc > 1 ? atol(argv[1]) : 2000) * 1000000L;
    volatile unsigned long x = 1;
    for (long i = 0; i < n; i++)
        x = x * 2862933555777941757UL + 3037000493UL;
    return (int)(x & 1) * 0;
}
