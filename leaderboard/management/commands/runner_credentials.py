"""``manage.py runner_credentials issue NODE [--output FILE] | list | revoke NODE_OR_ID | dev``

- ``issue``: a new credential for runner node NODE, printed once (or written to a 0600 FILE).
- ``list``: every credential: id, node, fingerprint, state, last use, messages accepted, refusals.
- ``revoke``: one credential (by id) or every active one of a node (by name); its messages are
  refused from then on.
- ``dev``: what ``make run`` calls: the local runner's credential in $SOLBOARD_VAR/runner-credential,
  issued (or reused while still valid) for this host's default node name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Sum

from leaderboard.dispatch.credentials import CredentialRefused, ensure_dev_credential, issue, revoke
from leaderboard.models import RunnerCredential
from solboard_common.config import default_credential_file
from solboard_common.signing import default_name, write_private_file


class Command(BaseCommand):
    help = "Issue, list or revoke the credentials runner nodes sign their messages with."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True)
        issuing = verbs.add_parser("issue", help="Issue a credential for a runner node; shown once.")
        issuing.add_argument("node", help="The runner node's name (solboard runner --name).")
        issuing.add_argument(
            "--output", type=Path, help="Write it to this file (mode 0600) instead of stdout."
        )
        verbs.add_parser("list", help="Every credential, its state and its use.")
        revoking = verbs.add_parser(
            "revoke", help="Revoke a credential (by id) or a node's credentials (by name)."
        )
        revoking.add_argument("node_or_id")
        dev = verbs.add_parser("dev", help="make run: the local runner's credential under $SOLBOARD_VAR.")
        dev.add_argument("--output", type=Path, help="Default: $SOLBOARD_VAR/runner-credential.")
        dev.add_argument("--node", help="Default: this host's default runner node name.")

    def handle(self, *args: Any, verb: str, **options: Any) -> None:
        try:
            getattr(self, f"_{verb}")(**options)
        except CredentialRefused as error:
            raise CommandError(str(error)) from None

    def _issue(self, node: str, output: Path | None, **_: Any) -> None:
        row, credential = issue(node, created_by="manage.py runner_credentials")
        if output is not None:
            write_private_file(output, credential.secret_string())
            self.stderr.write(f"credential {row.public_id} for {node} written to {output} (mode 0600); "
                              f"start the runner with --credential-file {output}")
            return
        self.stderr.write(f"credential {row.public_id} for {node} (fingerprint {row.key_fingerprint}); "
                          "shown once, give it to the runner in a 0600 file or SOLBOARD_RUNNER_CREDENTIAL:")
        self.stdout.write(credential.secret_string())

    def _list(self, **_: Any) -> None:
        rows = RunnerCredential.objects.annotate(refused=Sum("failures__count")).order_by(
            "node_name", "created_at"
        )
        self.stdout.write(
            "id                  node                 fingerprint  state    last used                 "
            "accepted  refused"
        )
        for row in rows:
            state = "revoked" if row.revoked_at else "active"
            used = row.last_used_at.isoformat(timespec="seconds") if row.last_used_at else "never"
            self.stdout.write(f"{row.public_id:<19} {row.node_name:<20} {row.key_fingerprint:<12} {state:<8} "
                              f"{used:<25} {row.messages_accepted:>8} {row.refused or 0:>8}")

    def _revoke(self, node_or_id: str, **_: Any) -> None:
        for row in revoke(node_or_id):
            self.stdout.write(f"revoked {row.public_id} ({row.node_name})")

    def _dev(self, output: Path | None, node: str | None, **_: Any) -> None:
        path = output or default_credential_file()
        credential, issued = ensure_dev_credential(path, node or default_name())
        what = "issued" if issued else "kept"
        self.stdout.write(f"runner credential {credential.public_id} for {credential.node} {what} in {path}")
