"""The trace pass: run Python code under the PyTorch profiler (CUPTI) and fill a Session."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections import Counter
from typing import Any

from kernelscope.collect import driver

from kernelscope.collect.nvml import snapshot as nvml

from kernelscope.collect.trace import marks, regions, steps

from kernelscope.collect.nvml import sampler
from kernelscope.collect.instrument import scope_sink
from kernelscope.collect.instrument.sink import attach_pending
from kernelscope.collect.trace.quiet import profiler_notices_silenced
from kernelscope.collect.trace.kineto import TraceFormatError
from kernelscope.collect.trace.kineto_stream import read_trace
from kernelscope.collect.memory.recorder import MemoryRecorder
from kernelscope.model import CollectorStatus, Device, Session
from kernelscope.model.escape import visible
from kernelscope.model.files import OutputFileError, write_atomic
from kernelscope.model.memory import StepWindow
from kernelscope.model import collectors as collector


# What the profiler records of the operators behind the kernels (`kernelscope run --operators`): the aten ops'
# input shapes and the Python stacks around them. Both cost host time per op (benchmarks/user_traces/RESULTS.md).
OPERATORS_ENV = "KERNELSCOPE_OPERATORS"
OPERATOR_LEVELS: dict[str, dict[str, bool]] = {"stacks": {"record_shapes": True, "with_stack": True},
                                               "shapes": {"record_shapes": True}, "off": {}}
DEFAULT_OPERATORS = "stacks"


def operator_options() -> dict[str, bool]:
    """The profiler's options for the level $KERNELSCOPE_OPERATORS names (default: shapes and stacks)."""
    return dict(OPERATOR_LEVELS.get(os.environ.get(OPERATORS_ENV, DEFAULT_OPERATORS),
                                    OPERATOR_LEVELS[DEFAULT_OPERATORS]))


SAMPLE_MARGIN_NS = 250_000_000  # a --steps session keeps the GPU samples up to this long after the window's last event


class TraceRecorder:
    """Starts and stops the PyTorch profiler; turns its trace into session data.

    Never raises for a missing collector: the reason goes into
    ``session.collectors`` and the workload still runs.
    """

    def __init__(self, session: Session, keep_trace: str | None = None, sample_interval_ms: float | None = None,
                 step_window: tuple[int, int] | None = None, memory: bool = False) -> None:
        self.session = session
        self.step_window = step_window  # (first, last): record only those steps (kernelscope.step() ends one)
        self._steps: steps.StepCounter | None = None
        self._marks: marks.MarkLog | None = None
        self._memory = MemoryRecorder(session) if memory else None
        self._window_trace: str | None = None  # the trace the windowed profiler exported when the window closed
        self.keep_trace = keep_trace
        self.sample_interval_ms = sample_interval_ms  # None: $KERNELSCOPE_SAMPLE_INTERVAL_MS or 100 ms; 0: off
        self._sampler: sampler.GpuSampler | None = None
        self._prof: Any = None
        self._torch: Any = None
        self._declared: regions.DeclaredWorkLog | None = None  # region(..., flops=, bytes=) entries while recording
        self._step_range: Any = None  # the open ProfilerStep#N range of a run without a window (_mark_step)

    def start(self) -> None:
        # Steps and marks are counted whatever else runs: a window outside the run still says which steps ran.
        self._steps = steps.start_counter(self.step_window)
        self._marks = marks.start_mark_log()
        if self._memory is not None:
            if self.step_window is None:
                self._memory.start()
            else:
                self._steps.on_open.append(self._memory.start)
                self._steps.on_close.append(self._memory.take)
        try:
            import torch
            from torch.profiler import ProfilerActivity, profile
        except ImportError:
            self._not_run("torch is not installed in this Python; the trace pass uses the PyTorch profiler (CUPTI)")
            return
        self._torch = torch
        ok, why = driver.gpu_available()
        if not ok:
            self._not_run(f"{why}, so there are no kernels to trace")
            return
        activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
        if self.step_window is None:
            self._prof = profile(activities=activities, **operator_options())
            self._steps.on_step.append(self._mark_step)
        else:
            self._prof = steps.windowed_profiler(torch, activities, self.step_window, self._trace_ready,
                                                 **operator_options())
            self._steps.on_step.append(self._profiler_step)
        with profiler_notices_silenced():  # torch's notes on how kernelscope uses the profiler, not on the workload
            self._prof.__enter__()
        self._steps.begin()
        if self.step_window is None:
            self._mark_step(0)
        self._declared = regions.start_declared_work_log()
        # After the profiler starts, so samples begin with the trace (started before it, the samples
        # would also cover the profiler's start-up, seconds in which nothing is traced yet).
        self._sampler = sampler.start_for_session(self.session, self.sample_interval_ms)

    def _profiler_step(self, ended: int) -> None:
        assert self.step_window is not None
        if ended == self.step_window[1] + 1:  # the window's last step ended: its kernels finish before the trace stops
            self._torch.cuda.synchronize()
        with profiler_notices_silenced():
            self._prof.step()

    def _mark_step(self, step: int) -> None:
        """Without a window, each step is still a range named as torch.profiler names its steps (ProfilerStep#N,
        opened on the thread that calls kernelscope.step()), so the verdict can tell steps apart."""
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None
        if self._prof is None or self._steps is None or self._steps.closed:
            return
        r = self._torch.profiler.record_function(f"ProfilerStep#{step}")
        r.__enter__()
        self._step_range = r

    def _trace_ready(self, prof: Any) -> None:
        fd, path = tempfile.mkstemp(prefix="kernelscope-window-", suffix=".json")
        os.close(fd)
        prof.export_chrome_trace(path)
        self._window_trace = path

    def stop(self) -> None:
        if self._steps is not None:
            self._steps.close()  # a run that ends inside the window: its memory snapshot is taken now
        if self._memory is not None and self.step_window is None:
            self._memory.take()  # no window: the history covers the whole run
        if self._prof is None:
            self._record_device(None)
        else:
            self._stop_trace()
        self._finish_steps_marks_memory()

    def _finish_steps_marks_memory(self) -> None:
        s = self.session
        if self._marks is not None:
            s.marks = marks.stop_mark_log(self._marks)
            for m in s.marks:
                m.t_ns = m.wall_time_ns - s.time_origin_ns if s.time_origin_ns else None
            self._marks = None
        if self._memory is not None:
            self._memory.finish()
        c = self._steps
        if c is None:
            return
        steps.stop_counter(c)
        self._steps = None
        if self.step_window is None:
            return
        first, last = self.step_window
        recorded = c.recorded()
        s.steps = StepWindow(first, last, c.ended, *(recorded or (None, None)))
        if recorded is None:
            s.collectors[collector.STEPS] = CollectorStatus("not-run", steps.steps_ran_sentence(first, last, c.ended),
                                                            {"steps_run": c.ended})
            return
        s.collectors[collector.STEPS] = CollectorStatus(
            "ok" if recorded == self.step_window else "partial",
            None if recorded == self.step_window else f"the run ended in step {recorded[1]}, inside the window",
            {"steps_run": c.ended, "recorded": list(recorded)})
        if s.samples and s.time_origin_ns:  # the window's samples only: a long job makes a small session
            ends = [x.start_ns + x.duration_ns for x in s.launches if x.start_ns is not None]
            ends += [r.cpu_start_ns + r.cpu_duration_ns for r in s.regions]
            hi = max(ends, default=0) + SAMPLE_MARGIN_NS
            s.samples = [x for x in s.samples if x.t_ns is not None and 0 <= x.t_ns <= hi]

    def _stop_trace(self) -> None:
        if self._step_range is not None:  # the last step ends with the program
            self._step_range.__exit__(None, None, None)
            self._step_range = None
        status = CollectorStatus("ok")
        try:
            self._torch.cuda.synchronize()
        except Exception as e:  # a failed kernel poisons the context; keep what the profiler has
            status = CollectorStatus("partial", f"CUDA synchronize failed after the workload: {e}")
        with profiler_notices_silenced():
            self._prof.__exit__(None, None, None)
        if self._declared is not None:
            self.session.declared_work = regions.stop_declared_work_log(self._declared)
            self._declared = None
        sampler.finish_for_session(self._sampler, self.session)
        if self.step_window is not None and self._window_trace is None:
            why = steps.steps_ran_sentence(*self.step_window, self._steps.ended if self._steps else 0)
            self.session.collectors[collector.TRACE] = CollectorStatus("not-run", why)
            self._record_device(None)
            return
        fd, path = tempfile.mkstemp(prefix="kernelscope-trace-", suffix=".json")
        os.close(fd)
        try:
            if self._window_trace is not None:
                os.replace(self._window_trace, path)
            else:
                self._prof.export_chrome_trace(path)
            parsed = read_trace(path, bounded=False).parsed  # event by event; the profiler's file, unbounded
        except (OSError, ValueError, TraceFormatError) as e:
            self.session.collectors[collector.TRACE] = CollectorStatus(
                "failed", f"the PyTorch profiler trace could not be read: {e}"
            )
            self._record_device(None)
            return
        finally:
            if self.keep_trace:
                _keep(path, self.keep_trace)
            os.unlink(path)
        s = self.session
        s.set_launch_table(parsed.table)  # launches stay columns: a long run holds a million of them
        s.activities, s.regions = parsed.activities, parsed.regions
        s.host_syncs, s.operators = parsed.host_syncs, parsed.operators
        s.time_origin_ns = parsed.time_origin_ns
        sampler.place_on_session_clock(s)
        attach_pending(s)  # block records submitted by instrumented kernels (collect/instrument)
        scope_sink.attach_pending(s)  # phase scopes recorded with Proton (collect/instrument/proton_scopes)
        s.environment.update({"torch": self._torch.__version__, **parsed.info})
        status.details = {"kernel_launches": len(parsed.table), "collector": "torch.profiler (Kineto/CUPTI)"}
        if not len(parsed.table):
            status = CollectorStatus("ok", "the workload launched no CUDA kernels while profiled", status.details)
        if parsed.problems:  # the trace held events it could not use: say so, never pass them off as complete
            status = CollectorStatus("partial", "; ".join(parsed.problems), status.details)
        s.collectors[collector.TRACE] = status
        devices: Counter[int] = Counter()
        for sid, launches in enumerate(parsed.table.durations_by_shape()[0]):  # per shape, not per launch
            if parsed.table.shapes[sid].device_index is not None:
                devices[parsed.table.shapes[sid].device_index] += len(launches)
        index = devices.most_common(1)[0][0] if devices else self._torch.cuda.current_device()
        fallback = next((d for d in parsed.devices if d.index == index), None)
        self._record_device(index, fallback)
        if len(devices) > 1:
            s.environment["devices_with_kernels"] = sorted(devices)

    def _not_run(self, reason: str) -> None:
        self.session.collectors[collector.TRACE] = CollectorStatus("not-run", reason)
        self.session.collectors[collector.SAMPLER] = CollectorStatus(
            "not-run", f"no trace pass to sample alongside: {reason}"
        )

    def _record_device(self, index: int | None, fallback: Device | None = None) -> None:
        s = self.session
        try:
            ordinal = 0 if index is None else int(index)
            if index is None and driver.device_count() == 0:
                raise driver.DriverUnavailable("the CUDA driver reports no devices")
            s.device = driver.query_device(ordinal)
            s.collectors[collector.DEVICE] = CollectorStatus(
                "ok", details={"source": "CUDA driver (cuDeviceGetAttribute)"}
            )
        except driver.DriverUnavailable as e:
            s.device = fallback
            how = "; using the device properties in the profiler trace" if fallback else ""
            s.collectors[collector.DEVICE] = CollectorStatus("partial" if fallback else "not-run", f"{e}{how}")
            if s.device is None:
                s.collectors[collector.NVML] = CollectorStatus("not-run", "no CUDA device to sample")
                return
        metrics, reason = nvml.snapshot(s.device.value("pci_bus_id_string"), s.device.index)
        s.device.attributes.update(metrics)
        s.collectors[collector.NVML] = CollectorStatus("not-run", reason) if reason else CollectorStatus(
            "ok", details={"what": "one snapshot at the end of the run"})


KEEP_TRACE_NO_CLOBBER = "KERNELSCOPE_KEEP_TRACE_NO_CLOBBER"


def _keep(path: str, keep: str) -> None:
    """--keep-trace: the profiler's trace copied through the one write helper (model/files.write_atomic): across
    file systems, never over a device or FIFO, and onto an existing file only when `run` was given -f (the parent
    says so through KEEP_TRACE_NO_CLOBBER); a failure is said, the session is still written."""
    force = os.environ.get(KEEP_TRACE_NO_CLOBBER) != "1"
    try:
        with open(path, "rb") as src:
            write_atomic(keep, lambda f: shutil.copyfileobj(src, f), force=force)
    except (OSError, OutputFileError) as e:
        print(f"kernelscope: note: the trace was not kept: {visible(str(e))}.", file=sys.stderr)
