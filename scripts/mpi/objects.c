/* Open MPI's side of scripts/mpi-objects.sh: MPI_Barrier latency and
 * MPI_Ibcast throughput with 64-byte messages, measured as
 * gossamer/examples/objects_bench.rs measures Gossamer's Barrier and ring.
 *
 *   mpirun -np P objects [ROUNDS] [MESSAGES] [REPS]
 *
 * barrier: ROUNDS barriers per repetition, timed on rank 0, median of REPS
 * repetitions (after one warm-up), printed as microseconds per barrier.
 * broadcast: rank 0 broadcasts MESSAGES messages of 64 bytes with
 * MPI_Ibcast, keeping up to WINDOW of them in flight (like the ring's
 * capacity); a repetition ends with a barrier once every rank has them all;
 * median messages per second over REPS repetitions (after one warm-up). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE 64
#define WINDOW 64

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return v[n / 2];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long rounds = argc > 1 ? atol(argv[1]) : 2000;
    long messages = argc > 2 ? atol(argv[2]) : 20000;
    int reps = argc > 3 ? atoi(argv[3]) : 7;
    double *samples = calloc(reps, sizeof *samples);

    for (long i = 0; i < rounds; i++) MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < reps; r++) {
        double t0 = MPI_Wtime();
        for (long i = 0; i < rounds; i++) MPI_Barrier(MPI_COMM_WORLD);
        samples[r] = (MPI_Wtime() - t0) * 1e6 / rounds;
    }
    if (rank == 0) {
        printf("processes %d\n", size);
        printf("barrier_us_median %.3f\n", median(samples, reps));
    }

    char (*buf)[SIZE] = calloc(WINDOW, SIZE);
    MPI_Request req[WINDOW];
    for (int r = 0; r <= reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        long done = 0;
        while (done < messages) {
            int k = messages - done < WINDOW ? (int)(messages - done) : WINDOW;
            for (int j = 0; j < k; j++) {
                if (rank == 0) memset(buf[j], (int)(done + j), SIZE);
                MPI_Ibcast(buf[j], SIZE, MPI_BYTE, 0, MPI_COMM_WORLD, &req[j]);
            }
            MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
            if (rank != 0 && buf[k - 1][0] != (char)(done + k - 1)) {
                fprintf(stderr, "rank %d: wrong message %ld\n", rank, done + k - 1);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            done += k;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (r > 0) samples[r - 1] = messages / (MPI_Wtime() - t0);
    }
    if (rank == 0) printf("bcast_msgs_per_s_median %.0f\n", median(samples, reps));
    free(buf);
    free(samples);
    MPI_Finalize();
    return 0;
}
