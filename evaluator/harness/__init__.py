"""The evaluation harness: a trusted parent process, one fresh child per job, sealed reports.

Modules, one concern each:

- ``parent``: spawns the child, drives the stages over pipes, enforces time limits, checks the seal.
- ``child``: the child's entry point; the only place untrusted code runs.
- ``channel``: length-prefixed JSON messages over pipes, HMAC sealing.
- ``submission``: loads a Python file (or a PTX/CUDA source through ``evaluator.ptx``).
- ``correctness``: poison, input digests, output identity checks, tolerance comparison.
- ``timing`` / ``trace``: cold-L2 timing loop; device spans from CUPTI kernel timestamps.
- ``l2``: L2 flush and persisting-L2 reset. ``telemetry``: NVML. ``profile``: Nsight Compute.
- ``anticheat``: integrity snapshots, thread/process checks, quiescence before sealing.
- ``assemble``: builds and re-derives the ``EvaluationReport``. ``device``: device facts.

docs/harness.md explains the trust design and the timing method.
"""
