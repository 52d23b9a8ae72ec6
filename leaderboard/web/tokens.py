"""The API tokens page: create (the plain token is shown once, on the response to the POST, and
never again), list, revoke. The token functions are the model's (``ApiToken.issue``/``revoke``)."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from leaderboard.models import ApiToken


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        required=False,
        label="Name",
        help_text="What uses it, e.g. 'laptop' or 'my-agent' (shown beside its submissions).",
    )


def _page(request: HttpRequest, form: TokenForm, plain: str | None = None, status: int = 200) -> HttpResponse:
    tokens = ApiToken.objects.filter(user=request.user).order_by("revoked_at", "-created_at")
    server = request.build_absolute_uri("/").rstrip("/")  # the address this visitor reached the site at
    return render(
        request,
        "web/tokens.html",
        {
            "form": form,
            "tokens": tokens,
            "plain": plain,
            "server": server,
            "dev_gpu": settings.SOLBOARD_DEV_GPU_TYPE,
        },
        status=status,
    )


@never_cache  # the one response that carries a new token must not be kept by any cache
@login_required
@require_http_methods(["GET", "POST"])
def tokens_page(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _page(request, TokenForm())
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    _, plain = ApiToken.issue(request.user, name=form.cleaned_data["name"])
    return _page(request, TokenForm(), plain=plain)


@login_required
@require_POST
def revoke_token(request: HttpRequest, pk: int) -> HttpResponse:
    token = ApiToken.objects.filter(pk=pk, user=request.user).first()
    if token is None:  # someone else's token is as absent as a token that never existed
        raise Http404("no such token")
    if token.revoked_at is None:
        token.revoke()
        messages.success(request, f"Token {token.prefix}… revoked: it no longer authenticates.")
    return redirect("api-tokens")
