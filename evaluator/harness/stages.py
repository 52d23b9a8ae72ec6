"""The stage script every judge follows, written once (docs/harness.md, "Stages").

A job goes start-up, baseline, compile, test, ranked, in that order and never back. The baseline is
timed before the submission is imported, so nothing of the submission's can slow it; the ranked
stage times only shapes whose correctness trials all passed; a ``REJECTED`` shape ends the job.
``StageScript`` holds that order, the correctness trials' loop and the ranked stage's re-timing rule.
Its two judges fill in how they talk to the untrusted side: ``single.judge.Judge`` to one child,
``multi.multi_judge.MultiJudge`` to every rank of a multi-GPU job at once.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from evaluator.harness import process_tree, work
from evaluator.harness.outcome import JudgeOutcome, ShapeResult, trial_check
from evaluator.harness.process_tree import not_dumpable
from evaluator.harness.request import EvaluationRequest
from evaluator.harness.shared import Arena
from evaluator.harness.witness.witnesses import judge_wall_witness, set_aside_unconfirmed_timing
from evaluator.problems import Problem, Shape
from evaluator.report import CorrectnessCheck
from evaluator.vocabulary import CPU, RANKED, Stage, Status

if TYPE_CHECKING:
    from evaluator.harness.single.cpu_baseline import BaselineClock

#: Statuses the child may report against itself (never PASSED).
SELF_REPORTED = (Status.REJECTED, Status.INCORRECT_DTYPE, Status.INCORRECT_SHAPE)


class HarnessFailure(RuntimeError):
    """The evaluator itself failed (not the submission): reported as an error of the runner."""


class TrialVerdict(NamedTuple):
    """The judge's verdict on one call made on fresh inputs."""

    status: Status
    message: str
    errors: dict[str, Any]
    #: The call lost its CUDA context: no later shape can run in this process.
    fatal: bool = False


#: One correctness call on fresh inputs: (seed, distribution) -> the judge's verdict on it.
TrialCall = Callable[[int, str], TrialVerdict]


def trial_seeds(
    request: EvaluationRequest, public_seeds: list[int], shape_id: str
) -> list[tuple[int, int | None]]:
    """(seed, the public seed to show or None) per correctness trial: ranked runs with a secret
    seed fold it into every public one, and show none of them."""
    if request.mode == RANKED and request.secret_seed is not None:
        return [(work.ranked_seed(request.secret_seed, seed, shape_id), None) for seed in public_seeds]
    return [(seed, seed) for seed in public_seeds]


def trial_label(public: int | None, distribution: str) -> str:
    return f"seed {public} / {distribution}" if public is not None else f"secret seed / {distribution}"


def self_reported(status: object) -> Status:
    """A status the child reports against itself: one of SELF_REPORTED, any other word REJECTED."""
    return next((known for known in SELF_REPORTED if known == status), Status.REJECTED)


class StageScript(ABC):
    """One job, stage by stage. Subclasses say how each step reaches the untrusted processes."""

    def __init__(self, request: EvaluationRequest, problem: Problem, shape_ids: list[str],
                 config: dict[str, Any], scratch: Path) -> None:
        self.request, self.problem, self.config, self.scratch = request, problem, config, scratch
        self.shapes = [problem.shape(shape_id) for shape_id in shape_ids]
        self.refmod = problem.reference_module()
        self.device = request.device
        self.arena = Arena(self.device, scratch)
        self.outcome = JudgeOutcome(device={})
        self.phase: str = Stage.START_UP
        self.phase_began = time.monotonic()
        #: Each shape's baseline timing, taken before the submission is imported.
        self.baselines: dict[str, Any] = {}
        #: CPU: the judge's clock of the baseline timed in the child (``cpu_baseline``), per shape.
        self.baseline_clocks: dict[str, BaselineClock] = {}

    # ------------------------------------------------------------ the script

    def run(self) -> JudgeOutcome:
        self.outcome.facts["judge_not_dumpable"] = not_dumpable()
        # Orphans of the job's processes come back to the judge, which clears them (process_tree).
        self.outcome.facts["judge_subreaper"] = process_tree.become_subreaper()
        self._launch()
        try:
            self._stages()
        except Exception as failure:
            if not self._ended_by(failure):
                raise
        finally:
            self.next_phase("done")
            self.outcome.phase_seconds.pop("done", None)
            self.outcome.log = self._close_processes()
            self.arena.close()
        return self.outcome

    def _stages(self) -> None:
        self._start_up()
        self.next_phase(Stage.BASELINE)
        for shape in self.shapes:  # before the import: nothing of the submission's can slow them
            self._time_baseline(shape)
        self.next_phase(Stage.COMPILE)
        if not self._import_submission():
            return
        self.next_phase(Stage.TEST)
        self._test_stage_begins()
        self._enter(Stage.TEST, self.request.limits.test_s)
        passed = self._test_stage()
        if self.outcome.status is None and passed:
            self._ranked_stage_begins()
            self.next_phase(Stage.RANKED)
            self._enter(Stage.RANKED, self.request.limits.ranked_s)
            self._ranked_stage(passed)
        self._finish()

    def next_phase(self, phase: str) -> None:
        now = time.monotonic()
        self.outcome.phase_seconds[self.phase] = round(now - self.phase_began, 3)
        self.phase, self.phase_began = phase, now

    # ------------------------------------------------------------ correctness

    def _test_stage(self) -> list[tuple[Shape, ShapeResult]]:
        passed = []
        for index, shape in enumerate(self.shapes):
            self._enter(Stage.TEST, self.request.limits.test_s, shape.shape_id)
            started = time.perf_counter()
            result = self._shape_correctness(shape)
            result.wall_seconds = time.perf_counter() - started
            self.outcome.shapes.append(result)
            if result.status == Status.REJECTED:
                self.outcome.judged(Status.REJECTED, f"{shape.shape_id}: {result.message}")
                return []
            if result.status == Status.PASSED:
                passed.append((shape, result))
            if result.fatal:
                result.fatal = False
                for rest in self.shapes[index + 1:]:
                    self.outcome.shapes.append(ShapeResult.of(
                        rest, Status.RUNTIME_ERROR, "not run: an earlier CUDA fault poisoned the context"))
                break
        return passed

    def _trials(self, shape: Shape, call: TrialCall) -> ShapeResult:
        """Every public seed (or its secret fold) on every input distribution, until one fails."""
        checks: list[CorrectnessCheck] = []
        for seed, public in trial_seeds(self.request, self.config["public_seeds"], shape.shape_id):
            for distribution in self.problem.distributions:
                label = trial_label(public, distribution)
                self._limit_trial_call(shape.shape_id, label, first=not checks)
                verdict = call(seed, distribution)
                checks.append(
                    trial_check(label, distribution, public, verdict.status, verdict.message, verdict.errors)
                )
                if verdict.status != Status.PASSED:
                    result = ShapeResult.failed(shape, verdict.status, f"{label}: {verdict.message}", checks)
                    result.fatal = verdict.fatal
                    return result
        return ShapeResult.passed(shape, checks)

    # ------------------------------------------------------------ timing

    def _ranked_stage(self, passed: list[tuple[Shape, ShapeResult]]) -> None:
        for shape, result in passed:
            self._enter(Stage.RANKED, self.request.limits.ranked_s, shape.shape_id)
            started = time.perf_counter()
            self._time_kernel(shape, result)
            if self._clock_disagrees(result):
                # On the CPU the witness is the judge's clock, one sample per checked call, and a busy
                # machine delays the child's wake-up in every one of them (nothing the child reports
                # about its run queue can be taken off: docs/security.md). One fresh timing: a
                # forged claim disagrees again, an honest one measured in a busy moment need not.
                retimed = set_aside_unconfirmed_timing(result)
                self._enter(Stage.RANKED, self.request.limits.ranked_s, shape.shape_id)
                self._time_kernel(shape, result)
                if retimed not in result.notes:  # a recorded timing rewrote the notes
                    result.notes = [*result.notes, retimed]
            result.wall_seconds += time.perf_counter() - started
            if result.status == Status.REJECTED:
                self.outcome.judged(Status.REJECTED, f"{shape.shape_id}: {result.message}")
                return
            if result.fatal:
                result.fatal = False
                return

    def _clock_disagrees(self, result: ShapeResult) -> bool:
        """CPU device: a passed timing its witness (the judge's clock) would not confirm."""
        if self.device != CPU or result.status != Status.PASSED or not result.timing:
            return False
        witness = judge_wall_witness(result, self.baseline_clocks.get(result.shape_id))
        return witness is not None and not witness.confirmed

    # ------------------------------------------------------------ what each judge fills in

    @abstractmethod
    def _launch(self) -> None:
        """Before the stages: what must run even if the job fails at once (a child, a witness)."""

    @abstractmethod
    def _start_up(self) -> None:
        """The device prepared and the untrusted processes warm."""

    @abstractmethod
    def _time_baseline(self, shape: Shape) -> None:
        """The vendor baseline on ``shape``, into ``self.baselines``."""

    @abstractmethod
    def _import_submission(self) -> bool:
        """Ask for the import; False when it failed or was rejected (the outcome says why)."""

    def _test_stage_begins(self) -> None:  # noqa: B027 (a hook: empty unless a judge needs it)
        """What starts with the test stage (the single judge's witness loads the submission)."""

    @abstractmethod
    def _enter(self, stage: str, limit_s: float, shape_id: str | None = None) -> None:
        """Every untrusted process is in ``stage`` now, with ``limit_s`` to answer."""

    @abstractmethod
    def _shape_correctness(self, shape: Shape) -> ShapeResult:
        """The correctness trials of one shape (``_trials`` on buffers bound for it)."""

    def _limit_trial_call(self, shape_id: str, label: str, first: bool) -> None:  # noqa: B027 (a hook: empty unless a judge needs it)
        """A per-call limit on the next trial's call, where the judge has one."""

    def _ranked_stage_begins(self) -> None:  # noqa: B027 (a hook: empty unless a judge needs it)
        """What must be ready before the ranked stage (the single judge waits for its witness)."""

    @abstractmethod
    def _time_kernel(self, shape: Shape, result: ShapeResult) -> None:
        """Time the submission on ``shape`` into ``result`` (``REJECTED`` there ends the job)."""

    @abstractmethod
    def _finish(self) -> None:
        """Tell the untrusted processes the job is over."""

    @abstractmethod
    def _ended_by(self, failure: Exception) -> bool:
        """A process timed out, died or broke the protocol: the outcome says so. False: not one of
        those (re-raised)."""

    @abstractmethod
    def _close_processes(self) -> str:
        """Stop every untrusted process; their log (capped)."""
