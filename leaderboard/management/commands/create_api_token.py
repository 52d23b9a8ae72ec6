from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaderboard.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print it once (only its hash is stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A label to recognise the token by.")
        parser.add_argument(
            "--create-user", action="store_true", help="Create the user if it does not exist."
        )

    def handle(self, *args: Any, username: str, name: str, create_user: bool, **options: Any) -> None:
        user_model = get_user_model()
        user = user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).first()
        if user is None:
            if not create_user:
                raise CommandError(f"no user {username!r} (pass --create-user to create one)")
            user = user_model.objects.create_user(**{user_model.USERNAME_FIELD: username})
            self.stderr.write(f"created user {username!r} (no password: set one with changepassword)")
        token, plain = ApiToken.issue(user, name=name)
        self.stderr.write(f"token {token.prefix}… for {username!r}; it is shown once, store it now:")
        self.stdout.write(plain)
