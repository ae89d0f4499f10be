"""The judge's current worker (see plugin.py): started while the suite is collected, restarted
when the previous one died, hung or broke, and tuned to the machine's load before each test."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from grader.engine import import_watch
from grader.engine.config import JudgeConfig
from grader.engine.cpus import CpuPlan
from grader.engine.events import EventStream
from grader.engine.failures import CandidateImportError, KataTimeout, import_error_text
from grader.engine.judge_bridge import CallStats, HangSite
from grader.engine.worker_process import WorkerProcess
from grader.worker import measure


class JudgeWorker:
    """The current worker process, its module's proxy, and what its code printed.

    Invariants: `proxy` is set only while `process` is (a live worker whose import succeeded);
    once `import_error` is set no worker is started again (every later test fails with it);
    `announced` turns true with the first worker, whose containment the runner is told."""

    def __init__(self, config: JudgeConfig, stream: EventStream, cpus: CpuPlan, call_stats: CallStats,
                 own_clock: Callable[[Callable[[], Any]], Any],
                 start_process: Callable[..., Any] = WorkerProcess) -> None:
        self.config, self.stream, self.cpus, self.call_stats = config, stream, cpus, call_stats
        self.own_clock = own_clock  # runs the import on the flat limit's clock (see JudgeSession)
        self.start_process = start_process
        self.process: Any = None  # a WorkerProcess, or None
        self.proxy: Any = None
        self.import_error: str | None = None
        self.output: list[str] = []
        self.output_chars = 0
        self.announced = False
        self.last_endpoint: Any = None  # kept after a kill, for the failing test's snippet
        self.proxy_seen: Any = None
        # The functions of the candidate's a test of this grade hung in (see judge_report):
        # every worker's endpoint refuses calls into them, so that no later test waits the
        # hang out again nor costs a worker restart.
        self.hung_functions: dict[str, HangSite] = {}

    def on_output(self, text: str, dropped: int) -> None:
        self.output.append(text)
        self.output_chars += len(text) + dropped

    def spawn(self) -> None:
        if self.process is None and self.import_error is None and self.config.solution is not None:
            extra = {"extra_env": dict(self.config.worker_env)} if self.config.worker_env else {}
            self.process = self.start_process(Path(self.config.solution), self.config.module, self.config.limits,
                                              self.on_output, support=tuple(map(Path, self.config.support)),
                                              **extra)
            self.process.start()
            if not self.announced:
                self.announced = True
                self.stream.send("worker", contained=self.process.contained,
                                 notes=self.process.command.notes if self.process.command else [])

    def module(self) -> Any:
        if self.import_error is not None:
            raise CandidateImportError(self.import_error)
        if self.proxy is not None:
            return self.proxy
        self.spawn()
        assert self.process is not None
        self.stream.send("import_start")
        process = self.process
        try:
            ok, value, _ = self.own_clock(lambda: import_watch.wait_for_hello(process))
        except import_watch.ImportStuck as stuck:
            raise self.import_failed(
                import_watch.stuck_text(stuck.frames, stuck.seconds, self.source_lines())) from stuck
        except KataTimeout:
            frames = import_watch.frames_now(process)
            where = "\n" + import_watch.where_text(frames, self.source_lines()) if frames else ""
            raise self.import_failed("importing your file did not finish in time (a loop at module level?)"
                                     + where) from None
        if not ok:
            if value.get("kind") == "crashed":
                value = {**value, "msg": process.exit_text() or value.get("msg", "")}
            raise self.import_failed(import_error_text(value))
        self.stream.send("import_done", error=None)
        self.proxy = self.proxy_seen = value
        self.cpus.worker_changed()
        self.tune_cpus()
        measure.set_remote(self.process.endpoint)  # efficiency tests measure the worker's share
        self.process.endpoint.keep_beside = self.keep_beside
        self.process.endpoint.call_stats = self.call_stats  # the session's: one per test, across restarts
        self.process.endpoint.hung_functions = self.hung_functions  # the grade's, across restarts
        return value

    def import_failed(self, text: str) -> CandidateImportError:
        """The worker could not import the candidate's file: every later test fails with `text`."""
        self.import_error = text
        self.kill()
        self.stream.send("import_done", error=text)
        return CandidateImportError(text)

    def endpoint(self) -> Any:
        return self.process.endpoint if self.process is not None else None

    def tune_cpus(self) -> None:
        """Side by side or on one CPU, as the machine's load now calls for (see cpus.py)."""
        endpoint = self.endpoint()
        if endpoint is None or endpoint.broken is not None or not self.process.alive():
            return
        try:
            self.cpus.update(self.process.python_pid(), lambda s: endpoint.request("spin", s),
                             lambda s: setattr(endpoint.main, "spin_s", s))
        except Exception:  # noqa: BLE001 - a worker that cannot be tuned is still graded
            pass

    def keep_beside(self) -> bool:
        """The worker on the judge's CPU while a test measures it (see worker_cpu.py)."""
        endpoint = self.endpoint()
        if endpoint is None or endpoint.broken is not None or not self.process.alive():
            return False
        try:
            return self.cpus.beside(self.process.python_pid(), lambda s: endpoint.request("spin", s),
                                    lambda s: setattr(endpoint.main, "spin_s", s))
        except Exception:  # noqa: BLE001 - then the worker's own figures stand
            return False

    def after_test(self) -> None:
        """Reset the worker for the next test, or discard it when it is broken."""
        endpoint = self.endpoint()
        if endpoint is None:
            return
        if endpoint.broken is None and self.process.alive():
            try:
                endpoint.reset()
                return
            except BaseException:  # noqa: BLE001 - a worker that cannot reset is replaced
                pass
        self.kill()

    def kill(self, *, wait: bool = True) -> None:
        if self.process is not None:
            self.last_endpoint = self.process.endpoint
            self.process.kill(wait=wait)
        self.process, self.proxy = None, None
        measure.set_remote(None)

    def take_output(self) -> tuple[str, int]:
        text, total = "".join(self.output), self.output_chars
        self.output, self.output_chars = [], 0
        return text, total

    def source_lines(self) -> list[str]:
        """The candidate's file, for the lines a hang or a stuck import is shown at."""
        if self.config.solution is None:
            return []
        try:
            return Path(self.config.solution).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []
