"""Sums of float32 buffers across the ranks of one host, by each way MPI offers, against the host's memcpy rate.

Run under mpirun (one process per GPU, as glnet_train runs): mpirun -np 2 python3 bench/allreduce_methods.py [MB ...]
Rank 0 prints a Markdown table: per size and method the median of 7 sums (after 2 warm-ups), in ms and in GB/s of the
buffer's bytes. Methods: MPI_Allreduce in place; 4 concurrent MPI_Iallreduce on quarters of the buffer;
MPI_Reduce_scatter_block then MPI_Allgather; a shared-memory window (MPI_Win_allocate_shared) where each rank copies its
buffer in, sums its slice of every rank's copy and copies all slices out, on one thread (NumPy), as glnet's HostSum does
on several. The memcpy row is one thread's np.copyto of the same bytes.
"""
import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
sizes_mb = [float(a) for a in sys.argv[1:]] or [1, 16, 80]


def median_ms(action, repeats=7, warmups=2):
    times = []
    for i in range(warmups + repeats):
        comm.Barrier()
        start = time.perf_counter()
        action()
        comm.Barrier()
        if i >= warmups:
            times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def methods(count):
    data = np.random.default_rng(rank).standard_normal(count).astype(np.float32)
    expected = comm.allreduce(float(data[:16].astype(np.float64).sum()))
    buffer = data.copy()

    def allreduce():
        buffer[:] = data
        comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)

    def split4():
        buffer[:] = data
        quarters = np.array_split(buffer, 4)
        MPI.Request.Waitall([comm.Iallreduce(MPI.IN_PLACE, q, op=MPI.SUM) for q in quarters])

    part = count // size
    padded = np.zeros(part * size + (size if count % size else 0), dtype=np.float32)
    part = padded.size // size
    piece = np.empty(part, dtype=np.float32)

    def reduce_scatter_allgather():
        padded[:count] = data
        comm.Reduce_scatter_block(padded, piece, op=MPI.SUM)
        comm.Allgather(piece, padded)
        buffer[:] = padded[:count]

    window = MPI.Win.Allocate_shared(count * 4, 4, comm=comm)
    segments = []
    for r in range(size):
        memory, _ = window.Shared_query(r)
        segments.append(np.frombuffer(memory, dtype=np.float32, count=count))
    bounds = [count * r // size for r in range(size + 1)]

    def shared_window():
        np.copyto(segments[rank], data)
        comm.Barrier()
        mine = slice(bounds[rank], bounds[rank + 1])
        for r in range(size):
            if r != rank:
                np.add(segments[rank][mine], segments[r][mine], out=segments[rank][mine])
        comm.Barrier()
        for r in range(size):
            part = slice(bounds[r], bounds[r + 1])
            np.copyto(buffer[part], segments[r][part])
        comm.Barrier()

    target = np.empty_like(data)
    results = {}
    for name, action in [("MPI_Allreduce", allreduce), ("4 x MPI_Iallreduce", split4),
                         ("MPI_Reduce_scatter_block + MPI_Allgather", reduce_scatter_allgather),
                         ("shared window, 1 thread", shared_window)]:
        results[name] = median_ms(action)
        got = float(buffer[:16].astype(np.float64).sum())
        assert abs(got - expected) <= 1e-4 * max(1.0, abs(expected)), (name, got, expected)
    results["memcpy, 1 thread (no communication)"] = median_ms(lambda: np.copyto(target, data))
    window.Free()
    return results


rows = []
for mb in sizes_mb:
    count = int(mb * 1e6) // 4
    for name, ms in methods(count).items():
        rows.append((mb, name, ms, count * 4 / ms / 1e6))
if rank == 0:
    print(f"# Sums of float32 buffers over {size} ranks of one host ({MPI.Get_library_version().splitlines()[0]})\n")
    print("| MB | method | ms (median of 7) | GB/s of the buffer |")
    print("|---|---|---|---|")
    for mb, name, ms, rate in rows:
        print(f"| {mb:g} | {name} | {ms:.2f} | {rate:.2f} |")
