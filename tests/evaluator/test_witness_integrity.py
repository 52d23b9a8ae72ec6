"""The witness's own integrity: ncu's output is taken only as ncu prints it, a call with no kernel
is no witness, only a process ncu started may speak for it, and nothing else the job started
lives into the witness session. Runs without a GPU: the ncu output is a real one recorded on the
H200 (the first witness run: vector_add, three shapes, one warm-up and three witnessed calls each).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from evaluator.harness import process_tree
from evaluator.harness.witness.witnesses import attribute, gpu_witness, parse_ncu_output
from tests.harness_helpers import timed_result

REAL_OUTPUT = (Path(__file__).parents[1] / "fixtures" / "ncu" / "witness_vector_add_h200.txt").read_text()
CALLS = 12  # 3 shapes x (1 warm-up + 3 witnessed) in that run


def test_the_recorded_h200_output_parses_and_every_call_is_bracketed() -> None:
    rows = parse_ncu_output(REAL_OUTPUT)
    assert [row.launch_id for row in rows] == list(range(37))
    calls = attribute(rows, CALLS)
    assert calls.problem is None
    assert calls.kernels_per_call == [1] * CALLS
    assert all(2.0 < us < 800.0 for us in calls.per_call_us)


def _lines() -> list[str]:
    return REAL_OUTPUT.splitlines()


def test_a_second_csv_block_written_into_ncus_pipe_is_tampering() -> None:
    lines = _lines()
    header, units = lines[2], lines[3]
    forged_block = [header, units] + lines[4:10]
    with pytest.raises(ValueError, match="2 CSV headers"):
        parse_ncu_output("\n".join(lines[:2] + forged_block + lines[2:]))


def test_a_stray_line_before_or_after_the_header_is_tampering() -> None:
    lines = _lines()
    with pytest.raises(ValueError, match="does not print"):
        parse_ncu_output("\n".join(lines[:2] + ["0,spin_kernel,0.5"] + lines[2:]))
    with pytest.raises(ValueError, match="does not print"):
        parse_ncu_output("\n".join(lines + ["note: forged"]))


def test_rows_out_of_order_or_appended_with_a_repeated_id_are_tampering() -> None:
    lines = _lines()
    swapped = lines[:5] + [lines[6], lines[5]] + lines[7:]
    with pytest.raises(ValueError, match="in order"):
        parse_ncu_output("\n".join(swapped))
    with pytest.raises(ValueError, match="in order"):
        parse_ncu_output("\n".join(lines + [lines[-1]]))


def test_rows_appended_after_ncus_last_closing_marker_leave_the_call_count_wrong() -> None:
    lines = _lines()
    last_id = len(lines) - 5  # rows 0..36 follow two message lines, the header and the units row
    extra = [lines[-2].replace(f'"{last_id - 1}"', f'"{last_id + 1}"', 1),
             lines[-1].replace(f'"{last_id}"', f'"{last_id + 2}"', 1)]
    rows = parse_ncu_output("\n".join(lines + extra))
    assert attribute(rows, CALLS).problem is not None


def test_a_witnessed_call_with_no_kernel_is_not_a_witness() -> None:
    report = timed_result({"median_us": 2.7, "gate_us": 20.0}, round_trip_low_us=300.0)
    witness = gpu_witness(report, [0.0, 2.1, 2.0], 1, [0, 1, 1])
    assert not witness.confirmed
    assert "no kernel" in witness.message and "class 16" in witness.message
    assert gpu_witness(report, [2.6, 2.7, 2.6], 1, [1, 1, 1]).confirmed


def test_the_peer_of_a_unix_socket_is_named_by_the_kernel() -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert process_tree.peer_pid(left) == os.getpid()


def test_descendants_follow_the_parent_links() -> None:
    parents = {10: 1, 11: 10, 12: 11, 13: 1, 14: 13}
    assert process_tree.descendants(10, parents) == {11, 12}
    assert process_tree.descendants(1, parents) == {10, 11, 12, 13, 14}


def test_a_caller_that_did_not_claim_its_process_tree_keeps_its_children() -> None:
    """``evaluate`` called in-process (this test process) must never kill the caller's children."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not process_tree.owns_tree()
        assert process_tree.sweep(os.getpid(), keep=set()) == []
        assert not process_tree.become_subreaper()
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


DAEMON_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from evaluator.harness import process_tree

    process_tree.own_process_tree()
    assert process_tree.become_subreaper()
    keeper = os.fork()
    if keeper == 0:  # a process the judge keeps (stands for ncu's tree)
        time.sleep(30)
        os._exit(0)
    middle = os.fork()
    if middle == 0:  # the timing child: double-forks a daemon in a new session, then exits
        if os.fork() == 0:
            os.setsid()
            time.sleep(30)
            os._exit(0)
        os._exit(0)
    os.waitpid(middle, 0)
    deadline = time.monotonic() + 20  # until the daemon exists and has come back to us
    while not process_tree.descendants(os.getpid()) - {keeper} and time.monotonic() < deadline:
        time.sleep(0.05)
    orphans = process_tree.descendants(os.getpid()) - {keeper}
    print("orphans", len(orphans), flush=True)
    killed = process_tree.sweep(os.getpid(), keep=set(), keep_trees={keeper})
    print("killed", len(killed), flush=True)
    left = process_tree.descendants(os.getpid())
    print("left", sorted(left) == [keeper], flush=True)
    os.kill(keeper, 9)
    os.waitpid(keeper, 0)
""")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_double_forked_daemon_comes_back_to_the_judge_and_is_killed() -> None:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", DAEMON_SCRIPT], capture_output=True, text=True, timeout=60,
                            check=False, cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["orphans", "1", "killed", "1", "left", "True"], result.stdout
    assert time.monotonic() - started < 30  # the daemon did not have to sleep out its 30 s


WITNESS_SCRIPT = textwrap.dedent("""
    import os, time
    from evaluator.harness import process_tree

    process_tree.own_process_tree()
    process_tree.become_subreaper()
    def sleeper():
        time.sleep(30)
        os._exit(0)
    ncu = os.fork()
    if ncu == 0:  # stands for ncu: a launcher whose child is the profiler, which runs the witness
        profiler = os.fork()
        if profiler == 0:
            if os.fork() == 0:  # an ncu helper beside the witness
                sleeper()
            witness = os.fork()
            if witness == 0:
                if os.fork() == 0:  # a helper the witness started
                    sleeper()
                sleeper()
            sleeper()
        sleeper()
    deadline = time.monotonic() + 20  # until all four processes under the launcher exist
    while len(process_tree.descendants(ncu)) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    parents = process_tree.parent_map()
    tree = process_tree.descendants(ncu, parents)
    witness = next(pid for pid in tree if len(process_tree.descendants(pid, parents)) == 1
                   and parents[pid] != ncu)
    killed = process_tree.sweep(os.getpid(), keep={witness}, keep_trees={ncu}, not_under=witness)
    left = process_tree.descendants(os.getpid())
    print(len(killed), len(left), witness in left, ncu in left, flush=True)
    for pid in left:
        os.kill(pid, 9)
""")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_when_the_witness_ends_only_ncus_own_processes_and_the_witness_survive_the_sweep() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITNESS_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    # killed: the witness's helper; left: launcher, profiler, ncu's helper, the witness
    assert result.stdout.split() == ["1", "4", "True", "True"], result.stdout


def test_a_spares_witness_process_makes_its_device_ready_before_it_reads_its_job(monkeypatch: Any) -> None:
    """The frames a warm spare's session exchanges: prepare -> prepared (the CUDA context, made
    while the GPU is idle), then the job's config; a fresh session sends the config first."""
    from evaluator.harness import channel
    from evaluator.harness.witness import profiled_child
    from evaluator.harness.witness.witnesses import NcuSession

    prepared: list[bool] = []
    monkeypatch.setattr(profiled_child.WitnessChild, "prepare_device",
                        lambda self: (prepared.append(True), setattr(self, "device_ready", True)))
    judge_end, child_end = socket.socketpair()
    session = NcuSession(Path("/tmp"), profile=True)
    session.connection = judge_end
    config = {"type": "config", "problem": "vector_add", "file": "x.py", "language": "python", "spec": None}
    answered = threading.Thread(target=lambda: channel.write_all(judge_end.fileno(), channel.encode(config)))
    child: list[Any] = []
    reader = threading.Thread(target=lambda: child.append(profiled_child.WitnessChild(child_end.fileno())))
    reader.start()
    assert session.prepare(5.0) >= 0.0 and prepared == [True]
    answered.start()
    reader.join(5)
    answered.join(5)
    assert child and child[0].device_ready and child[0].config == config
    judge_end.close()
    child_end.close()


def test_a_third_process_on_the_gpu_during_the_witnessed_calls_voids_the_witness() -> None:
    from evaluator.harness.witness.session import WITNESS_GPU_PROCESSES, other_gpu_processes

    assert other_gpu_processes(None) is None  # no NVML: nothing to say
    assert other_gpu_processes(WITNESS_GPU_PROCESSES) is None  # the judge and the witness process
    why = other_gpu_processes(WITNESS_GPU_PROCESSES + 1)
    assert why is not None and "3 processes held a CUDA context" in why
