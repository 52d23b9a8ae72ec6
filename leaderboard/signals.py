"""Signals of the site's own events (Django's post_save misses conditional UPDATEs).

``evaluation_finished(sender=Evaluation, evaluation=...)``: sent inside the transaction that moved
an evaluation to a terminal status, once per evaluation (a terminal status never changes).
Receivers that talk to the outside world must defer that work with ``transaction.on_commit``.
"""

from __future__ import annotations

from django.dispatch import Signal

evaluation_finished = Signal()
