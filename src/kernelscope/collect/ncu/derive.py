"""Model metrics from raw ncu metrics through the field table (fields.NCU_FIELDS): the first of a field's own
names the report holds, else the first of its derivations whose parts it holds, with the formula and the raw
names kept in the Metric; else a missing Metric whose reason names what is missing and the ncu option that
adds it."""
from __future__ import annotations

from typing import Mapping

from kernelscope.collect.ncu.fields import OPCODE_METRIC, SECTOR_BYTES, Derivation, NcuField, opcode_metric
from kernelscope.model import Metric


def _number(raw: Mapping[str, Metric], name: str) -> float | None:
    m = raw.get(name)
    if m is None or m.is_missing or isinstance(m.value, bool) or not isinstance(m.value, (int, float)):
        return None
    return m.value  # type: ignore[return-value]


def _derive(f: NcuField, d: Derivation, raw: Mapping[str, Metric]) -> Metric | None:
    if d.how == "opcodes":
        # the opcode table was not collected, or its instances could not be read: unknown, not zero (in a read
        # table an absent opcode ran 0 times)
        if OPCODE_METRIC not in raw or not any(k.startswith(OPCODE_METRIC + "[") for k in raw):
            return None
        used = [(op, v) for op in d.parts if (v := _number(raw, opcode_metric(op))) is not None]
        value: float = sum(v for _, v in used)
        raw_name = (" + ".join(opcode_metric(op) for op, _ in used) if used
                    else f"{OPCODE_METRIC} (no {'/'.join(d.parts)} instruction ran)")
        return Metric(value=value, unit=f.unit, source="derived", raw_name=raw_name, formula=d.formula)
    values = [_number(raw, p) for p in d.parts]
    if any(v is None for v in values):
        return None
    have = [v for v in values if v is not None]
    extra = [(p, v) for p in d.optional if (v := _number(raw, p)) is not None]
    names = list(d.parts) + [p for p, _ in extra]
    if d.how == "ratio":
        if not have[1]:
            return None
        value, raw_name = have[0] / have[1], f"{d.parts[0]} / {d.parts[1]}"
    elif d.how == "sum":
        value, raw_name = sum(have) + sum(v for _, v in extra), " + ".join(names)
    elif d.how == "sectors":
        value = (sum(have) + sum(v for _, v in extra)) * SECTOR_BYTES
        raw_name = f"({' + '.join(names)}) x {SECTOR_BYTES}"
    else:
        raise ValueError(f"unknown derivation {d.how!r} of {f.model_name}")
    return Metric(value=value, unit=f.unit, source="derived", raw_name=raw_name, formula=d.formula)


def missing_reason(f: NcuField, raw: Mapping[str, Metric]) -> str:
    """What the report lacks for ``f`` (its names, and the parts of each derivation it lacks) and what adds it."""
    why = f"not in this ncu report: no {' or '.join(f.candidates)}" if f.candidates else "not in this ncu report"
    parts = []
    for d in f.derivations:
        lacking = [OPCODE_METRIC] if d.how == "opcodes" else [p for p in d.parts if _number(raw, p) is None]
        parts.append(" + ".join(lacking) if d.how != "ratio" else " / ".join(d.parts))
    if parts:
        why += ("; " if f.candidates else ": ") + "to derive it, no " + " or ".join(parts)
    return why + (f"; {f.adds} adds it" if f.adds else "")


def resolve_field(f: NcuField, raw: Mapping[str, Metric]) -> Metric:
    hit = next((raw[c] for c in f.candidates if c in raw and not raw[c].is_missing), None)
    if hit is not None:
        return hit
    for d in f.derivations:
        m = _derive(f, d, raw)
        if m is not None:
            return m
    return Metric.missing(f.candidates[0] if f.candidates else f.model_name, missing_reason(f, raw), "ncu", f.unit)
