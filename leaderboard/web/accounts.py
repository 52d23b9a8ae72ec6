"""Sign up, log in, log out (Django auth).

After logging in (or signing up), ``next`` is followed only when it points to this site: Django's
LoginView checks it with ``url_has_allowed_host_and_scheme`` and we do the same on sign-up, so a
link like ``/accounts/login/?next=https://evil.example`` lands on the home page. Log out is a POST
(a link or an image elsewhere cannot log anyone out).
"""

from __future__ import annotations

from typing import ClassVar

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.views import LoginView, LogoutView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods


class SignUpForm(UserCreationForm):  # type: ignore[type-arg]
    email = forms.EmailField(required=False, help_text="Optional; only operators see it.")

    class Meta(UserCreationForm.Meta):  # type: ignore[name-defined,misc]
        model = get_user_model()
        fields = ("username", "email")


def safe_next(request: HttpRequest) -> str:
    """The ``next`` URL if it stays on this site, else the default landing page."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return str(settings.LOGIN_REDIRECT_URL)


@require_http_methods(["GET", "POST"])
def sign_up(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect(safe_next(request))
    form = SignUpForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(safe_next(request))
    return render(request, "web/sign_up.html", {"form": form, "next": request.GET.get("next", "")})


class SignInView(LoginView):
    template_name = "web/log_in.html"
    redirect_authenticated_user = True


class SignOutView(LogoutView):
    http_method_names: ClassVar[list[str]] = ["post", "options"]
