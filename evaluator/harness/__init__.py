"""The evaluation harness: a trusted judge, untrusted children, a timing witness.

- ``stages``: the stage script every judge follows (start-up, baseline, compile, test, ranked).
- ``single``: the judge of a one-device job, its child, the judge's timing service, the warm spare.
- ``multi``: the judge of a multi-GPU job, its ranks, the ``ctx`` a kernel gets, the link ceiling.
- ``timing``: the cold-L2 timing loops, their statistics, the L2 flush, CUPTI spans, NVML telemetry.
- ``witness``: the Nsight Compute witness of every ranked median (and the judge's clock on the CPU).
- ``parent`` / ``child_side``: a child as the judge sees it (process, channel, log, watchdog) and as
  it sees itself (the conversation both kinds of child share).
- ``channel``: length-prefixed JSON messages over pipes (nothing on them is trusted).
- ``shared``: buffers the judge owns and lends (CUDA IPC, shared files).
- ``submission``: loads a Python file (or a PTX/CUDA source through ``evaluator.ptx``).
- ``correctness`` / ``work``: poison, output identity, tolerance comparison, shape context, input sets.
- ``anticheat``: the child's framing checks (integrity snapshots, threads, processes).
- ``outcome`` / ``assemble``: what the judge established, and the ``EvaluationReport`` built from it.
- ``device``: device facts. ``evidence``: static PTX/CUDA feature evidence, built by the judge.

docs/harness.md explains the method and the layout, docs/security.md the trust design.
"""
