"""An operator withdraws a result from the rankings, with a note (the admin's "withdraw from
rankings" action; ``manage.py`` users call ``withdraw`` directly).

Withdrawing never deletes or edits what the run measured: it records a ``Withdrawal`` (who, when,
why), clears the evaluation's ``rank_eligible`` (so nothing ranks it again) and rebuilds the
owner's ranking rows that pointed at it from their other eligible results. The integrity log and
the report show the note. The owner's appeal is a re-run: a new evaluation with a new secret
seed, judged afresh, which ranks if it passes (an operator may withdraw that one too).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db import transaction
from django.http import HttpResponse
from django.template import engines

from leaderboard.models import Evaluation, EvaluationStatus, Mode, RankingEntry, Withdrawal
from leaderboard.ranking_maintenance import refresh_rankings_for
from leaderboard.signals import rankings_changed

#: The longest note accepted (it is shown in full on the report).
NOTE_MAX_CHARS = 2000


class WithdrawalRefused(ValueError):
    """The evaluation cannot be withdrawn; the message says why, for the operator."""


def withdraw(evaluation_id: int, operator: Any, note: str) -> Withdrawal:
    """Take one passed ranked result out of the rankings, recording who, when and why."""
    note = note.strip()
    if not note:
        raise WithdrawalRefused("a note is required: it tells the owner and every visitor why")
    if len(note) > NOTE_MAX_CHARS:
        raise WithdrawalRefused(f"the note is {len(note)} characters; at most {NOTE_MAX_CHARS}")
    with transaction.atomic():
        evaluation = (Evaluation.objects.select_for_update().select_related("submission")
                      .filter(pk=evaluation_id).first())
        if evaluation is None:
            raise WithdrawalRefused(f"no evaluation {evaluation_id}")
        _check_withdrawable(evaluation)
        withdrawal = Withdrawal.objects.create(evaluation=evaluation, withdrawn_by=operator,
                                               operator_name=operator.get_username(), note=note)
        Evaluation.objects.filter(pk=evaluation.pk).update(rank_eligible=False)
        _rebuild_rows_of(evaluation)
        problem_id, gpu_type_id = evaluation.submission.problem_id, evaluation.gpu_type_id
        transaction.on_commit(lambda: rankings_changed.send(
            sender=Withdrawal, problem_id=problem_id, gpu_type_id=gpu_type_id))
    return withdrawal


def _check_withdrawable(evaluation: Evaluation) -> None:
    if evaluation.mode != Mode.RANKED or evaluation.status != EvaluationStatus.PASSED:
        raise WithdrawalRefused(f"evaluation {evaluation.pk} is a {evaluation.mode} run that ended "
                                f"{evaluation.status}: only a passed ranked result can be withdrawn")
    if Withdrawal.objects.filter(evaluation=evaluation).exists():
        raise WithdrawalRefused(f"evaluation {evaluation.pk} is already withdrawn")


def _rebuild_rows_of(evaluation: Evaluation) -> None:
    """Drop the ranking rows that held this result; the owner's other eligible results of the same
    problem and GPU type fill them again (each row keeps the best of what remains)."""
    deleted, _ = RankingEntry.objects.filter(evaluation=evaluation).delete()
    if not deleted:
        return
    others = (Evaluation.objects.filter(submission__user_id=evaluation.submission.user_id,
                                        submission__problem_id=evaluation.submission.problem_id,
                                        gpu_type_id=evaluation.gpu_type_id, mode=Mode.RANKED,
                                        status=EvaluationStatus.PASSED, rank_eligible=True)
              .exclude(pk=evaluation.pk).order_by("submission__created_at", "pk"))
    for other in others:
        refresh_rankings_for(other)


# ---------------------------------------------------------------- the admin action

WITHDRAW_PAGE = """{% extends "admin/base_site.html" %}
{% block content %}
<h1>Withdraw from the rankings</h1>
<p>Each result below leaves every ranking it is on. The note is shown publicly on the integrity log
and on the report; the owner may appeal with a re-run (a new evaluation, judged afresh).</p>
<ul>{% for evaluation in evaluations %}<li>evaluation {{ evaluation.pk }}: submission
#{{ evaluation.submission_id }} by {{ evaluation.submission.user }} on {{ evaluation.gpu_type }}
({{ evaluation.status }}, score {{ evaluation.score|default:"none" }})</li>{% endfor %}</ul>
<form method="post">{% csrf_token %}
{% for evaluation in evaluations %}<input type="hidden" name="_selected_action"
value="{{ evaluation.pk }}">{% endfor %}
<input type="hidden" name="action" value="withdraw_from_rankings">
{% if error %}<p class="errornote">{{ error }}</p>{% endif %}
<p><label for="note">Why (public, required, at most {{ limit }} characters):</label><br>
<textarea id="note" name="note" rows="4" cols="80" maxlength="{{ limit }}" required>{{ note }}</textarea></p>
<input type="submit" name="apply" value="Withdraw">
</form>
{% endblock %}
"""


def withdraw_action(modeladmin: Any, request: Any, queryset: Any) -> HttpResponse | None:
    """First the page asking for the note; then, with ``apply``, each selected result withdrawn."""
    evaluations = list(queryset.select_related("submission__user", "gpu_type"))
    note = request.POST.get("note", "")
    if "apply" in request.POST and note.strip():
        _withdraw_each(modeladmin, request, evaluations, note)
        return None
    error = "A note is required." if "apply" in request.POST else ""
    context = {**modeladmin.admin_site.each_context(request), "evaluations": evaluations, "note": note,
               "error": error, "limit": NOTE_MAX_CHARS}
    return HttpResponse(engines["django"].from_string(WITHDRAW_PAGE).render(context, request))


def _withdraw_each(modeladmin: Any, request: Any, evaluations: list[Evaluation], note: str) -> None:
    done = 0
    for evaluation in evaluations:
        try:
            withdraw(evaluation.pk, request.user, note)
            done += 1
        except WithdrawalRefused as refused:
            modeladmin.message_user(request, str(refused), messages.WARNING)
    if done:
        modeladmin.message_user(request, f"{done} result(s) withdrawn from the rankings.", messages.SUCCESS)
