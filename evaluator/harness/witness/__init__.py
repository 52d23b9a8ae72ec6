"""Witnesses: a kernel's time measured where the submission cannot rewrite it (docs/security.md).

``witnesses`` holds the rules (the judge's clock on the CPU, Nsight Compute's on a GPU) and the ncu
session; ``session`` is the judge's side of a witness run, ``profiled_child`` the untrusted process
ncu profiles, ``profile`` reads ncu's raw page into the report's kernel profiles.
"""
