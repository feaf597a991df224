"""The streaming Kineto reader (collect/trace/kineto_stream.py) gives what parse_trace gives for the whole
document, on every recorded trace; a damaged trace keeps the events before the damage and names it once."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from conftest import DATA
from kernelscope.collect.trace.kineto import TraceFormatError, parse_trace
from kernelscope.collect.trace.kineto_import import part_from_stream, part_from_trace
from kernelscope.collect.trace.kineto_stream import read_trace

TRACES = ["trace_h100_mixed.json.gz", "proton_h100_phases.chrome_trace.gz",
          *sorted(f"ranks/{p.name}" for p in (DATA / "ranks").glob("*.pt.trace.json.gz"))]


def _doc(path: Path):
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def _parsed_dict(p) -> dict:
    return {"launches": [x.to_dict() for x in p.table.launches()], "activities": [a.to_dict() for a in p.activities],
            "regions": [r.to_dict() for r in p.regions], "devices": [d.to_dict() for d in p.devices],
            "host_syncs": [h.to_dict() for h in p.host_syncs], "origin": p.time_origin_ns, "info": p.info,
            "problems": p.problems}


def _session_json(part) -> str:
    s = part.session
    s.created_utc = "fixed"
    return json.dumps({"session": s.to_dict(), "rank": part.info.to_dict()}, sort_keys=True, default=str)


@pytest.mark.parametrize("name", TRACES)
def test_streamed_import_is_identical_to_the_whole_document_parse(name):
    path = DATA / name
    doc = _doc(path)
    streamed = read_trace(path)
    assert streamed.damage is None and streamed.events_read == len(doc["traceEvents"])
    assert _parsed_dict(streamed.parsed) == _parsed_dict(parse_trace(doc))
    assert len(streamed.parsed.table) > 0 or name.startswith("proton")  # Proton's trace: events, no kernels
    assert _session_json(part_from_stream(streamed, path)) == _session_json(part_from_trace(doc, path))


@pytest.mark.parametrize("gz", [False, True])
def test_plain_and_gzip_and_keys_in_any_place_and_chunk_edges(tmp_path, gz, monkeypatch):
    import kernelscope.collect.trace.kineto_stream as ks

    doc = _doc(DATA / "ranks" / "job2_rank0.pt.trace.json.gz")
    moved = {"traceEvents": doc["traceEvents"], **{k: v for k, v in doc.items() if k != "traceEvents"}}
    text = json.dumps(moved, indent=1).encode()
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    p.write_bytes(gzip.compress(text) if gz else text)
    monkeypatch.setattr(ks, "_CHUNK", 97)  # values and numbers cut at every kind of place
    streamed = read_trace(p)
    assert _parsed_dict(streamed.parsed) == _parsed_dict(parse_trace(doc))
    assert streamed.top["distributedInfo"] == doc["distributedInfo"]


def test_a_truncated_trace_keeps_the_events_before_the_cut_and_says_so(tmp_path):
    doc = _doc(DATA / "trace_h100_mixed.json.gz")
    text = json.dumps(doc).encode()
    events_at = text.index(b'"traceEvents"')
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(text[: events_at + (len(text) - events_at) // 2]))
    streamed = read_trace(cut)
    n = streamed.events_read
    assert 0 < n < len(doc["traceEvents"])
    assert streamed.damage and streamed.parsed.problems[-1] == streamed.damage
    assert f"the {n:,} events before it were read" in streamed.damage and streamed.damage.count(".") <= 1
    whole = parse_trace({**doc, "traceEvents": doc["traceEvents"][:n]})
    assert [x.to_dict() for x in streamed.parsed.table.launches()] == [x.to_dict() for x in whole.table.launches()]
    # gzip cut short in the middle: what was decompressed is kept, the cut named
    raw = gzip.compress(text)
    gcut = tmp_path / "gcut.json.gz"
    gcut.write_bytes(raw[: len(raw) * 3 // 4])
    g = read_trace(gcut)
    assert g.damage and "gzip" in g.damage and len(g.parsed.table) > 0


def test_damage_before_any_event_and_foreign_json_are_one_sentence(tmp_path):
    for text, why in ((b'{"traceEvents": [', "truncated or not JSON"), (b"", "truncated or not JSON"),
                      (b"[1, 2]", None), (b'{"a": 1}', None), (b"\xff\xfe{", "not text JSON")):
        p = tmp_path / "x.json"
        p.write_bytes(text)
        with pytest.raises(ValueError) as e:
            read_trace(p)
        if why:
            assert why in str(e.value)
        else:
            assert isinstance(e.value, TraceFormatError)


def test_a_gzip_bomb_stops_at_the_input_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSCOPE_MAX_INPUT_MB", "1")
    p = tmp_path / "bomb.json.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (8 << 20) + b"]}"))
    with pytest.raises(ValueError, match="input limit"):
        read_trace(p)


def _old_import(doc, path: Path):
    """`import` of one trace as it was before streaming: the whole document, Launch objects, join_ranks."""
    from kernelscope.collect.ranks import join_ranks

    joined = join_ranks([part_from_trace(doc, path)], command=["kineto-trace", str(path)])
    if len(joined.session.ranks) == 1 and joined.session.ranks[0].world_size == 1:
        for x in joined.session.launches:
            x.rank = None
        for a in joined.session.activities:
            a.rank = None
        for g in joined.session.regions:
            g.rank = None
        joined.session.ranks = []
        joined.session.collectors.pop("ranks", None)
    return joined.session


def _file_json(s, tmp_path: Path, name: str) -> dict:
    s.save(tmp_path / name)
    d = json.loads((tmp_path / name).read_text())
    d.pop("created_utc", None)
    return d


@pytest.mark.parametrize("world", [None, 1])
def test_one_process_import_keeps_columns_and_equals_the_per_object_join(tmp_path, world):
    from kernelscope.collect.trace.kineto_import import import_traces

    doc = _doc(DATA / "trace_h100_mixed.json.gz")
    if world:  # a one-process trace that says so, cut short: a partial trace status, rank in its reason
        doc = {**doc, "distributedInfo": {"rank": 0, "world_size": 1, "backend": "nccl"}}
        doc["traceEvents"] = doc["traceEvents"][: len(doc["traceEvents"]) * 2 // 3]
        doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "bad", "ts": 1.0, "args": {}})
    path = tmp_path / "one.pt.trace.json"
    path.write_text(json.dumps(doc))
    new = import_traces([path]).joined.session
    assert new.__dict__.get("_launches_table") is not None  # kept as columns
    old = _old_import(doc, path)
    assert _file_json(new, tmp_path, "new.json") == _file_json(old, tmp_path, "old.json")
    if world:
        assert new.collectors["trace"].status == "partial" and "rank 0:" in new.collectors["trace"].reason


def test_runs_of_events_cut_anywhere_decode_as_the_whole_document(tmp_path, monkeypatch):
    """Events decoded a run at a time: names holding '}, {', args before the other keys (a '},' inside an event),
    and a damaged event inside a run, at chunk sizes that cut runs everywhere."""
    import kernelscope.collect.trace.kineto_stream as ks

    doc = _doc(DATA / "ranks" / "job2_rank0.pt.trace.json.gz")
    for k, e in enumerate(doc["traceEvents"]):
        if e.get("cat") == "kernel" and k % 3 == 0:
            e["name"] = e["name"] + "}, {lambda()#1}"
        if k % 2 == 0:  # args first: "},' inside the event
            doc["traceEvents"][k] = {"args": e.pop("args", {}), **e}
    text = json.dumps(doc, indent=1)
    p = tmp_path / "t.json"
    p.write_text(text)
    for chunk in (97, 4096, 1 << 18):
        monkeypatch.setattr(ks, "_CHUNK", chunk)
        monkeypatch.setattr(ks, "_TAIL", max(16, chunk // 16))
        streamed = read_trace(p)
        assert streamed.damage is None and streamed.events_read == len(doc["traceEvents"])
        assert _parsed_dict(streamed.parsed) == _parsed_dict(parse_trace(doc))
    at = text.index('"ph"', len(text) // 2)  # damage in the middle of a run: the events before it are kept
    p.write_text(text[:at] + "}" + text[at:])
    monkeypatch.setattr(ks, "_CHUNK", 1 << 18)
    streamed = read_trace(p)
    n = streamed.events_read
    assert streamed.damage and f"the {n:,} events before it were read" in streamed.damage
    whole = parse_trace({**doc, "traceEvents": doc["traceEvents"][:n]})
    assert [x.to_dict() for x in streamed.parsed.table.launches()] == [x.to_dict() for x in whole.table.launches()]


_EVENT = {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1.5, "dur": 1.0,
          "args": {"a": [{}, {}, {}, {}, {}, {}]}}  # '}, {' inside an event: a cut that does not decode


def test_elements_of_every_kind_are_searched_and_decoded_a_bounded_number_of_times(tmp_path, monkeypatch):
    """Counts, not time: the characters the cut search scans and the C decoder decodes stay within a small
    multiple of the input (a run is tried at four cuts at most), for elements that are not objects (numbers, null,
    arrays, strings) and for events whose '}, {' do not end them. Time ~1 s; memory ~20 MiB."""
    import kernelscope.collect.trace.kineto_stream as ks

    real_cut, real_decoder = ks._CUT, ks._DECODER
    seen = {"scanned": 0, "decoded": 0}

    class Cut:
        def finditer(self, buf, pos=0):
            seen["scanned"] += len(buf) - pos
            return real_cut.finditer(buf, pos)

    class Decoder:
        def decode(self, text):
            seen["decoded"] += len(text)
            return real_decoder.decode(text)

        def raw_decode(self, text, pos=0):
            v, end = real_decoder.raw_decode(text, pos)
            seen["decoded"] += end - pos
            return v, end

    monkeypatch.setattr(ks, "_CUT", Cut())
    monkeypatch.setattr(ks, "_DECODER", Decoder())
    p = tmp_path / "t.json"
    event = json.dumps(_EVENT)
    for body, n in (('0,null,[],"s",' * 2000 + "0", 8001), ((event + ",") * 800 + event, 801)):
        text = '{"traceEvents": [' + body + "]}"
        p.write_text(text)
        seen.update(scanned=0, decoded=0)
        streamed = read_trace(p)
        assert streamed.damage is None and streamed.events_read == n
        assert seen["scanned"] <= 2 * len(text) and seen["decoded"] <= 6 * len(text), seen  # a run is tried 4 times


def test_a_long_number_and_a_long_key_at_the_top_are_decoded_once(tmp_path, monkeypatch):
    """A number of 4 MiB digits as baseTimeNanoseconds (out of range: left out, counted) and a key of 5 MiB (no
    key the import reads: passed): the decoder reads each part a bounded number of times (the buffer doubles
    while a value runs on, it is not decoded again for every chunk). Time ~1 s; memory ~40 MiB."""
    import kernelscope.collect.trace.kineto_stream as ks

    decoded = [0]

    class Counted:
        def __init__(self, real):
            self.real = real

        def raw_decode(self, text, pos=0):
            v, end = self.real.raw_decode(text, pos)
            decoded[0] += end - pos
            return v, end

        def decode(self, text):
            decoded[0] += len(text)
            return self.real.decode(text)

    monkeypatch.setattr(ks, "_DECODER", Counted(ks._DECODER))
    monkeypatch.setattr(ks, "_WIDE_DECODER", Counted(getattr(ks, "_WIDE_DECODER", ks._DECODER)), raising=False)
    text = ('{"baseTimeNanoseconds": ' + "1" * (4 << 20) + ', "' + "k" * (5 << 20) + '": [1], "traceEvents": ['
            + json.dumps(_EVENT) + "]}")
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(text.encode()))
    streamed = read_trace(p)
    assert streamed.events_read == 1
    assert streamed.parsed.problems == ["1 malformed baseTimeNanoseconds event(s) left out"]
    assert decoded[0] <= 2.5 * len(text), decoded


def _peak_bytes(path: Path):
    import tracemalloc

    tracemalloc.start()
    try:
        try:
            got = read_trace(path)
        except ValueError as e:
            got = e
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_what_the_reader_does_not_use_is_passed_without_being_held(tmp_path):
    """Memory, by tracemalloc's peak: an unknown top-level key of 4 MiB of '[],', a document that is such an array,
    an event and a deviceProperties over the 4 MiB limit of one value, 32 MiB of NUL after the events, and the
    unknown key in a UTF-16 document: each held in under 12 MiB (decoded, or buffered whole, they took 100 MiB to
    2 GiB). A recorded trace in UTF-16 and UTF-32 reads as in UTF-8. Time ~5-10 s; memory ~30 MiB."""
    event = json.dumps({**_EVENT, "cat": "kernel_like"})
    junk = b"[" + b"[]," * ((4 << 20) // 3) + b"[]]"
    big = b"[" + b"[]," * ((5 << 20) // 3) + b"[]]"
    cases = {
        "unknown key": b'{"junk": ' + junk + b', "traceEvents": [' + event.encode() + b"]}",
        "an array": junk,
        "oversized event": b'{"traceEvents": [{"ph": "X", "args": ' + big + b"}, " + event.encode() + b"]}",
        "oversized key": b'{"deviceProperties": ' + big + b', "traceEvents": [' + event.encode() + b"]}",
        "NUL tail": b'{"traceEvents": [' + (event.encode() + b", ") * 3 + b"\0" * (32 << 20),
        "UTF-16": ('{"junk": ' + junk.decode() + ', "traceEvents": [' + event + "]}").encode("utf-16"),
    }
    for what, data in cases.items():
        p = tmp_path / f"{what.replace(' ', '_')}.json.gz"
        p.write_bytes(gzip.compress(data, compresslevel=1))
        got, peak = _peak_bytes(p)
        assert peak < 12 << 20, (what, peak)
        if what == "an array":
            assert isinstance(got, TraceFormatError) and "no traceEvents list" in str(got)
            continue
        assert not isinstance(got, Exception), (what, got)
        problems = got.parsed.problems
        if what in ("unknown key", "UTF-16"):
            assert got.events_read == 1 and problems == [] and "junk" not in got.top
        elif what == "oversized event":
            assert got.events_read == 2 and problems == ["1 malformed oversized event(s) left out"]
        elif what == "oversized key":
            assert problems == ["the trace's deviceProperties is over 4 MiB and was left out"]
        else:
            assert got.events_read == 3 and got.damage and "the 3 events before it were read" in got.damage
    doc = _doc(DATA / "ranks" / "job2_rank0.pt.trace.json.gz")  # UTF-16 and -32 stream as their UTF-8 text does
    for encoding in ("utf-16", "utf-32-be", "utf-8-sig"):
        p = tmp_path / f"{encoding}.json.gz"
        p.write_bytes(gzip.compress(json.dumps(doc).encode(encoding)))
        streamed = read_trace(p)
        assert streamed.damage is None and streamed.events_read == len(doc["traceEvents"])
        assert _parsed_dict(streamed.parsed) == _parsed_dict(parse_trace(doc))
