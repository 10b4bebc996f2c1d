/* cluster_barrier ITERATIONS [WORK]: a bulk-synchronous MPI + OpenMP program. Every
 * iteration each rank does WORK units of arithmetic in an OpenMP parallel loop, then all ranks
 * meet in MPI_Barrier, so the job runs at the pace of its slowest rank. Rank 0 prints the
 * wall time of the loop in seconds. Used by bench/cluster.sh. */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long iters = argc > 1 ? atol(argv[1]) : 2000;
    long work = argc > 2 ? atol(argv[2]) : 200000;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    volatile double sink = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long it = 0; it < iters; it++) {
        double acc = 0;
#pragma omp parallel for reduction(+ : acc)
        for (long i = 0; i < work; i++)
            acc += (double)(i ^ it) * 1e-9;
        sink += acc;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    double t = MPI_Wtime() - t0;
    if (rank == 0)
        printf("%.3f\n", t);
    MPI_Finalize();
    return sink < 0;
}
