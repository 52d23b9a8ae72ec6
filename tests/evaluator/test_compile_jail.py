"""Site-side compilation of untrusted CUDA C++ and PTX: nvcc/ptxas run jailed in another process
with limits, every header nvcc opened is checked, and nothing of a host file comes back.

Two modes are exercised: "jailed" (namespaces: a private root holding only the toolchain and the
include folders) where this machine allows it, and "unjailed" (own process, limits, include
check only), the fallback on hosts that refuse namespaces. The host secret is a world-readable
file outside every include folder; its token must never appear in anything returned.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluator.ptx import jailed, validate_upload
from evaluator.ptx.jailed import ToolLimits, WorkFolder, run_in_jail
from evaluator.ptx.nvcc import CudaCompile, compile_to_ptx
from evaluator.ptx.ptxas import assemble
from evaluator.ptx.sourcetext import decode_source, text_problem
from evaluator.ptx.toolchain import find_tool

pytestmark = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")

ROOT = Path(__file__).resolve().parents[2]
VADD_CU = (ROOT / "examples/cuda/vector_add.cu").read_text()
TOKEN = "solboard_host_secret_" + secrets.token_hex(4)
REFUSED = "outside the CUDA toolkit's and the host compiler's include folders"
MODES = ["jailed", "unjailed"]

# Each of these makes the preprocessor open the file: refused by the include check when unjailed.
OPENING = {
    "comment before the hash": '/**/#include "{path}"',
    "macro-built path": '#define F "{path}"\n#include F',
    "__has_include then include": '#if __has_include("{path}")\n#include "{path}"\n#endif',
    "include_next": '#include_next "{path}"',
    "import": '#import "{path}"',
    "digraph": '%:include "{path}"',
    "line continuation in the word include": '#inc\\\nlude "{path}"',
    "relative ../ path": '#include "{relative}"',
}
# These never open it (or are not directives nvcc accepts): no leak, whatever the outcome.
NOT_OPENING = {
    "trigraph": '??=include "{path}"',
    "#embed": '#embed "{path}"',
    "pragma dependency": '#pragma GCC dependency "{path}"',
    "_Pragma dependency": '_Pragma("GCC dependency \\"{path}\\"")',
    "#line naming it, then a C++ error": '#line 1 "{path}"\nint broken = ;',
    "#line naming it, then #error": '#line 1 "{path}"\n#error boom',
}


@pytest.fixture(scope="module")
def host_secret() -> Iterator[Path]:
    """A file any user may read (so the unjailed compile could open it), outside every include folder."""
    folder = Path(tempfile.mkdtemp(prefix="solboard-secret-"))
    folder.chmod(0o755)
    secret = folder / "secret.h"
    secret.write_text(f"{TOKEN} {TOKEN}_more words\n#error {TOKEN}\n")
    secret.chmod(0o644)
    yield secret
    shutil.rmtree(folder)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "jailed" and not jailed.jail_namespaces():
        pytest.skip("this machine refuses the namespaces the jail needs")
    monkeypatch.setattr(jailed, "jail_namespaces", lambda: request.param == "jailed")
    return str(request.param)


def attack(template: str, secret: Path) -> str:
    relative = "../" * 16 + str(secret).lstrip("/")
    return template.format(path=secret, relative=relative) + "\n" + VADD_CU


def everything_said(result: CudaCompile) -> str:
    return "\n".join([result.log, *(d.render() for d in [*result.errors, *result.warnings])])


@pytest.mark.parametrize("name", OPENING)
def test_it_refuses_an_include_of_a_host_file_without_a_word_of_it(
    name: str, mode: str, host_secret: Path
) -> None:
    result = compile_to_ptx(attack(OPENING[name], host_secret), "sm_90a")
    said = everything_said(result)
    assert TOKEN not in said
    if mode == "unjailed":
        assert not result.ok and result.ptx is None and REFUSED in said and "secret.h" in said
    elif "__has_include" not in name:  # jailed, the file is not there: "No such file or directory"
        assert not result.ok and "No such file or directory" in said


@pytest.mark.parametrize("name", NOT_OPENING)
def test_directives_that_do_not_include_leak_nothing_either(name: str, mode: str, host_secret: Path) -> None:
    result = compile_to_ptx(attack(NOT_OPENING[name], host_secret), "sm_90a")
    assert TOKEN not in everything_said(result)
    if name.startswith("#line"):  # its diagnostics are located in the other file: withheld
        assert not result.ok and "in other files are not shown" in everything_said(result)


def test_the_upload_path_refuses_the_reported_attack_with_a_clear_message(
    host_secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        jailed, "jail_namespaces", lambda: False
    )  # the check alone, as on a host without namespaces
    source = f'/**/#include "{host_secret}"\n' + VADD_CU
    result = validate_upload("cuda", source, None, "vector_add", ["sm_90a"])
    said = "\n".join(result.messages())
    assert not result.ok and REFUSED in said and TOKEN not in said


def test_an_honest_kernel_with_toolkit_and_system_headers_compiles(mode: str) -> None:
    headers = (
        "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include <cuda/std/cstdint>\n#include <stdint.h>\n"
    )
    result = validate_upload("cuda", headers + VADD_CU, None, "vector_add", ["sm_90a"])
    assert result.ok, result.messages()


def test_the_submissions_own_errors_keep_their_line(mode: str) -> None:
    broken = VADD_CU.replace("c4[1] =", "c5[1] =")
    line = next(n for n, text in enumerate(broken.splitlines(), start=1) if "c5[1]" in text)
    result = compile_to_ptx(broken, "sm_90a")
    assert not result.ok and any(d.line == line and "c5" in d.message for d in result.errors)


# ---------------------------------------------------------------- limits: never a hang

BLOWUP = "\n".join(["#define X0 a+", *(f"#define X{i} X{i - 1} X{i - 1}" for i in range(1, 40))])


def test_a_source_that_keeps_the_compiler_busy_is_stopped_at_the_time_limit() -> None:
    started = time.monotonic()
    result = compile_to_ptx(BLOWUP + "\nint v = X34 0;\n", "sm_90a", limits=ToolLimits(wall_seconds=3))
    assert time.monotonic() - started < 20
    assert [d.message for d in result.errors] == ["nvcc ran past its time limit of 3 s and was stopped"]


def test_a_source_that_burns_cpu_is_stopped_at_the_cpu_limit() -> None:
    result = compile_to_ptx(
        BLOWUP + "\nint v = X34 0;\n", "sm_90a", limits=ToolLimits(wall_seconds=60, cpu_seconds=2)
    )
    assert result.errors[0].message == "nvcc ran past its CPU time limit of 2 s and was stopped"


def test_a_source_that_makes_the_compiler_allocate_gets_a_memory_error() -> None:
    limits = ToolLimits(wall_seconds=60, address_space_bytes=1 << 30)
    result = compile_to_ptx(BLOWUP + "\n#if X28 0\n#endif\n", "sm_90a", limits=limits)
    assert result.errors[0].message == "nvcc ran out of its memory limit of 1024 MiB"


# ---------------------------------------------------------------- the jail itself

PROBE = """
import json, os, resource, socket, sys
def can_write(path):
    try:
        open(path, "w").close()
        return True
    except OSError:
        return False
def connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False
print(json.dumps({
    "pid": os.getpid(), "sid": os.getsid(0), "uid": os.getuid(), "root": sorted(os.listdir("/")),
    "secret": os.path.exists(sys.argv[1]), "repo": os.path.exists(sys.argv[2]),
    "proc": os.path.exists("/proc/1"),
    "writes_usr": can_write("/usr/bin/solboard-probe"), "writes_work": can_write("probe.txt"),
    "connects": connects(int(sys.argv[3])), "environ": sorted(os.environ),
    "limits": [resource.getrlimit(r)[0]
               for r in (resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_FSIZE)],
}))
"""


def probe_jail(namespaces: bool, secret: Path, port: int) -> dict[str, object]:
    python = Path("/usr/bin/python3")
    if not python.exists():
        pytest.skip("no /usr/bin/python3 to probe the jail with")
    limits = ToolLimits(wall_seconds=30, cpu_seconds=20, address_space_bytes=2 << 30, file_bytes=1 << 20)
    with WorkFolder("solboard-probe-") as folder:
        run = run_in_jail(
            python, ["-c", PROBE, str(secret), str(ROOT), str(port)], folder, limits, namespaces
        )
    assert run.returncode == 0, run.stderr
    return dict(json.loads(run.stdout))


def test_the_jailed_compiler_sees_only_the_toolchain_and_no_network(
    host_secret: Path, listener: tuple[int, list[object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    if not jailed.jail_namespaces():
        pytest.skip("this machine refuses the namespaces the jail needs")
    monkeypatch.setenv("SOLBOARD_TEST_SECRET_VARIABLE", "x")
    port, accepted = listener
    seen = probe_jail(True, host_secret, port)
    assert seen["root"] == ["bin", "dev", "etc", "lib", "lib64", "sbin", "tmp", "usr"]
    assert (seen["secret"], seen["repo"], seen["proc"]) == (False, False, False)
    assert (seen["writes_usr"], seen["writes_work"]) == (False, True)
    assert seen["connects"] is False and accepted == []
    assert "SOLBOARD_TEST_SECRET_VARIABLE" not in seen["environ"]  # type: ignore[operator]
    assert seen["limits"] == [2 << 30, 20, 1 << 20]
    if os.geteuid() == 0:
        assert seen["uid"] == 65534


def test_unjailed_the_compiler_still_runs_in_its_own_limited_session(
    host_secret: Path, listener: tuple[int, list[object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOLBOARD_TEST_SECRET_VARIABLE", "x")
    seen = probe_jail(False, host_secret, listener[0])
    assert seen["pid"] != os.getpid() and seen["sid"] == seen["pid"]  # another process, its own session
    assert seen["limits"] == [2 << 30, 20, 1 << 20]
    assert seen["environ"] == ["HOME", "LC_ALL", "PATH", "TMPDIR"]
    if os.geteuid() == 0:
        assert seen["uid"] == 65534


# ---------------------------------------------------------------- text that is not UTF-8


def test_text_that_is_not_utf8_is_named_by_its_byte_offset() -> None:
    assert text_problem("ab\udcffc") == "the source is not UTF-8 text: byte 0xff at byte offset 2"
    assert (
        text_problem("é\ud800")
        == "the source is not UTF-8 text: an unpaired surrogate U+D800 at byte offset 2"
    )
    assert text_problem("ab\0") == "the source contains a NUL byte at byte offset 2"
    assert text_problem("héllo") is None
    with pytest.raises(ValueError, match="byte 0xfe at byte offset 3"):
        decode_source(b"abc\xfe")


def test_nvcc_and_ptxas_refuse_text_that_is_not_utf8_before_running() -> None:
    compiled = compile_to_ptx(VADD_CU + "// \udcff\n", "sm_90a")
    assert not compiled.ok and "not UTF-8 text: byte 0xff" in compiled.errors[0].message
    assembled = assemble("// \0\n", "sm_90a")
    assert (
        not assembled.ok and assembled.errors[0].message == "the source contains a NUL byte at byte offset 3"
    )
