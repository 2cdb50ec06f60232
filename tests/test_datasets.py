from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from margin.datasets import MAX_ROW_CHARS, XSTEST_SHA256, load_dataset
from margin.errors import InputError

HEADER = "id,prompt,type,label,focus,note\n"


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def test_sample_is_ours_and_well_formed():
    ds = load_dataset("sample")
    assert len(ds.prompts) >= 40
    assert {p.label for p in ds.prompts} == {"safe", "unsafe"}
    assert len({p.type for p in ds.prompts}) >= 4
    assert any("kill" in p.text and p.label == "safe" for p in ds.prompts)


def test_sample_holds_no_xstest_prompt(xstest_csv):
    xstest = {p.text.casefold() for p in load_dataset(str(xstest_csv)).prompts}
    assert not xstest & {p.text.casefold() for p in load_dataset("sample").prompts}


def test_only_required_columns_needed(tmp_path):
    ds = load_dataset(str(write(tmp_path, "d.csv", "id,prompt,label\n1,hello there,safe\n")))
    assert ds.prompts[0].type == ""


def test_extra_columns_become_tags(tmp_path):
    ds = load_dataset(str(write(tmp_path, "d.csv", "id,prompt,label,lang\n1,hi,safe,en\n")))
    assert ds.prompts[0].extra == (("lang", "en"),)


def test_text_is_kept_exactly(tmp_path):
    ds = load_dataset(str(write(tmp_path, "d.csv", 'id,prompt,label\n1,"  padded\u200b ",safe\n')))
    assert ds.prompts[0].text == "  padded\u200b "


def test_jsonl_and_parquet(tmp_path):
    rows = [{"id": 1, "prompt": "a b", "label": "safe"}, {"id": "2", "prompt": "c", "label": "unsafe", "type": "x"}]
    ds = load_dataset(str(write(tmp_path, "d.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")))
    assert [p.id for p in ds.prompts] == ["1", "2"]
    pq = tmp_path / "d.parquet"
    pl.DataFrame({"id": ["1", "2"], "prompt": ["a", "b"], "label": ["safe", "unsafe"]}).write_parquet(pq)
    assert [p.label for p in load_dataset(str(pq)).prompts] == ["safe", "unsafe"]


@pytest.mark.parametrize(
    ("name", "content", "line", "words"),
    [
        ("missing.csv", "id,prompt,type\n1,hi,x\n", 1, "missing required column(s) label"),
        ("label.csv", HEADER + "1,hi,x,safe,,\n2,hello,x,Unsafe!,,\n", 3, "unknown label"),
        ("empty_text.csv", HEADER + "1,hi,x,safe,,\n2,   ,x,safe,,\n", 3, "empty prompt"),
        ("dup.csv", HEADER + "1,hi,x,safe,,\n2,yo,x,safe,,\n1,hey,x,safe,,\n", 4, "duplicate id '1' (first at line 2)"),
        ("utf8.csv", HEADER.encode() + b"1,hi,x,safe,,\n2,caf\xe9,x,safe,,\n", 3, "not UTF-8"),
        ("empty.csv", "", None, "empty file"),
        ("fields.csv", HEADER + "1,hi,x\n", 2, "expected 6 fields"),
        ("bad.jsonl", '{"id": 1, "prompt": "a", "label": "safe"}\n{"id": 2, "prompt": \n', 2, "invalid JSON"),
        ("nolabel.jsonl", '{"id": 1, "prompt": "a"}\n', 1, "missing required field(s) label"),
        ("header_only.csv", HEADER, None, "no prompts"),
        ("x.txt", "id,prompt,label\n", None, "unknown dataset format"),
    ],
)
def test_bad_input_names_file_and_line(tmp_path, name, content, line, words):
    path = write(tmp_path, name, content)
    with pytest.raises(InputError) as info:
        load_dataset(str(path))
    assert info.value.path == str(path)
    assert info.value.line == line
    assert words in str(info.value)


def test_multiline_csv_record_reports_its_first_line(tmp_path):
    path = write(tmp_path, "m.csv", HEADER + '1,"two\nlines",x,safe,,\n2,ok,x,maybe,,\n')
    with pytest.raises(InputError) as info:
        load_dataset(str(path))
    assert info.value.line == 4


def test_missing_file():
    with pytest.raises(InputError, match="no such dataset file"):
        load_dataset("/nonexistent/x.csv")


def test_xstest_from_env_is_checksum_verified(xstest_csv, monkeypatch, tmp_path):
    monkeypatch.setenv("MARGIN_XSTEST", str(xstest_csv))
    ds = load_dataset("xstest")
    assert ds.sha256 == XSTEST_SHA256 and len(ds.prompts) == 450
    assert sum(p.label == "unsafe" for p in ds.prompts) == 200
    tampered = write(tmp_path, "x.csv", xstest_csv.read_bytes() + b"999,new,x,safe,,\n")
    monkeypatch.setenv("MARGIN_XSTEST", str(tampered))
    with pytest.raises(InputError, match="not the pinned XSTest"):
        load_dataset("xstest")


def test_xstest_from_cache(xstest_csv, monkeypatch, tmp_path):
    monkeypatch.delenv("MARGIN_XSTEST", raising=False)
    monkeypatch.setenv("MARGIN_CACHE_DIR", str(tmp_path))
    (tmp_path / "xstest").mkdir()
    (tmp_path / "xstest" / f"{XSTEST_SHA256}.csv").write_bytes(xstest_csv.read_bytes())
    assert len(load_dataset("xstest").prompts) == 450


def test_xstest_offline_without_cache_says_how_to_pass_a_path(monkeypatch, tmp_path):
    monkeypatch.delenv("MARGIN_XSTEST", raising=False)
    monkeypatch.setenv("MARGIN_CACHE_DIR", str(tmp_path))
    import margin.datasets as datasets

    monkeypatch.setattr(datasets, "XSTEST_URL", "http://127.0.0.1:9/xstest_prompts.csv")
    with pytest.raises(InputError) as info:
        load_dataset("xstest")
    assert "--dataset PATH" in str(info.value) and "MARGIN_XSTEST" in str(info.value)


def test_xstest_from_env_is_cached_so_score_and_merge_find_it_without_the_variable(xstest_csv, monkeypatch, tmp_path):
    import margin
    import margin.datasets as datasets
    from margin.runs.recording.merge import merge_runs
    from margin.runs.recording.score import rescore

    cache = tmp_path / "cache"
    monkeypatch.setenv("MARGIN_CACHE_DIR", str(cache))
    tampered = write(tmp_path, "x.csv", xstest_csv.read_bytes() + b"999,new,x,safe,,\n")
    monkeypatch.setenv("MARGIN_XSTEST", str(tampered))
    with pytest.raises(InputError, match="not the pinned XSTest"):
        load_dataset("xstest")
    assert not (cache / "xstest").exists()  # a file that fails the checksum is never cached
    monkeypatch.setenv("MARGIN_XSTEST", str(xstest_csv))
    outcome = margin.run("keyword", dataset="xstest", suite="quick", limit=12, engine="local", cache=False,
                         out=tmp_path / "kw")
    assert (cache / "xstest" / f"{XSTEST_SHA256}.csv").read_bytes() == xstest_csv.read_bytes()
    monkeypatch.delenv("MARGIN_XSTEST")
    monkeypatch.setattr(datasets, "XSTEST_URL", "http://127.0.0.1:9/xstest_prompts.csv")  # no download
    assert rescore([tmp_path / "kw"]).results == outcome.results
    assert merge_runs([tmp_path / "kw"], tmp_path / "merged").results == outcome.results


@pytest.mark.parametrize("size", [MAX_ROW_CHARS // 2, MAX_ROW_CHARS * 4])
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_one_row_size_rule_for_csv_and_jsonl(tmp_path, fmt, size):
    """Issue 34, item 8: CSV refused a 128 KiB row while JSONL took a 50 MB one; now one limit."""
    long = "x" * size
    if fmt == "csv":
        content = f'id,prompt,label\na,short,safe\nb,"{long}",unsafe\n'
    else:
        content = "".join(json.dumps(row) + "\n" for row in
                          [{"id": "a", "prompt": "short", "label": "safe"}, {"id": "b", "prompt": long, "label": "unsafe"}])
    path = write(tmp_path, f"d.{fmt}", content)
    if size < MAX_ROW_CHARS:
        assert load_dataset(str(path)).prompts[1].text == long
        return
    with pytest.raises(InputError) as caught:
        load_dataset(str(path))
    assert (str(caught.value.path), caught.value.line) == (str(path), 3 if fmt == "csv" else 2)
    assert f"row longer than {MAX_ROW_CHARS:,} characters" in caught.value.message
