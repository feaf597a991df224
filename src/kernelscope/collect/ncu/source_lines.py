"""Per-source-line records of one ncu action: its per-PC (instanced) metrics grouped by the line each PC maps to.

Needs a report recorded with ``--section SourceCounters`` (and ``WarpStateStats`` for the stall reasons of the
samples); ``--import-source yes`` puts the source text in it. Every count is an ncu metric summed over the
line's instructions (model/source_lines.py names them); nothing is rescaled.
"""
from __future__ import annotations

import hashlib
from typing import Any

from kernelscope.model.source_lines import (
    COUNT_METRICS, MAX_COUNTS, MAX_EXCERPT_LINES, MAX_FILES, MAX_INSTRUCTIONS, MAX_LINES, MAX_PATH, MAX_TEXT,
    STALL_PREFIX, SassInstruction, SourceFile, SourceLine, SourceLines,
)

HOT_LINES = 20  # lines whose text is kept: the hottest by samples, and by excess traffic
CONTEXT = 2  # lines of text kept either side of a hot line


def _per_pc(action: Any, name: str) -> dict[int, float] | None:
    m = action.metric_by_name(name)
    if m is None:
        return None
    n = m.num_instances()
    ids = m.correlation_ids() if n else None
    if not n or ids is None:
        return None
    return {ids.as_uint64(i): m.as_double(i) for i in range(n)}


def _clip(s: str) -> str:
    return s if len(s) <= MAX_TEXT else s[:MAX_TEXT - 1] + "…"


def _stalls_per_pc(action: Any) -> dict[str, dict[int, float]]:
    stalls = {}
    for name in action.metric_names():
        if name.startswith(STALL_PREFIX) and not name.endswith("_not_issued"):
            v = _per_pc(action, name)
            if v:
                stalls[name[len(STALL_PREFIX):]] = v
    return stalls


def raw_bytes(value: Any) -> bytes:
    """A string from NVIDIA's module as the bytes the report holds: its SWIG layer decodes them as UTF-8 with
    surrogateescape, so a Latin-1 comment or invalid UTF-8 arrives as lone surrogates that encode back."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return str(value or "").encode("utf-8", "surrogateescape")


def readable(value: Any) -> str:
    """The text of a string from NVIDIA's module, undecodable bytes replaced by U+FFFD."""
    return raw_bytes(value).decode("utf-8", "replace")


def source_texts(action: Any) -> dict[str, bytes]:
    """The source files the report imported for the action: path -> raw text (b\"\" when it holds no text)."""
    try:
        return {readable(path): raw_bytes(text) for path, text in (action.source_files() or {}).items()}
    except Exception:  # an ncu_report without source_files(): SASS only
        return {}


def _location(action: Any, pc: int, texts: dict[str, bytes], files: list[SourceFile],
              file_id: dict[str, int]) -> tuple[int | None, int]:
    """(file index, line) of an instruction; (None, 0) without line information (or past MAX_FILES). The file's
    checksum is of its bytes as the report holds them, so it matches the file on disk."""
    info = action.source_info(pc)
    path, line = (readable(info.file_name()), int(info.line())) if info is not None and info.file_name() else (None, 0)
    if path is None or line <= 0:
        return None, 0
    fid = file_id.get(path)
    if fid is None and len(files) < MAX_FILES:
        text = texts.get(path)
        fid = file_id[path] = len(files)
        files.append(SourceFile(path[-MAX_PATH:], hashlib.sha256(text).hexdigest() if text else None,
                                len(text.decode("utf-8", "replace").splitlines()) if text else None))
    return (fid, line) if fid is not None else (None, 0)


def _note(files: list[SourceFile], counts: dict[str, Any]) -> str | None:
    if not files:
        return ("this kernel has no line information (a CUDA binary needs -lineinfo; Triton and Gluon "
                "kernels carry it): its instructions are shown as SASS only")
    if "samples" not in counts:
        return "the report has no warp samples per instruction (WarpStateStats / SourceCounters sampling)"
    if all(f.sha256 is None for f in files):
        return "the report holds no source text (recorded with --import-source no): lines are shown by number"
    return None


def read_source_lines(action: Any) -> SourceLines | None:
    """The action's per-line records; None when the report has no per-instruction counters for it."""
    counts = {c: v for c, name in COUNT_METRICS.items() if (v := _per_pc(action, name)) is not None}
    # inst_executed alone is instanced in reports without SourceCounters too: its samples or its memory
    # counters per instruction say the section was recorded.
    if not {"samples", "global_sectors", "shared_wavefronts"} & counts.keys():
        return None
    stalls = _stalls_per_pc(action)
    pcs = sorted(set().union(*(v.keys() for v in counts.values())))[:MAX_INSTRUCTIONS]
    base = pcs[0] if pcs else 0
    texts = source_texts(action)
    files: list[SourceFile] = []
    file_id: dict[str, int] = {}
    lines: dict[tuple[int | None, int], SourceLine] = {}
    for pc in pcs:
        key = _location(action, pc, texts, files, file_id)
        ln = lines.get(key)
        if ln is None:
            if len(lines) >= MAX_LINES:
                continue
            ln = lines[key] = SourceLine(*key)
        inst = SassInstruction(pc - base, _clip(readable(action.sass_by_pc(pc)).strip()),
                               {c: v[pc] for c, v in counts.items() if pc in v},
                               {r: v[pc] for r, v in stalls.items() if v.get(pc)})
        ln.instructions.append(inst)
        for c, v in inst.counts.items():
            ln.counts[c] = max(ln.counts.get(c, 0.0), v) if c in MAX_COUNTS else ln.counts.get(c, 0.0) + v
        for r, v in inst.stalls.items():
            ln.stalls[r] = ln.stalls.get(r, 0.0) + v
    out = SourceLines(files, sorted(lines.values(), key=lambda ln: (ln.file is None, ln.file or 0, ln.line)))
    _keep_hot_text(out, texts)
    note = _note(files, counts)
    if note is not None:
        out.note = note
    return out


def _keep_hot_text(out: SourceLines, texts: dict[str, bytes]) -> None:
    located = [ln for ln in out.lines if ln.file is not None]
    hot: set[tuple[int, int]] = set()
    for count in ("samples", "global_sectors_excessive", "shared_wavefronts_excessive", "local_sectors"):
        ranked = sorted((ln for ln in located if ln.counts.get(count, 0) > 0), key=lambda ln: -ln.counts[count])
        hot |= {(ln.file, ln.line) for ln in ranked[:HOT_LINES]}  # type: ignore[misc]
    split = {i: texts.get(f.path, b"").decode("utf-8", "replace").splitlines() for i, f in enumerate(out.files)}
    for fid, line in sorted(hot):
        src, ex = split[fid], out.files[fid].excerpt
        for n in range(max(1, line - CONTEXT), line + CONTEXT + 1):
            if n <= len(src) and len(ex) < MAX_EXCERPT_LINES:
                ex[n] = _clip(src[n - 1])
