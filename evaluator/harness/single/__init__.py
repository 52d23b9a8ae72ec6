"""The judge of a one-device job and its untrusted child.

``judge`` runs the stage script (``evaluator/harness/stages.py``) against one child (``child``);
``timing_service`` is the judge's side of the child's timing loop, ``cpu_baseline`` times the CPU
baseline in the child, ``warm`` prepares a judge before its job exists (the warm spare).
"""
