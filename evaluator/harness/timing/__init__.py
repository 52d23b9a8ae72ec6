"""Measuring a call: the cold-cache loops (``loop`` on the CPU, ``gpu_loop`` on a GPU), their
statistics (``stats``), the L2 flush (``l2``), CUPTI device spans (``trace``) and NVML telemetry
(``telemetry``). Both judges use them; none of them decides a verdict.
"""
