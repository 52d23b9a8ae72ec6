"""Signals of the site's own events (Django's post_save misses conditional UPDATEs).

``evaluation_finished(sender=Evaluation, evaluation=...)``: sent inside the transaction that moved
an evaluation to a terminal status, once per evaluation (a terminal status never changes).
Receivers that talk to the outside world must defer that work with ``transaction.on_commit``.

``rankings_changed(sender=..., problem_id=..., gpu_type_id=...)``: ranking rows of that problem and
GPU type were written (a better result, an operator's withdrawal); the website's caches listen.
"""

from __future__ import annotations

from django.dispatch import Signal

evaluation_finished = Signal()
rankings_changed = Signal()
