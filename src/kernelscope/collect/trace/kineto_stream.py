"""Read a PyTorch profiler (Kineto) Chrome trace event by event, in memory that follows the session it builds.

The document is read in chunks (gzip decompressed as a stream, both bounded by the input limit of
model/files.py); the top-level object is walked by hand, the elements of `traceEvents` decoded a run at a time
(the whole events a chunk holds, by one call of the C decoder; an event the chunk's end cuts, or a run that does
not decode, one element at a time), and each event is dropped once read: only what the session needs is kept, as
the session will hold it. Kernels become launch rows in int64 columns (what launches of one configuration share
built once), copies and memsets activities, runtime calls their launch sites in int64 columns; of the calls that
block the host and the annotations, the fields the parse reads. Elements that are not objects are counted and
passed undecoded, a run at a time; an event over _MAX_EVENT characters is passed and counted as malformed. Of
the other top-level keys, those the import reads (TOP_KEYS: `deviceProperties`, `distributedInfo`,
`baseTimeNanoseconds`, ...) are kept wherever they appear, up to _MAX_VALUE characters each; the rest are passed
undecoded, a chunk at a time. Every part of the input is searched and decoded a bounded number of times, so the
cost is linear in the input and the memory follows what is kept, for any kind of element. Damage is reported
from a window of the buffer's end, never after buffering the rest of the file. The result is what ``parse_trace``
gives for the whole document (tests/test_kineto_stream.py checks it on every recorded trace). A document damaged
after some events keeps those events and names the damage in one sentence among the parse problems.
"""
from __future__ import annotations

import codecs
import gc
import json
import os
import re
import stat
import zlib
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from kernelscope.collect.trace import kineto as K
from kernelscope.collect.trace.host_syncs import ASYNC_COPY_CALLS, SYNC_CALLS, SYNC_COPY_CALLS
from kernelscope.collect.trace.kineto_dist import as_int
from kernelscope.collect.trace.kineto_ops import GRAPH_LAUNCH_CALLS, OperatorEvents, link_operators
from kernelscope.model import Activity
from kernelscope.model.files import (InputFileError, check_input, file_type, input_limit_bytes, input_too_large,
                                     read_input)

_CHUNK = 1 << 18  # a run of events decoded at once stays in the cache
_WS = re.compile(r"[ \t\n\r]*")
_CUT = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*(?=\{)")  # between two objects of an array, most likely
_TAIL = 1 << 14  # how far from the buffer's end a cut is looked for first
_DECODER = json.JSONDecoder()
_NEAR = 32  # a decode error this close to the buffer's end may be the cut, not damage
_MAX_VALUE = 4 << 20  # characters of one kept top-level value; a longer one is passed, not decoded
_MAX_EVENT = 1 << 20  # characters of one event decoded on its own; a longer one is passed and counted
TOP_KEYS = frozenset({"baseTimeNanoseconds", "deviceProperties", "distributedInfo", "cuda_driver_version",
                      "cuda_runtime_version", "cupti_version"})  # the top-level keys the import reads
_TOO_BIG = object()
_OPENERS = ("[", "{", '"')
_OVERSIZED = object()
# Passing a value undecoded: strings, the text between brackets and quotes, and containers of them nested a few
# deep, matched in C; only deeper brackets cost a step in Python. Possessive: nothing is matched twice. Between
# brackets only control characters are refused (the scalars themselves are not checked there).
_SCALAR = r"-?\d++(?:\.\d++)?+(?:[eE][+-]?+\d++)?+|true|false|null"
_STR = r'"(?:[^"\\]++|\\.)*+"'
_BETWEEN = r'[^"\[\]{}\x00-\x08\x0b\x0c\x0e-\x1f]++'


def _tokens(depth: int) -> str:
    inner = rf"(?:{_BETWEEN}|{_STR})"
    for _ in range(depth):
        inner = rf"(?:{_BETWEEN}|\[{inner}*+\]|\{{{inner}*+\}}|{_STR})"
    return inner


_FLAT = re.compile(rf"{_tokens(4)}*+")
_SKIPPABLE = re.compile(rf"[ \t\n\r]*+(?:{_SCALAR}|{_STR}|\[{_tokens(3)}*+\])[ \t\n\r]*+,[ \t\n\r]*+")
_SKIPPABLE_RUN = re.compile(rf"(?:{_SKIPPABLE.pattern})*+")
_STR_BODY = re.compile(r'(?:[^"\\]++|\\.)*+')
_SCALAR_START = re.compile(r"true|false|null|-?\d")
_NUMBER_REST = re.compile(r"[0-9.eE+-]*+")


def _wide_int(text: str) -> int | float:
    """An integer of JSON text; one of more digits than int() converts is read as infinity (as json reads 1e400),
    so it is refused where it is used, like any number out of range."""
    try:
        return int(text)
    except ValueError:
        return float("-inf") if text.startswith("-") else float("inf")


_WIDE_DECODER = json.JSONDecoder(parse_int=_wide_int)


def _raw_decode(text: str, pos: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer past int()'s digit limit: decoded again, it alone read as infinity
        return _WIDE_DECODER.raw_decode(text, pos)


def _decode(text: str) -> Any:
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError:
        raise
    except ValueError:
        return _WIDE_DECODER.decode(text)
_HOST_SYNC_NAMES = frozenset(SYNC_CALLS) | SYNC_COPY_CALLS | ASYNC_COPY_CALLS
_PID_CATEGORIES = ("cpu_op", "user_annotation", "cuda_runtime")
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_MISSING = object()


class NotKinetoTrace(K.TraceFormatError):
    """The file is JSON but has no traceEvents list."""


class _Damaged(Exception):
    def __init__(self, pos: int, msg: str) -> None:
        self.pos, self.msg = pos, msg
        super().__init__(msg)


# ---------------------------------------------------------------------------------------------------- input

def _open_text(path: Path, bounded: bool = True) -> tuple[BinaryIO, Iterator[bytes]]:
    """The file (gzip or not) as byte chunks, bounded by the input limit unless ``bounded`` is false (the trace
    pass's own export); raises InputFileError as read_input does."""
    p = Path(path)
    limit = input_limit_bytes() if bounded else None
    if bounded:
        check_input(p)
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    f = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise InputFileError(p, f"is {file_type(os.fstat(fd).st_mode)}, not a regular file; give a file on disk")
    gz = f.read(2) == b"\x1f\x8b"
    f.seek(0)
    return f, _bounded(_inflated(f, p) if gz else _raw(f), p, limit, gz)


def _raw(f: BinaryIO) -> Iterator[bytes]:
    while True:
        b = f.read(_CHUNK)
        if not b:
            return
        yield b


def _inflated(f: BinaryIO, p: Path) -> Iterator[bytes]:
    """Gzip members (one or more) inflated a bounded piece at a time: a bomb never outgrows one chunk."""
    z = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending, fed = b"", False
    for b in _raw(f):
        pending += b
        while pending:
            fed = True
            try:
                out = z.decompress(pending, _CHUNK)
            except zlib.error:
                raise _gzip_damaged(p) from None
            pending = z.unconsumed_tail
            if out:
                yield out
            if z.eof:
                rest = z.unused_data + pending
                z = zlib.decompressobj(16 + zlib.MAX_WBITS)
                pending, fed = rest.lstrip(b"\0"), False  # padding after a member, as GzipFile allows
            elif not out and not pending:
                break
    if fed and not z.eof:
        raise _gzip_damaged(p)


def _gzip_damaged(p: Path) -> InputFileError:
    return InputFileError(p, "is damaged: its gzip data is cut short or corrupt", damaged=True)


def _bounded(chunks: Iterator[bytes], p: Path, limit: int | None, gz: bool) -> Iterator[bytes]:
    total = 0
    for b in chunks:
        total += len(b)
        if limit is not None and total > limit:  # a gzip bomb stops here, one chunk past the limit
            raise input_too_large(p, limit, gz)
        yield b


# ---------------------------------------------------------------------------------------------------- parser

class _Reader:
    """The top-level object of a JSON document, read incrementally: non-event keys into ``top``, each element of
    `traceEvents` to ``sink``."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self.dec = codecs.getincrementaldecoder("utf-8")("strict")
        self.buf = ""
        self.pos = 0
        self.base = 0  # characters dropped from the front of buf
        self.eof = False
        self.first = True
        self.error: Exception | None = None
        self.left_out: list[str] = []  # top-level keys passed for being over _MAX_VALUE characters

    def _more(self, at_least: int = 0) -> bool:
        """Append the next chunk(s); False at the end of the data."""
        if self.eof:
            return False
        if self.error is not None:  # the data stopped being readable after what was handed out
            raise self.error
        if self.pos > 0:
            self.base += self.pos
            self.buf = self.buf[self.pos:]
            self.pos = 0
        want = max(at_least, _CHUNK)
        got = 0
        parts = [self.buf]
        while got < want:
            try:
                text = self._next_text()
            except (InputFileError, UnicodeDecodeError) as e:
                if not got:
                    raise
                self.error = e  # raised once what came before it is read
                break
            if text is None:
                self.eof = True
                break
            parts.append(text)
            got += len(text)
        self.buf = "".join(parts)
        return got > 0 or self.eof

    def _next_text(self) -> str | None:
        """The next chunk as text; None at the end of the data."""
        try:
            b = next(self.chunks)
        except StopIteration:
            self.dec.decode(b"", final=True)  # "" or UnicodeDecodeError: a character cut at the end
            return None
        if self.first:
            self.first = False
            encoding = json.detect_encoding(b[:4])  # as json.loads detects it: UTF-8, -16 or -32, with a BOM or not
            if encoding == "utf-8-sig":
                b = b[3:]
            elif encoding != "utf-8":
                self.dec = codecs.getincrementaldecoder(encoding)("strict")
        return self.dec.decode(b)

    def _where(self) -> int:
        return self.base + self.pos

    def _ws(self) -> None:
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or not self._more():
                return

    def _char(self) -> str:
        self._ws()
        return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def _value(self) -> Any:
        """One JSON value at pos, decoded; more is read while it may be cut by the chunk's end. An error far from
        the buffer's end is damage at once (the rest of the file is not buffered to find it)."""
        while True:
            try:
                v, end = _raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if (e.msg.startswith("Unterminated string") or len(self.buf) - e.pos <= _NEAR) and self._more(
                        len(self.buf)):
                    continue  # maybe the cut
                raise _Damaged(self.base + e.pos, e.msg) from None
            except RecursionError:
                raise _Damaged(self._where(), "nested too deeply") from None
            if end >= len(self.buf) and not self.eof and self._more(len(self.buf)):
                continue  # a number or literal may go on in the next chunk (the buffer doubled: no rescan per chunk)
            self.pos = end
            return v

    def _kept(self, limit: int) -> Any:
        """The value at pos, decoded once it is known to end within ``limit`` characters (a container or string
        is walked first, undecoded, so one that does not is never decoded, even in part); else _TOO_BIG, the
        value passed."""
        if self._char() not in _OPENERS:
            return self._value()
        if self._walk(limit) is None:
            return _TOO_BIG
        try:
            v, end = _raw_decode(self.buf, self.pos)
        except json.JSONDecodeError as e:  # whole in the buffer: not a cut
            raise _Damaged(self.base + e.pos, e.msg) from None
        except RecursionError:
            raise _Damaged(self._where(), "nested too deeply") from None
        self.pos = end
        return v

    def _skip_value(self) -> None:
        """Pass the value at pos without decoding it, a chunk at a time (what it passes is dropped): brackets
        matched, strings closed, no control character outside a string; the scalars inside are not checked."""
        if self._char() in _OPENERS:
            self._walk(None)
        else:
            self._skip_scalar()

    def _bracket(self, c: str, stack: list[str], i: int) -> bool:
        """A bracket or quote at buffer index ``i`` while walking: the stack of closers kept; True for a quote."""
        if c == "[" or c == "{":
            stack.append("]" if c == "[" else "}")
        elif c == "]" or c == "}":
            if stack.pop() != c:
                raise _Damaged(self.base + i, "Expecting value")
        elif c == '"':
            return True
        else:
            raise _Damaged(self.base + i, "Invalid control character")
        return False

    def _walk(self, limit: int | None) -> int | None:
        """Walk the container or string at pos (checked as _skip_value checks it). With ``limit``, the buffer
        keeps it from pos: its absolute end is returned if it ends within ``limit`` characters, pos unmoved.
        Without one, or past it, what is passed is dropped: None, pos after the value."""
        start = self._where()
        i = self.pos
        c = self.buf[i]
        i += 1
        in_str = c == '"'
        stack = [] if in_str else ["]" if c == "[" else "}"]
        keep = limit is not None
        while True:
            buf = self.buf
            if in_str:
                i = _STR_BODY.match(buf, i).end()
                if i < len(buf) and buf[i] == '"':
                    i += 1
                    in_str = False
                    if not stack:
                        break
                    continue
                if i < len(buf) - 1:
                    raise _Damaged(self.base + i, "Invalid \\escape")
            else:
                i = _FLAT.match(buf, i).end()  # text, strings and shallow containers, in C
                if i < len(buf):
                    in_str = self._bracket(buf[i], stack, i)
                    i += 1
                    if not stack and not in_str:
                        break
                    continue
            at = self.base + i  # the buffer's end, or a backslash cut from its character: more is read
            if keep and at - start > limit:
                keep = False
            if not keep:
                self.pos = i  # dropped
            if not self._more():
                raise _Damaged(at, "Unterminated string" if in_str else "Expecting value")
            i = at - self.base
        if keep:
            return self.base + i
        self.pos = i
        return None

    def _skip_scalar(self) -> None:
        m = _SCALAR_START.match(self.buf, self.pos)
        while m is None and len(self.buf) - self.pos < 5 and self._more():  # a literal the chunk's end cuts
            m = _SCALAR_START.match(self.buf, self.pos)
        if m is None:
            raise _Damaged(self._where(), "Expecting value")
        self.pos = m.end()
        while True:  # the rest of a number, of any length
            self.pos = _NUMBER_REST.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or not self._more():
                return

    def read(self, top: dict[str, Any], on_events: Any) -> None:
        """Walk the document; raises _Damaged where it stops being JSON, NotKinetoTrace for JSON that is not an
        object.
        Only the keys of TOP_KEYS are decoded (each up to _MAX_VALUE characters; a longer one is passed and
        named in ``left_out``); the others are passed without being decoded or held."""
        c = self._char()
        if c != "{":  # JSON, but not a trace: passed undecoded, so that what it is can be said
            self._skip_value()
            self._end()
            raise NotKinetoTrace("not a PyTorch profiler trace: no traceEvents list")
        self.pos += 1
        if self._char() == "}":
            self.pos += 1
            return self._end()
        while True:
            if self._char() != '"':
                raise _Damaged(self._where(), "Expecting property name enclosed in double quotes")
            key = self._kept(_MAX_VALUE)  # a longer key is no key the import reads: its value is passed
            if self._char() != ":":
                raise _Damaged(self._where(), "Expecting ':' delimiter")
            self.pos += 1
            if self._char() == "":
                raise _Damaged(self._where(), "Expecting value")
            if key == "traceEvents" and self._char() == "[":
                self.pos += 1
                top[key] = on_events(self._elements())
            elif key in TOP_KEYS or key == "traceEvents":
                v = self._kept(_MAX_VALUE)
                if v is _TOO_BIG:
                    self.left_out.append(key)
                    top.pop(key, None)
                else:
                    top[key] = v
            else:
                self._skip_value()
            c = self._char()
            self.pos += 1
            if c == "}":
                return self._end()
            if c != ",":
                raise _Damaged(self._where() - 1, "Expecting ',' delimiter")

    def _elements(self) -> Iterator[Any]:
        """The elements of the array at pos: lists of decoded objects (a run of whole objects in the buffer is
        decoded by one call of the C decoder, as json.load does; the object the buffer's end cuts, or one the run
        cannot decode, on its own), the count of elements that are not objects (passed undecoded, a run at a
        time), or _OVERSIZED for an object longer than _MAX_EVENT characters (passed)."""
        if self._char() == "]":
            self.pos += 1
            return
        slow_until = -1  # where a run could not be decoded: read element by element up to there
        while True:
            if not self.eof and self.error is None and len(self.buf) - self.pos < _CHUNK // 2:
                self._more()
            c = self._char()
            if c == "{":
                if self._where() >= slow_until:
                    items, at = self._run()
                    if items is not None:
                        self.pos = at
                        yield items
                        continue
                    slow_until = at
                v = self._kept(_MAX_EVENT)
                if v is _TOO_BIG:
                    yield _OVERSIZED
                else:
                    yield [v]
            else:
                m = _SKIPPABLE_RUN.match(self.buf, self.pos)
                if m.end() > self.pos:  # elements that are not objects, each with its ',': counted, not decoded
                    n = _SKIPPABLE.subn("", m.group())[1]
                    self.pos = m.end()
                    yield n
                    continue
                self._skip_value()
                yield 1
            c = self._char()
            self.pos += 1
            if c == "]":
                return
            if c != ",":
                raise _Damaged(self._where() - 1, "Expecting ',' delimiter")
            self._ws()

    def _run(self) -> tuple[list[Any] | None, int]:
        """The whole elements from pos up to the last '}' the buffer holds that ',' and '{' follow: (the
        elements, the position of that '{'); else (None, the absolute position up to which elements are to be
        read one at a time: a '}' before which the run does not decode, or the buffer's end where no such '}'
        is), so no part of the buffer is searched or decoded again for every element. A cut inside an element
        cannot decode (its brackets or its string do not close): a cut the decoder stops at is tried again at an
        earlier '}', a few times."""
        buf, pos = self.buf, self.pos
        tail = max(pos, len(buf) - _TAIL)
        cuts = [(m.start(), m.end()) for m in _CUT.finditer(buf, tail)]
        if not cuts and tail > pos:
            cuts = [(m.start(), m.end()) for m in _CUT.finditer(buf, pos)]
        if not cuts:
            return None, self.base + len(buf)
        for k, nxt in reversed(cuts[-4:]):
            text = "[" + buf[pos:k + 1] + "]"
            try:
                return _decode(text), nxt
            except json.JSONDecodeError as e:
                if e.pos < len(text) - 1:  # not the cut: something in the run itself
                    return None, self.base + k
            except RecursionError:
                return None, self.base + k
        return None, self.base + cuts[-1][0]

    def _end(self) -> None:
        if self._char() != "":
            raise _Damaged(self._where(), "Extra data")


# ---------------------------------------------------------------------------------------------------- events

class _Events:
    """What parse_trace uses of the trace's events, collected one event at a time and kept as the session will
    hold it: kernels as launch rows (kineto._KernelRows), copies and memsets as activities, the launch calls'
    sites as int64 columns; the few other events the parse reads (annotations, calls that may block the host,
    GPU copies) as they are."""

    def __init__(self) -> None:
        self.origin_us: float | None = None
        self.sites = _Sites()
        self.gpu_annotation_by_ext: dict[Any, dict[str, Any]] = {}
        self.annotations: list[dict[str, Any]] = []
        self.rows = K._KernelRows()
        self.kernel_error: Exception | None = None  # the first a kernel raised that ends the parse
        self.copies = _Copies()  # memcpy / memset activities
        self.memcpys: list[dict[str, Any]] = []  # GPU copies, trimmed to what host_syncs reads of them
        self.calls: list[dict[str, Any]] = []  # runtime calls that may block the host
        self.ops = OperatorEvents()  # cpu_op and python_function events, for the operators behind launches
        self.bad: list[str] = []
        self.pid: Any = _MISSING
        self.origin_error: Exception | None = None
        self.read = 0

    def feed(self, batches: Iterator[list[Any]]) -> "_Events":
        handlers = {"kernel": self._kernel, "cuda_runtime": self._call, "cuda_driver": self._call,
                    "user_annotation": self._annotation, "gpu_user_annotation": self._gpu_annotation,
                    "gpu_memcpy": self._copy, "gpu_memset": self._copy, "cpu_op": self.ops.add,
                    "python_function": self.ops.add}
        handler, want_pid, origin = handlers.get, self.pid is _MISSING, self.origin_us
        for batch in batches:
            if type(batch) is int:  # elements that are not objects: counted, never decoded
                self.read += batch
                continue
            if batch is _OVERSIZED:
                self.read += 1
                self.bad.append("oversized")
                continue
            self.read += len(batch)
            for e in batch:
                if type(e) is not dict:
                    continue
                cat = e.get("cat")
                if want_pid and cat in _PID_CATEGORIES:
                    self.pid, want_pid = e.get("pid"), False
                if e.get("ph") != "X":
                    continue
                if cat != "Trace":
                    ts = e.get("ts")
                    if type(ts) is not float or origin is None or not ts >= origin:
                        self._origin(ts)  # else a later finite time, or infinity: not the origin
                        origin = self.origin_us
                if type(cat) is str:  # else no category any part of the parse reads
                    h = handler(cat)
                    if h is not None:
                        h(e)
        return self

    def _origin(self, ts: Any) -> None:
        try:
            if K._is_time(ts):
                t = float(ts)
                if self.origin_us is None or t < self.origin_us:
                    self.origin_us = t
        except OverflowError as x:  # raised where parse_trace raises it: after baseTimeNanoseconds is read
            if self.origin_error is None:
                self.origin_error = x

    def _annotation(self, e: dict[str, Any]) -> None:
        self.annotations.append(_slim(e, _ANNOTATION_KEYS, ("External id",)))

    def _gpu_annotation(self, e: dict[str, Any]) -> None:
        try:
            ext = (e.get("args") or {}).get("External id")
            if ext is not None and ext not in self.gpu_annotation_by_ext:
                self.gpu_annotation_by_ext[ext] = _slim(e, ("ts", "dur"), ())
        except K._MALFORMED:  # no args dict, an unhashable id: as the whole-document parser skips it
            pass

    def _copy(self, e: dict[str, Any]) -> None:
        cat = e["cat"]
        try:
            args = e.get("args") or {}
            name = str(e.get("name"))
            self.copies.add(cat[4:], name, K._ns(e["ts"]), K._ns(e.get("dur", 0)), args.get("bytes"),
                            args.get("stream"))
        except K._MALFORMED:
            self.bad.append("memcpy/memset")
        if cat == "gpu_memcpy":
            args = e.get("args")
            if isinstance(args, dict):
                args = {k: args[k] for k in ("correlation",) if k in args}
            slim = {k: e[k] for k in ("cat", "name") if k in e}
            if "args" in e:
                slim["args"] = args
            self.memcpys.append(slim)

    def _call(self, e: dict[str, Any]) -> None:
        args, ts = e.get("args"), e.get("ts")
        corr = args.get("correlation") if type(args) is dict else _MISSING
        sites = self.sites
        if type(corr) is int and type(ts) is float and sites.fast:  # the usual call: columns, no objects
            pid, tid = e.get("pid"), e.get("tid")
            t = sites.threads.get((pid, tid)) if type(pid) is int and type(tid) is int else None
            ns = int(round(ts * 1000.0)) if ts - ts == 0.0 else None
            if t is not None and ns is not None and _INT64[0] <= corr <= _INT64[1] and -K.MAX_TIME_NS <= ns <= (
                    K.MAX_TIME_NS):
                if corr <= sites.last:
                    sites.increasing = False
                sites.last = corr
                sites.corr.append(corr)
                sites.ts.append(ns)
                sites.thread.append(t)
                corr = None
        if corr is not None:
            try:
                corr = (args or {}).get("correlation")
                if corr is not None:
                    sites.add(int(corr), e.get("pid"), e.get("tid"), K._ns(e["ts"]))
            except K._MALFORMED:
                pass
        name = e.get("name")
        if isinstance(name, str) and name in _HOST_SYNC_NAMES:
            self.calls.append(_slim(e, _CALL_KEYS, ("correlation",)))
        elif name in GRAPH_LAUNCH_CALLS:
            self.ops.runtime_call(e)

    def _kernel(self, e: dict[str, Any]) -> None:
        try:
            self.rows.add(e, e.get("args") or {})
        except K._MALFORMED:
            self.bad.append("kernel")
        except K.TraceFormatError as x:
            if self.kernel_error is None:
                self.kernel_error = x


_ANNOTATION_KEYS = ("cat", "name", "ph", "pid", "tid", "ts", "dur")  # what kineto._region reads
_CALL_KEYS = ("cat", "name", "ph", "ts", "dur", "pid", "tid")  # what host_syncs and the operators' link read


def _slim(e: dict[str, Any], keys: tuple[str, ...], arg_keys: tuple[str, ...]) -> dict[str, Any]:
    """The parts of an event a later step reads (its keys, and its args' arg_keys); the rest of the event is not
    kept. Args that are not a dict keep what the step makes of them: a false one reads as no args, a true one
    (a list, a string of any length) is a stand-in of its kind, which the step refuses as before."""
    out = {k: e[k] for k in keys if k in e}
    if "args" in e:
        args = e["args"]
        out["args"] = ({k: args[k] for k in arg_keys if k in args} if type(args) is dict else
                       _NOT_A_DICT if args else args)
    return out


_NOT_A_DICT = (None,)  # true, and not a dict: args.get() raises AttributeError, as for any such args


class _Copies:
    """memcpy / memset activities as columns while the trace is read (int64 times, what repeats, kind, name,
    bytes and stream, numbered), built as Activity objects at the end, next to each other: objects made one by
    one between the events would each keep a page of the freed events in use."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.parts: list[tuple[str, str, Any, Any]] = []  # (kind, name, bytes, stream)
        self.part = array("q")
        self.start = array("q")  # ns on the trace's clock
        self.dur = array("q")
        self.odd: list[Activity] | None = None  # once a value does not fit the columns: objects from there on

    def add(self, kind: str, name: str, start: int, dur: int, nbytes: Any, stream: Any) -> None:
        if self.odd is None:
            key = (kind, name, nbytes, stream, type(nbytes), type(stream))
            try:
                k = self.ids.get(key)
                if k is None:
                    k = self.ids[key] = len(self.parts)
                    self.parts.append((kind, name, nbytes, stream))
                if not (_INT64[0] <= start <= _INT64[1] and _INT64[0] <= dur <= _INT64[1]):
                    raise OverflowError
            except (TypeError, OverflowError):  # an unhashable value, a time past int64
                self.odd = self.activities(0)
            else:
                self.part.append(k)
                self.start.append(start)
                self.dur.append(dur)
                return
        self.odd.append(Activity(kind=kind, name=name, start_ns=start, duration_ns=dur, bytes=nbytes, stream=stream))

    def activities(self, origin_ns: int) -> list[Activity]:
        """The activities in trace order, their starts from ``origin_ns``."""
        if self.odd is not None:
            for a in self.odd:
                a.start_ns -= origin_ns
            return self.odd
        parts = self.parts
        return [Activity(kind=parts[k][0], name=parts[k][1], start_ns=st - origin_ns, duration_ns=d,
                         bytes=parts[k][2], stream=parts[k][3]) for k, st, d in zip(self.part, self.start, self.dur)]


class _Sites:
    """correlation id -> (pid, tid, time in ns) of each launch call, the last of a correlation id kept (as a dict
    would): int64 columns and a table of threads, not a tuple per call."""

    def __init__(self) -> None:
        self.corr: Any = array("q")
        self.ts: Any = array("q")
        self.thread: Any = array("q")
        self.threads: dict[Any, int] = {}  # (pid, tid) -> its number
        self.thread_keys: list[tuple[Any, Any]] = []
        self.odd: dict[int, tuple[Any, Any, int]] = {}  # what does not fit the columns (an unhashable pid)
        self.increasing = True
        self.last = _INT64[0] - 1  # the last correlation id in the columns
        self.fast = True  # no odd entry: a call of a thread seen before may go straight to the columns

    def add(self, corr: int, pid: Any, tid: Any, ts: int) -> None:
        try:
            key = (pid, tid)
            t = self.threads.get(key)
            if t is None:
                t = self.threads[key] = len(self.thread_keys)
                self.thread_keys.append(key)
            if not (_INT64[0] <= corr <= _INT64[1] and _INT64[0] <= ts <= _INT64[1]):
                raise OverflowError
        except (TypeError, OverflowError):
            self.odd[corr] = (pid, tid, ts)
            self.fast = False
            return
        if self.odd:
            self.odd.pop(corr, None)
        if corr <= self.last:
            self.increasing = False
        self.last = corr
        self.corr.append(corr)
        self.ts.append(ts)
        self.thread.append(t)

    def items(self) -> Iterator[tuple[int, tuple[Any, Any, int]]]:
        """(correlation id, (pid, tid, ts)) of each call, as launch_site.items() gives them: in the order each id
        was first seen, the last call of an id kept."""
        if self.increasing and not self.odd:
            keys = self.thread_keys
            for c, t, ts in zip(self.corr, self.thread, self.ts):
                pid, tid = keys[t]
                yield c, (pid, tid, ts)
            return
        yield from self.as_dict().items()

    def as_dict(self) -> dict[int, tuple[Any, Any, int]]:
        keys = self.thread_keys
        out: dict[int, tuple[Any, Any, int]] = {}
        odd = dict(self.odd)
        for c, t, ts in zip(self.corr, self.thread, self.ts):
            pid, tid = keys[t]
            out[c] = (pid, tid, ts)
        out.update(odd)
        return out


# ---------------------------------------------------------------------------------------------------- result

@dataclass
class StreamedTrace:
    """A trace read event by event: the parse, the top-level keys other than traceEvents, the profiled
    process's pid (as kineto_dist.trace_pid gives it), and the damage, if any (one sentence)."""
    parsed: K.ParsedTrace
    top: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    damage: str | None = None
    events_read: int = 0


def _parsed(top: dict[str, Any], ev: _Events) -> K.ParsedTrace:
    """parse_trace's result from the collected events (kineto._parse's steps, in its order)."""
    bad: list[str] = []
    base_ns = K.base_time_ns(top.get("baseTimeNanoseconds"), bad)
    if ev.origin_error is not None:
        raise ev.origin_error
    origin_ns = K._ns(ev.origin_us if ev.origin_us is not None else 0.0)
    cpu_annotations: dict[tuple[Any, Any], list[tuple[int, int, str]]] = defaultdict(list)
    out = K.ParsedTrace(time_origin_ns=base_ns + origin_ns)
    for e in ev.annotations:
        try:
            K._region(e, origin_ns, out, cpu_annotations, ev.gpu_annotation_by_ext)
        except K._MALFORMED:
            bad.append("annotation")
    for spans in cpu_annotations.values():
        spans.sort()
    regions_of = K._enclosing_regions(ev.sites, cpu_annotations)
    sites = ev.sites
    ev.sites = _Sites()
    if ev.kernel_error is not None:
        raise ev.kernel_error
    bad += ev.bad

    def enclosing(corr: Any) -> tuple[str, ...]:
        if type(corr) is int:
            return regions_of.get(corr, ())
        try:
            return tuple(regions_of.get(int(corr), ())) if corr is not None else ()
        except (TypeError, ValueError, OverflowError):
            return ()

    out.table = ev.rows.table(origin_ns, enclosing)
    out.activities = ev.copies.activities(origin_ns)
    ev.copies = _Copies()
    out.devices = []
    for p in top.get("deviceProperties") or []:
        try:
            out.devices.append(K._device(p))
        except K._MALFORMED:
            bad.append("device")
    out.host_syncs, n_bad = K.host_syncs(ev.memcpys + ev.calls, origin_ns)
    bad += ["synchronize"] * n_bad
    out.operators = link_operators(ev.ops, sites.items(), set(out.table.correlation_id), ev.calls,
                                   {h.cpu_start_ns for h in out.host_syncs}, origin_ns)
    ev.ops = OperatorEvents()
    out.info = {k: top[k] for k in ("cuda_driver_version", "cuda_runtime_version", "cupti_version") if k in top}
    out.problems = bad
    return out


def read_trace(path: str | os.PathLike[str], bounded: bool = True) -> StreamedTrace:
    """The trace at ``path`` read event by event. Raises ValueError with the reason (the sentences of
    kineto_import.read_json) when nothing can be kept, K.TraceFormatError for a document that is not a
    Kineto trace, InputFileError / OSError as the file helpers do."""
    top: dict[str, Any] = {}
    holder: list[_Events] = []
    damage: str | None = None
    started = False

    def on_events(items: Iterator[Any]) -> _Events:
        nonlocal started
        started = True
        ev = _Events()
        holder[:] = [ev]  # a second traceEvents key replaces the first, as json.loads does
        return ev.feed(items)

    collecting = gc.isenabled()
    gc.disable()  # the reader makes no reference cycles; a collection would only walk what it keeps, again and again
    try:
        f, chunks = _open_text(Path(path), bounded)
        reader = _Reader(chunks)
        with f:
            try:
                reader.read(top, on_events)
            except _Damaged as e:
                if not (started and holder and holder[0].read):
                    if e.msg == "nested too deeply":
                        raise ValueError("its JSON is nested too deeply") from None
                    raise ValueError(f"it is truncated or not JSON ({e.msg} at byte {e.pos:,})") from None
                damage = (f"the trace is damaged at character {e.pos:,} ({e.msg}); the {holder[0].read:,} events "
                          "before it were read and the rest of the file was not")
            except UnicodeDecodeError:
                if not (started and holder and holder[0].read):
                    raise ValueError("it is not text JSON") from None
                damage = (f"the trace is not UTF-8 text after its first {holder[0].read:,} events; those were "
                          "read and the rest of the file was not")
            except InputFileError as e:
                if not (e.damaged and started and holder and holder[0].read):
                    raise
                damage = (f"the trace's gzip data is cut short or corrupt after its first {holder[0].read:,} "
                          "events; those were read and the rest was not")
    except InputFileError as e:
        raise ValueError("it is truncated or not gzip" if e.damaged else f"it {e.reason}") from None
    finally:
        if collecting:
            gc.enable()
    if not holder or ("traceEvents" in top and not isinstance(top["traceEvents"], _Events)):
        raise NotKinetoTrace("not a PyTorch profiler trace: no traceEvents list")
    ev = holder[0]
    try:
        parsed = K.checked_parse(lambda: _parsed(top, ev))
    finally:
        top.pop("traceEvents", None)
    parsed.problems += [f"the trace's {key} is over {_MAX_VALUE >> 20} MiB and was left out" for key in reader.left_out]
    if damage:
        parsed.problems.append(damage)
    pid = None if ev.pid is _MISSING else as_int(ev.pid)
    return StreamedTrace(parsed, top, pid, damage, ev.read)


def read_json(path: Path) -> Any:
    """The decoded JSON of a whole file, gzip or not (a document that is not an object). Raises ValueError
    with the reason."""
    try:
        raw = read_input(path)  # a regular file, bounded; gzip decompressed as a stream that stops at the limit
    except InputFileError as e:
        raise ValueError("it is truncated or not gzip" if e.damaged else f"it {e.reason}") from None
    try:
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise
        except ValueError:  # an integer past int()'s digit limit: read as infinity, refused where it is used
            return json.loads(raw, parse_int=_wide_int)
    except UnicodeDecodeError:
        raise ValueError("it is not text JSON") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"it is truncated or not JSON ({e.msg} at byte {e.pos:,})") from None
    except RecursionError:
        raise ValueError("its JSON is nested too deeply") from None


def is_kineto_trace(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list)
