"""The judge's side of the witness session: drive the calls, check them, read what ncu measured.

See ``witness`` for the method. Every witnessed call is one the judge checked: a wrong output
under the witness is REJECTED (the submission behaves differently when profiled, class 9).

The witness process loads the submission early (``begin_load``, when the test stage starts, once
the timing child has imported it and left its builds in the job's caches) and the judge waits for
that load to end before the ranked stage (``await_load``): its CUDA context and the import leave
the job's critical path, and no submission code loads while anything is timed. On the H200 (rounds
10-13) the load took 1.1-3.6 s a job, 0.30 s per ranked shape over the catalogue.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from evaluator.harness import channel, process_tree
from evaluator.harness.call_limits import CallLimit, witness_call_limit
from evaluator.harness.outcome import ShapeResult
from evaluator.harness.witness.witnesses import (
    MIN_WITNESS_CALLS,
    SESSION_LIMIT_S,
    THIRD_CALL_BELOW_S,
    WARMUP_CALLS,
    WITNESS_CALLS,
    NcuSession,
    attribute,
    gpu_witness,
    judge_wall_witness,
    parse_ncu_output,
    witnessed_time,
)
from evaluator.problems import Shape
from evaluator.report import ProfileReport
from evaluator.vocabulary import CPU, Status

#: A passed shape and its result, as the judge hands them to the witness.
Timed = list[tuple[Shape, ShapeResult]]


class WitnessFailed(Exception):
    """The witness could not be taken (not the submission's verdict: the result stays provisional)."""


class Peer:
    """The witness child on the socket: frames with a deadline, like ``parent.ChildProcess``."""

    def __init__(self, connection: Any, deadline: float) -> None:
        self.fd = connection.fileno()
        self.reader = channel.FrameReader(self.fd)
        self.deadline = deadline
        self.broken = False

    def send(self, message: dict[str, Any]) -> None:
        channel.write_all(self.fd, channel.encode(message))

    def extend(self, limit_s: float) -> None:
        self.deadline = time.monotonic() + limit_s

    def call(self, limit: CallLimit) -> dict[str, Any]:
        """One witnessed call, answered within its own limit as well as the session's: a kernel that
        hangs only under the profiler ends the witness (provisional) in seconds, not minutes."""
        session_deadline = self.deadline
        self.deadline = min(session_deadline, time.monotonic() + limit.seconds)
        self.send({"type": "call"})
        try:
            return self.receive("called")
        except WitnessFailed:
            if time.monotonic() < self.deadline:
                raise
            raise WitnessFailed(f"a call under the witness ran past its limit of {limit.seconds:.3g} s "
                                f"({limit.rule})") from None
        finally:
            self.deadline = session_deadline

    def receive(self, *expected: str) -> dict[str, Any]:
        try:
            message = self.reader.next(self.deadline)
        except (channel.ChannelTimeout, channel.ChannelError) as error:
            self.broken = True
            raise WitnessFailed(
                f"the witness process stopped answering ({type(error).__name__}: {error})"
            ) from None
        if message["type"] not in expected:
            self.broken = True
            raise WitnessFailed(f"the witness process sent {message['type']!r}")
        return message


class EarlyLoad:
    """The witness process's load, begun when the test stage starts: the peer, or why none."""

    def __init__(self) -> None:
        self.peer: Peer | None = None
        self.failure: str | None = None
        self.loaded = False


def begin_load(judge: Any) -> None:
    """Hand the witness process its job while the test stage runs (ranked GPU jobs only). Not before:
    while the judge times the baselines no submission code runs anywhere (a spinning import would slow
    the baseline and flatter the score), and the timing child's import has by now built what both
    processes load (Triton's cache, torch's extensions), so they never build the same file at once."""
    session = judge.witness_session
    if session is None or session.ncu is None:
        return
    load = judge.witness_load = EarlyLoad()
    limit = judge.request.limits.compile_s
    try:
        connection = session.start(limit)
    except OSError as error:
        load.failure = f"ncu did not start the witness process ({error})"
        return
    load.peer = Peer(connection, time.monotonic() + limit)
    try:
        load.peer.send(_config(judge))
    except OSError as error:
        load.failure = f"the witness process stopped answering ({type(error).__name__}: {error})"


def await_load(judge: Any) -> None:
    """Before the ranked stage: the witness process has loaded the submission, or it is killed (no
    answer within the compile limit, or a wrong one: the result stays provisional), so nothing it
    runs overlaps the timed calls. Whatever it left running is the submission's own doing and can
    only slow its own timing."""
    load = judge.witness_load
    if load is None or load.peer is None or load.failure or load.loaded:
        return
    try:
        _read_ready(load.peer)
        load.loaded = True
    except WitnessFailed as error:
        load.failure = str(error)
        judge.witness_session.discard()


def _config(judge: Any) -> dict[str, Any]:
    return {"type": "config", "problem": judge.problem.name, "file": str(judge.request.file.resolve()),
            "language": judge.request.language,
            "spec": str(judge.request.spec.resolve()) if judge.request.spec else None}


def _read_ready(peer: Peer) -> None:
    ready = peer.receive("ready", "compile_error")
    if ready["type"] == "compile_error":
        peer.broken = True
        raise WitnessFailed(f"the submission did not load under ncu: {str(ready.get('message'))[:300]}")


def witness_shapes(judge: Any, passed: Timed) -> list[str]:
    """Fill each passed shape's ``witness`` (and ``profile``); returns notes for the report."""
    timed = [(shape, result) for shape, result in passed if result.status == Status.PASSED and result.timing]
    if not timed:
        return []
    try:
        return _witness(judge, timed)
    finally:
        for _, result in timed:  # a shape REJECTED under the witness stays so, whatever became of the rest
            result.witness_rejected = False


def _witness(judge: Any, timed: Timed) -> list[str]:
    if judge.device == CPU:
        for shape, result in timed:
            result.witness = judge_wall_witness(result, judge.baseline_clocks.get(shape.shape_id))
        return []
    session = judge.witness_session or NcuSession(judge.scratch, judge.request.profile,
                                                  judge.request.profile_sections)
    judge.witness_session = None
    if session.ncu is None:
        return ["no timing witness on this runner (ncu not found): the result is provisional, never ranked"]
    # Nothing the timing child left behind (a double-forked helper) lives on into the witness session.
    cleared = process_tree.sweep(os.getpid(), keep=set(), keep_trees={session.process.pid}) \
        if hasattr(session, "process") else []
    try:
        output, calls = _session(judge, session, timed)
    except WitnessFailed as error:
        return [f"no timing witness: {error}; the result is provisional, never ranked"]
    finally:
        session.finish(5)  # idempotent: ncu and the witness process never outlive the job
    notes = [(f"witness: killed {len(cleared)} process(es) the timing child left behind before the witness "
              f"session ({', '.join(cleared[:3])})")] if cleared else []
    crowded = other_gpu_processes(judge.witness_gpu_processes)
    if crowded:
        return notes + [f"no timing witness: {crowded}; the result is provisional, never ranked"]
    if judge.witness_gpu_processes is not None:
        notes.append(
            f"witness: at most {judge.witness_gpu_processes} processes held a CUDA context on the GPU "
            "during the witnessed calls"
        )
    if session.impostors:
        notes.append(f"witness: refused {session.impostors} connection(s) from processes ncu did not start")
    if session.returncode != 0:
        return notes + [(f"no timing witness: ncu exited with status {session.returncode}; the result is "
                         "provisional, never ranked")]
    return notes + _apply(session, timed, output, calls)


class SubPhases:
    """Seconds of the witness session's parts, as ``witness.<part>`` phases of the report: where a
    job's witness time goes (a one-shape, one-kernel job once spent 2.4 s of fixed cost in it, 0.65 s a
    shape over six: docs/security.md, "Witness cost")."""

    def __init__(self, judge: Any) -> None:
        self.phases = judge.outcome.phase_seconds
        self.began = time.perf_counter()

    def done(self, part: str) -> None:
        now = time.perf_counter()
        self.phases[f"witness.{part}"] = round(now - self.began, 3)
        self.began = now


def _session(judge: Any, session: NcuSession, timed: Timed) -> tuple[str, list[int]]:
    parts = SubPhases(judge)
    peer = _loaded_peer(judge, session, parts)
    # The witness process's CUDA context (unless a spare made it) and the submission: ~0 s when the
    # early load (begin_load) ended before the ranked stage.
    parts.done("load")
    calls = [_witness_shape(judge, peer, shape, result) for shape, result in timed]
    parts.done("calls")
    # Only ncu (its launcher script, its own processes) and the witness process may be alive when
    # ncu prints: a helper the witness process started could write rows into ncu's output after
    # ncu's own. (On the H200 ``ncu`` is a script whose child is the profiler: both are kept.)
    process_tree.sweep(os.getpid(), keep={session.witness_pid or -1}, keep_trees={session.process.pid},
                       not_under=session.witness_pid)
    peer.send({"type": "finish"})
    output = session.finish(120)
    parts.done("ncu_exit")
    return output, calls


def _loaded_peer(judge: Any, session: NcuSession, parts: SubPhases) -> Peer:
    """The witness process with the submission loaded: the early load's, or one loaded now (a job
    whose test stage never handed it over)."""
    load = getattr(judge, "witness_load", None)
    if load is not None:
        judge.witness_load = None
        if load.failure:
            raise WitnessFailed(load.failure)
        if load.peer is not None:
            load.peer.extend(SESSION_LIMIT_S)
            if not load.loaded:
                _read_ready(load.peer)
            parts.done("connect")
            return load.peer
    try:
        connection = session.start(judge.request.limits.compile_s)
    except OSError as error:
        raise WitnessFailed(f"ncu did not start the witness process ({error})") from None
    parts.done("connect")
    peer = Peer(connection, time.monotonic() + SESSION_LIMIT_S)
    peer.send(_config(judge))
    _read_ready(peer)
    return peer


def _witness_shape(judge: Any, peer: Peer, shape: Shape, result: ShapeResult) -> int:
    """The shape's witnessed calls, each checked; returns how many were made (``calls_for``)."""
    ctx = judge.context(shape)
    group = f"witness:{shape.shape_id}"
    like = judge.refmod.generate_inputs(dict(shape.axes), 0, judge.device, judge.problem.distributions[0])
    inputs, outputs, handles = judge.shared_set(ctx, like, group)
    del like
    try:
        peer.send({"type": "bind", "shape": shape.shape_id, **handles})
        if peer.receive("bound").get("error"):
            raise WitnessFailed(f"the kernel did not bind under the witness for {shape.shape_id}")
        made, began = 0, time.monotonic()
        while made < calls_for(made, time.monotonic() - began):
            made += 1
            private = judge.write_inputs(ctx, inputs, outputs, _seed(), judge.problem.distributions[0])
            answer = peer.call(witness_call_limit((result.timing or {}).get("median_us")))
            if answer.get("error"):
                raise WitnessFailed(f"the kernel raised under the witness: {str(answer['error'])[:300]}")
            _count_gpu_processes(judge)
            status, message, _ = judge.verify(ctx, inputs, outputs, private)
            if status != Status.PASSED:
                result.ends(
                    Status.REJECTED,
                    f"a call under the witness (Nsight Compute) wrote a wrong output: the "
                    f"kernel behaves differently when profiled (class 9): {message}",
                )
                result.witness_rejected = True
    finally:
        if not peer.broken:
            peer.send({"type": "unbind"})
            peer.receive("unbound")
        judge.arena.free(group)
    return made


def calls_for(made: int, spent_s: float) -> int:
    """How many witnessed calls the shape gets, given those made and the seconds they took: every
    kernel ncu measures costs ~12 ms on the H200 (docs/security.md, "Witness cost"), so a third call is made
    only while two took under ``THIRD_CALL_BELOW_S``; calls of hundreds of kernels get two (the witness is
    then the lower, which drops a first call's one-off kernels as the median of three does)."""
    if made < MIN_WITNESS_CALLS or spent_s < THIRD_CALL_BELOW_S:
        return WITNESS_CALLS
    return made


#: Processes with a CUDA context on the GPU while a witnessed call runs: the judge and the witness
#: process. On the H200 every honest runner job, with and without warm spares, saw exactly these two
#: (benchmarks/results/witness.md#nvml).
WITNESS_GPU_PROCESSES = 2


def other_gpu_processes(count: int | None) -> str | None:
    """Why the witness does not count, or None: a third process with a CUDA context during the
    witnessed calls may have done the call's work out of ncu's sight (a helper the submission
    started, fed through shared memory, with a decoy kernel for ncu). Not the submission's verdict
    (something else on the runner could hold the GPU): the result stays provisional."""
    if count is None or count <= WITNESS_GPU_PROCESSES:
        return None
    return (
        f"{count} processes held a CUDA context on the GPU during the witnessed calls, where only the judge "
        f"and the witness process should ({WITNESS_GPU_PROCESSES}): another process may have done the work "
        "out of the witness's sight"
    )


def _count_gpu_processes(judge: Any) -> None:
    """The most processes NVML saw with a CUDA context on the GPU after a witnessed call
    (``other_gpu_processes`` decides)."""
    count = judge.nvml.compute_processes() if judge.nvml is not None else None
    if count is not None:
        judge.witness_gpu_processes = max(count, judge.witness_gpu_processes or 0)


def _seed() -> int:
    from evaluator.harness.work import fresh_seed

    return fresh_seed()


def _apply(session: NcuSession, timed: Timed, output: str, calls_made: list[int]) -> list[str]:
    try:
        rows = parse_ncu_output(output)
    except ValueError as error:
        # Only a process of the job can write into ncu's output: the submission forged its witness.
        for _, result in timed:
            result.ends(Status.REJECTED, f"forged witness: {error} (class 16)")
        return []
    calls = attribute(rows, sum(calls_made))
    if calls.problem:
        return [f"no timing witness: {calls.problem}; the result is provisional, never ranked"]
    tool = session.tool()
    first = 0
    for (_, result), made in zip(timed, calls_made, strict=True):
        window = slice(first, first + made)
        first += made
        times, kernels = calls.per_call_us[window], calls.kernels_per_call[window]
        if result.witness_rejected:
            result.witness_rejected = False
            continue
        warmup = WARMUP_CALLS if len(times) > WARMUP_CALLS else 0
        result.witness = gpu_witness(result, times, int(statistics.median_low(kernels[warmup:])), kernels)
        if session.profile:
            call = times.index(witnessed_time(times, warmup), warmup)
            result.profile = ProfileReport(available=True, tool=tool, kernels=calls.kernels[window][call])
    notes = []
    if calls.marker_us is not None:
        notes.append(f"witness: ncu reads the {_marker_note(calls.marker_us)}")
    return notes


def _marker_note(marker_us: float) -> str:
    return f"marker kernel as {marker_us:.2f} us (its per-kernel overhead is part of the tolerance)"
