"""Django admin actions: cancel the selected evaluations (queued or running); revoke or replace
runner credentials, showing a new credential once on a page of its own.

Wired into the admin in leaderboard/admin.py.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpResponse
from django.template import engines
from django.urls import reverse
from django.utils import timezone

from leaderboard.dispatch.credentials import issue
from leaderboard.dispatch.enqueue import cancel_evaluation
from leaderboard.models import RunnerCredential


@admin.action(description="Cancel the selected evaluations (queued or running)")
def cancel_selected(modeladmin: Any, request: Any, queryset: Any) -> None:
    cancelled = sum(cancel_evaluation(evaluation, request.user)
                    for evaluation in queryset.select_related("submission", "runner"))
    modeladmin.message_user(request, f"{cancelled} evaluation(s) cancelled; "
                            f"{queryset.count() - cancelled} had already ended.", messages.SUCCESS)


# ---------------------------------------------------------------- runner credentials

#: The page that shows newly issued credentials: once, never stored (not in a message cookie).
ISSUED_PAGE = """{% extends "admin/base_site.html" %}
{% block content %}
<h1>Runner credentials issued</h1>
<p>Each is shown once. Give it to its runner node in a file only the runner's user can read
(<code>chmod 600</code>), then start it with <code>solboard runner --credential-file FILE</code>.</p>
<table>
<tr><th>node</th><th>id</th><th>fingerprint</th><th>credential</th></tr>
{% for row, secret in issued %}
<tr><td>{{ row.node_name }}</td><td>{{ row.public_id }}</td><td>{{ row.key_fingerprint }}</td>
<td><code>{{ secret }}</code></td></tr>
{% endfor %}
</table>
<p><a href="{{ back }}">Back to runner credentials</a></p>
{% endblock %}
"""


def issued_page(modeladmin: Any, request: Any, issued: list[tuple[RunnerCredential, str]]) -> HttpResponse:
    template = engines["django"].from_string(ISSUED_PAGE)
    context = {**modeladmin.admin_site.each_context(request), "issued": issued,
               "back": reverse("admin:leaderboard_runnercredential_changelist")}
    response = HttpResponse(template.render(context, request))
    response["Cache-Control"] = "no-store"
    return response


@admin.action(description="Revoke the selected runner credentials")
def revoke_selected(modeladmin: Any, request: Any, queryset: Any) -> None:
    revoked = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
    modeladmin.message_user(request, f"{revoked} credential(s) revoked; their runners' messages are refused "
                            "from now on.", messages.SUCCESS)


@admin.action(description="Issue a replacement (revokes the selected, shows the new ones once)")
def replace_selected(modeladmin: Any, request: Any, queryset: Any) -> HttpResponse:
    issued = []
    with transaction.atomic():
        for row in queryset:
            new_row, credential = issue(row.node_name, created_by=str(request.user))
            issued.append((new_row, credential.secret_string()))
        queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
    return issued_page(modeladmin, request, issued)
