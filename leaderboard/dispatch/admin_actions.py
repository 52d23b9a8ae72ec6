"""A Django admin action: cancel the selected evaluations (queued or running).

Wire it into the Evaluation admin with ``actions = [cancel_selected]`` (leaderboard/admin.py).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages

from leaderboard.dispatch.enqueue import cancel_evaluation


@admin.action(description="Cancel the selected evaluations (queued or running)")
def cancel_selected(modeladmin: Any, request: Any, queryset: Any) -> None:
    cancelled = sum(cancel_evaluation(evaluation, request.user)
                    for evaluation in queryset.select_related("submission", "runner"))
    modeladmin.message_user(request, f"{cancelled} evaluation(s) cancelled; "
                            f"{queryset.count() - cancelled} had already ended.", messages.SUCCESS)
