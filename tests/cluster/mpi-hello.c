/* mpi-hello.c: the smallest proof that an MPI launch works under the test
 * cluster: every rank prints its rank, the size of the world, and the sum of
 * all ranks from one MPI_Allreduce (so the ranks did talk to each other). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, sum;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d, sum %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
