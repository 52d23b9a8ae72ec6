"""allgather_gemm with the all-gather overlapped with the GEMM (chunked, plain torch + NCCL).

kernel(ctx, A, B, C): A (M/W, K) bf16 is this rank's rows of the activations, B (N/W, K) bf16 its
rows of the weight, C (M, N/W) bf16 receives all of A times B^T (see the problem's description).

How it overlaps: the rank's own rows of A need no communication, so their GEMM runs first while
the all-gather of the other ranks' rows is in flight. The gather is cut into PIECES chunks of rows,
each its own asynchronous collective (NCCL runs them in order on its own stream); the GEMM of
chunk c waits for chunk c only, so it runs while chunk c + 1 is still on the links. Nothing is
fused: the speed-up over the baseline is bounded by the communication it hides.
"""

import torch
import torch.distributed as dist

#: Row chunks of the gather; fewer when the shard has too few rows for chunks worth a GEMM.
PIECES = 4
MIN_ROWS_PER_PIECE = 256


def kernel(ctx, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    world, rank = ctx.world_size, ctx.rank
    rows, depth = A.shape
    pieces = PIECES if rows % PIECES == 0 and rows // PIECES >= MIN_ROWS_PER_PIECE else 1
    piece = rows // pieces
    chunks = [A[index * piece:(index + 1) * piece] for index in range(pieces)]
    gathered = [torch.empty(world * piece * depth, dtype=A.dtype, device=A.device) for _ in range(pieces)]
    works = [dist.all_gather_into_tensor(buffer, chunk.reshape(-1), group=ctx.group, async_op=True)
             for buffer, chunk in zip(gathered, chunks, strict=True)]
    torch.matmul(A, B.t(), out=C[rank * rows:(rank + 1) * rows])  # no communication needed
    for index, (work, buffer) in enumerate(zip(works, gathered, strict=True)):
        work.wait()  # on NCCL: the compute stream waits for this chunk, the host does not
        by_rank = buffer.view(world, piece, depth)
        for source in range(world):
            if source != rank:
                first = source * rows + index * piece
                torch.matmul(by_rank[source], B.t(), out=C[first:first + piece])
