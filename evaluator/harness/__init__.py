"""The evaluation harness: a trusted judge, one untrusted child per job, a timing witness.

Modules, one concern each:

- ``judge`` / ``judge_timing``: the trusted side: owns the buffers, checks every call, times the
  baseline, serves the child's timing loop. ``outcome``: what it established.
- ``parent``: the child as the judge sees it: process, channel, log, watchdog.
- ``child``: the child's entry point; the submission runs there, untrusted from its first import.
- ``shared``: buffers the judge owns and lends (CUDA IPC, shared files).
- ``witness`` / ``witness_run`` / ``witness_child``: the Nsight Compute witness of every ranked median.
- ``channel``: length-prefixed JSON messages over pipes (nothing on them is trusted).
- ``submission``: loads a Python file (or a PTX/CUDA source through ``evaluator.ptx``).
- ``correctness`` / ``work``: poison, output identity, tolerance comparison, shape context, input sets.
- ``timing`` / ``gpu_timing`` / ``trace``: the cold-L2 timing loop; device spans from CUPTI.
- ``l2``: L2 flush and persisting-L2 reset. ``telemetry``: NVML. ``profile``: ncu's raw page.
- ``anticheat``: the child's framing checks (integrity snapshots, threads, processes).
- ``assemble``: the ``EvaluationReport`` from the judge's outcome. ``device``: device facts.
  ``evidence``: static PTX/CUDA feature evidence, built by the judge.

docs/harness.md explains the method, docs/security.md the trust design.
"""
