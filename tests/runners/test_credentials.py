"""The runner's side of authentication, without a site: where the credential and the broker URL
come from, file permissions, the command line of every process the node starts, signing.

No Django here: a runner node never imports the site.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from runners import cli
from runners.node import Node, NodeConfig
from runners.slots import CPU_SLOT, StateDir
from solboard_common.config import ConfigError, broker_url
from solboard_common.signing import (
    CREDENTIAL_FILE_VARIABLE,
    CREDENTIAL_VARIABLE,
    CredentialError,
    canonical_json,
    message_mac,
    parse_credential,
    read_private_file,
    sign,
    unsigned,
    write_private_file,
)
from tests.runner_helpers import local_credential

BROKER_WITH_PASSWORD = "redis://:s3cret-broker-password@broker.example.org:6379/0"


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in (
        CREDENTIAL_VARIABLE,
        CREDENTIAL_FILE_VARIABLE,
        "CELERY_BROKER_URL",
        "SOLBOARD_BROKER_URL_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SOLBOARD_VAR", str(tmp_path / "var"))
    return tmp_path


def test_a_credential_round_trips_through_its_string() -> None:
    credential = local_credential("gpu-host-1")
    assert parse_credential(credential.secret_string()) == credential
    assert str(credential) == f"runner credential {credential.public_id} for gpu-host-1"  # no key in logs


@pytest.mark.parametrize("text", ["", "solboard-runner:a:b", "other:a:b:c", "solboard-runner:a:b:!!!",
                                  "solboard-runner:a:b:AAAA"])
def test_a_malformed_credential_is_refused_with_its_expected_form(text: str) -> None:
    with pytest.raises(CredentialError, match="solboard-runner|base64url|bytes"):
        parse_credential(text)


def test_a_credential_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "credential"
    path.write_text(local_credential("n").secret_string())
    path.chmod(0o644)
    with pytest.raises(CredentialError, match=r"readable by others \(mode 644\): run `chmod 600"):
        read_private_file(path, "runner credential")
    path.chmod(0o600)
    assert read_private_file(path, "runner credential").startswith("solboard-runner:n:")


def test_a_private_file_is_written_0600_from_its_first_byte(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "credential"
    write_private_file(path, "secret")
    write_private_file(path, "replaced")
    assert path.stat().st_mode & 0o777 == 0o600 and path.read_text() == "replaced\n"
    assert [item.name for item in path.parent.iterdir()] == ["credential"]  # no temporary left behind


def test_the_runner_refuses_to_start_without_a_credential(clean_environment: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--device", "cpu"]) == 2
    assert "no runner credential" in capsys.readouterr().err


def test_the_node_reads_its_heartbeat_period_once_at_start(clean_environment: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CREDENTIAL_VARIABLE, local_credential("gpu-host-1").secret_string())
    monkeypatch.setenv("SOLBOARD_HEARTBEAT_SECONDS", "2.5")
    assert cli.build_config(cli.build_parser().parse_args(["--device", "cpu"])).heartbeat_seconds == 2.5


def test_the_runner_refuses_a_malformed_heartbeat_period_at_start(clean_environment: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(CREDENTIAL_VARIABLE, local_credential("gpu-host-1").secret_string())
    monkeypatch.setenv("SOLBOARD_HEARTBEAT_SECONDS", "often")
    assert cli.main(["--device", "cpu"]) == 2
    assert "SOLBOARD_HEARTBEAT_SECONDS='often' is not a number" in capsys.readouterr().err


def test_the_node_reads_whether_it_keeps_warm_spares_once_at_start(
    clean_environment: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(CREDENTIAL_VARIABLE, local_credential("gpu-host-1").secret_string())
    arguments = cli.build_parser().parse_args(["--device", "cpu"])
    assert cli.build_config(arguments).warm_spares is True
    monkeypatch.setenv("SOLBOARD_RUNNER_SPARES", "off")
    assert cli.build_config(arguments).warm_spares is False
    monkeypatch.setenv("SOLBOARD_RUNNER_SPARES", "sometimes")
    assert cli.main(["--device", "cpu"]) == 2
    assert "SOLBOARD_RUNNER_SPARES='sometimes' is not a boolean" in capsys.readouterr().err


def test_the_node_name_comes_from_the_credential_and_may_not_differ(clean_environment: Path) -> None:
    credential = local_credential("gpu-host-1")
    assert cli.node_name(None, credential) == "gpu-host-1"
    assert cli.node_name("gpu-host-1", credential) == "gpu-host-1"
    with pytest.raises(CredentialError, match="is for node 'gpu-host-1'"):
        cli.node_name("gpu-host-2", credential)


def test_the_credential_is_found_in_the_environment_a_named_file_or_var(
    clean_environment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_var, in_file, in_env = local_credential("a"), local_credential("b"), local_credential("c")
    write_private_file(clean_environment / "var" / "runner-credential", in_var.secret_string())
    assert cli.resolve_credential(None) == in_var
    write_private_file(clean_environment / "named", in_file.secret_string())
    monkeypatch.setenv(CREDENTIAL_FILE_VARIABLE, str(clean_environment / "named"))
    assert cli.resolve_credential(None) == in_file
    monkeypatch.setenv(CREDENTIAL_VARIABLE, in_env.secret_string())
    assert cli.resolve_credential(None) == in_env
    assert cli.resolve_credential(clean_environment / "named") == in_file  # --credential-file wins


def test_the_broker_url_can_come_from_a_private_file(clean_environment: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = clean_environment / "broker"
    write_private_file(path, BROKER_WITH_PASSWORD)
    monkeypatch.setenv("SOLBOARD_BROKER_URL_FILE", str(path))
    assert broker_url() == BROKER_WITH_PASSWORD
    args = cli.build_parser().parse_args(["--broker-file", str(path)])
    assert cli.resolve_broker(args) == BROKER_WITH_PASSWORD
    path.chmod(0o640)
    with pytest.raises(ConfigError, match="readable by others"):
        broker_url()


def test_a_broker_password_on_the_command_line_is_warned_about(clean_environment: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="runners"):
        assert cli.resolve_broker(cli.build_parser().parse_args(["--broker", BROKER_WITH_PASSWORD]))
        assert cli.resolve_broker(cli.build_parser().parse_args(["--broker", "redis://broker:6379/0"]))
    warnings = [record.getMessage() for record in caplog.records if "command line" in record.getMessage()]
    assert len(warnings) == 1 and "--broker-file" in warnings[0]  # only the URL with a password


def test_no_process_the_node_starts_gets_a_secret_on_its_argv(clean_environment: Path) -> None:
    credential = local_credential("gpu-host-1")
    node = Node(NodeConfig(name="gpu-host-1", broker_url=BROKER_WITH_PASSWORD, credential=credential))
    node.state, node.calibrations, node.job_users = StateDir(clean_environment / "state", None), {}, {}
    workers = [node._worker(CPU_SLOT), node._control_worker()]
    key = credential.secret_string().rsplit(":", 1)[1]
    for worker in workers:
        argv = " ".join(worker.argv)
        assert (
            key not in argv and "s3cret" not in argv and worker.argv[:3] == [worker.argv[0], "-m", "celery"]
        )
        assert worker.env[CREDENTIAL_VARIABLE] == credential.secret_string()
        assert worker.env["CELERY_BROKER_URL"] == BROKER_WITH_PASSWORD
        assert CREDENTIAL_FILE_VARIABLE not in worker.env


def test_a_signature_covers_the_task_the_body_and_the_nonce() -> None:
    credential = local_credential("n")
    body = {"runner": "n:0", "score": 0.5, "nested": {"b": 1, "a": [1.5, None]}}
    payload = sign("leaderboard.job_started", body, credential, now=1_700_000_000)
    rest, auth = unsigned(payload)
    assert rest == body and auth["ts"] == 1_700_000_000
    assert auth["mac"] == message_mac(credential.key, "leaderboard.job_started", body, credential.public_id,
                                      auth["ts"], auth["nonce"])
    assert auth["mac"] != message_mac(credential.key, "leaderboard.store_result", body, credential.public_id,
                                      auth["ts"], auth["nonce"])
    assert sign("t", body, credential)["auth"]["nonce"] != sign("t", body, credential)["auth"]["nonce"]
    assert canonical_json({"b": 1, "a": "é"}) == b'{"a":"\\u00e9","b":1}'

