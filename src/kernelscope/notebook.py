"""`kernelscope.load("s.json")`: a saved session for notebooks. In Jupyter it shows the report's summary
(session, kernel table, each kernel's verdict); `.kernels_df()`, `.launches_df()`, `.counters_df()`,
`.collectives_df()` and `.memory_df()` are pandas DataFrames (pandas: `pip install 'kernelscope[pandas]'`);
`.report` is the analyze.report.Report every renderer draws, and `.html()` the full self-contained page."""
from __future__ import annotations

import os

from kernelscope.model import Session
from kernelscope.model.escape import visible


class LoadedSession:
    def __init__(self, session: Session, path: str = "", kernel_regex: str | None = None, top: int = 3) -> None:
        self.session, self.path = session, path
        self._selection = (kernel_regex, top)
        self._report = None

    @property
    def report(self):
        """analyze.report.Report of the session (built once, on first use), with the cached ceilings of its GPU."""
        if self._report is None:
            from kernelscope.analyze.report import build_report
            from kernelscope.collect.calibrate.lookup import ceilings_for_session

            self._report = build_report(self.session, *self._selection, ceilings_for_session(self.session))
        return self._report

    def _repr_html_(self) -> str:
        from kernelscope.render.html import render_summary_html

        return render_summary_html(self.report)

    def __repr__(self) -> str:
        s = self.session
        return visible(f"<kernelscope session {self.path or '(in memory)'}: {len(s.launches):,} launches, "
                       f"{len({x.kernel for x in s.launches}):,} kernels, "
                       f"{s.device.name if s.device else 'no device'}>")  # the device name is from the file

    def html(self) -> str:
        from kernelscope.render.html import render_html

        return render_html(self.report)

    def kernels_df(self):
        from kernelscope.render.frames import kernels_df

        return kernels_df(self.report)

    def operators_df(self):
        """The aten ops behind the kernels: inputs, the user's Python line, FLOPs, bytes and achieved rates."""
        from kernelscope.render.frames import operators_df

        return operators_df(self.report)

    def launches_df(self):
        from kernelscope.render.frames import launches_df

        return launches_df(self.session)

    def counters_df(self):
        from kernelscope.render.frames import counters_df

        return counters_df(self.session)

    def collectives_df(self):
        from kernelscope.render.frames import collectives_df

        return collectives_df(self.session, self.report.ranks)

    def memory_df(self):
        """The caching allocator's events of `run --memory`, with the bytes allocated and reserved after each."""
        from kernelscope.analyze.memory import allocator_series
        from kernelscope.render.frames import memory_df

        h = self.session.memory
        if h is None:
            return memory_df(None, None, "the session has no allocator history (record it with run --memory)")
        return memory_df(h, allocator_series(h))


def load(path: str | os.PathLike[str], kernel: str | None = None, top: int = 3) -> LoadedSession:
    """A session file as a LoadedSession; ``kernel`` (regex) / ``top`` choose the kernels with panels.
    A missing or damaged file raises model.SessionFileError with one sentence."""
    return LoadedSession(Session.load(path), str(path), kernel, top)
