"""A user's CSV or Parquet file: good files load; malformed ones give one precise line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aicf_induct.cli.main import main
from aicf_induct.errors import ConfigError, DataError
from aicf_induct.problems import load_problem
from aicf_induct.problems.registry import names_without_table

Writer = Callable[[pd.DataFrame, str], Path]


def test_csv_loads_with_inferred_task(write_csv: Writer, good_frame: pd.DataFrame) -> None:
    path = write_csv(good_frame, "ok.csv")
    p = load_problem(f"file:{path}?target=label")
    assert p.source == "file" and p.task == "classification" and p.n_classes == 2
    assert p.n_rows == 120 and p.target == "label"
    reg = load_problem(f"file:{path}?target=b&drop=label")
    assert reg.task == "regression"
    assert ("label", "dropped by request") in reg.dropped


def test_parquet_equals_csv(tmp_path: Path, write_csv: Writer,
                            good_frame: pd.DataFrame) -> None:
    pq = tmp_path / "ok.parquet"
    good_frame.to_parquet(pq)
    a = load_problem(f"file:{pq}?target=label")
    b = load_problem(f"file:{write_csv(good_frame, 'ok.csv')}?target=label")
    assert np.allclose(a.train.X, b.train.X) and a.problem_id == b.problem_id


def test_a_parquet_column_stored_as_the_frame_s_index_is_a_column(
        tmp_path: Path, good_frame: pd.DataFrame) -> None:
    """`df.set_index("label").to_parquet(f)` stores the column as the index: it was read
    back as row labels and dropped, and `target=label` found no such column. An unnamed
    index (pandas' own row numbers) is still no column."""
    want = tmp_path / "ok.parquet"
    good_frame.to_parquet(want)
    indexed = tmp_path / "indexed.parquet"
    good_frame.set_index("label").to_parquet(indexed)
    got = load_problem(f"file:{indexed}?target=label")
    assert got.problem_id == load_problem(f"file:{want}?target=label").problem_id
    renumbered = tmp_path / "renumbered.parquet"
    good_frame.set_axis(range(100, 100 + len(good_frame))).to_parquet(renumbered)
    assert load_problem(f"file:{renumbered}?target=label").n_features == got.n_features


def test_semicolons_between_values_are_read_as_such(tmp_path: Path, write_csv: Writer,
                                                    good_frame: pd.DataFrame) -> None:
    """A spreadsheet's export with ';' between values is the same problem as the comma file;
    a header that holds a comma stays comma-separated."""
    path = tmp_path / "semi.csv"
    good_frame.to_csv(path, sep=";", index=False)
    a = load_problem(f"file:{path}?target=label")
    b = load_problem(f"file:{write_csv(good_frame, 'ok.csv')}?target=label")
    assert a.problem_id == b.problem_id
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("a,b;c,label\n" + "".join(f"{i * 7 % 11},{i % 3};x,{i % 2}\n"
                                             for i in range(40)))
    p = load_problem(f"file:{mixed}?target=label&drop=b;c")
    assert p.n_features == 1


def test_decimal_commas_and_parquet_decimals_are_numbers(tmp_path: Path,
                                                       good_frame: pd.DataFrame) -> None:
    """A ';' file written with decimal commas, and a Parquet DECIMAL column, load as the
    same numbers as the plain file (they were refused as free text)."""
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    f = good_frame.assign(b=good_frame["b"].round(2))
    plain = tmp_path / "plain.csv"
    f.to_csv(plain, index=False)
    semi = tmp_path / "semi.csv"
    f.to_csv(semi, sep=";", decimal=",", index=False)
    assert "," in semi.read_text().splitlines()[1]
    dec = tmp_path / "dec.parquet"
    table = pa.Table.from_pandas(f, preserve_index=False)
    money = pa.array([decimal.Decimal(f"{v:.2f}") for v in f["b"]], pa.decimal128(10, 2))
    pq.write_table(table.set_column(1, "b", money), dec)
    want = load_problem(f"file:{plain}?target=label")
    for path in (semi, dec):
        got = load_problem(f"file:{path}?target=label")
        assert got.feature_names == want.feature_names
        assert np.allclose(got.train.X, want.train.X), path.name


def test_a_parquet_string_column_of_numbers_is_read_as_numbers(tmp_path: Path,
                                                               write_csv: Writer,
                                                               good_frame: pd.DataFrame) -> None:
    """Numbers stored as Parquet strings are the CSV's numbers (an IndexError in pandas)."""
    text = good_frame.assign(b=good_frame["b"].astype(str))
    path = tmp_path / "text.parquet"
    text.to_parquet(path)
    got = load_problem(f"file:{path}?target=label")
    want = load_problem(f"file:{write_csv(good_frame, 'ok.csv')}?target=label")
    assert got.problem_id == want.problem_id and got.feature_names == want.feature_names


def test_index_column_is_dropped_as_identifier(tmp_path: Path,
                                               good_frame: pd.DataFrame) -> None:
    path = tmp_path / "with_index.csv"
    good_frame.to_csv(path)  # pandas writes its index as an unnamed first column
    p = load_problem(f"file:{path}?target=label")
    assert p.dropped[0][0] == "Unnamed: 0" and "identifier" in p.dropped[0][1]


def _bad(write_csv: Writer, good_frame: pd.DataFrame, case: str) -> tuple[str, str]:
    """(problem name, expected message pattern) of one malformed-file case."""
    f = good_frame.copy()
    if case == "text":
        f["comment"] = [f"free text number {i} about this row" for i in range(len(f))]
        return f"file:{write_csv(f, 'text.csv')}?target=label", \
            r"text\.csv: column 'comment' is free text or identifier \(120 distinct"
    if case == "constant":
        f["site"] = "A"
        return f"file:{write_csv(f, 'const.csv')}?target=label", \
            r"const\.csv: column 'site' is constant \(every value is A\); drop it with &drop=site"
    if case == "one_class":
        f["label"] = "yes"
        return f"file:{write_csv(f, 'one.csv')}?target=label", \
            r"target 'label' has a single class \('yes' in all 120 rows\)"
    if case == "one_numeric_class":  # the value as written, not NumPy's repr of it
        f["label"] = 1
        return f"file:{write_csv(f, 'one1.csv')}?target=label", \
            r"target 'label' has a single class \(1 in all 120 rows\)"
    if case == "directory":
        return f"file:{write_csv(f, 'd.csv').parent}?target=label", r"a directory, not a file"
    if case == "missing_target":
        return f"file:{write_csv(f, 'nt.csv')}?target=outcome", \
            r"nt\.csv: no column 'outcome' to use as the target \(columns: a, b, color, label\)"
    if case == "no_target_given":
        return f"file:{write_csv(f, 'ng.csv')}", r"name the target column with \?target=COL"
    if case == "header_only":
        return f"file:{write_csv(f.iloc[:0], 'h.csv')}?target=label", r"header but no rows"
    if case == "not_numeric":
        return f"file:{write_csv(f, 'nn.csv')}?target=color&task=regression", \
            r"regression target 'color' is not numeric \(e\.g\. '(red|green|blue)'\)"
    if case == "nested":  # Parquet's list columns: no traceback from hashing them
        f["tags"] = [list(range(i % 4)) for i in range(len(f))]
        path = write_csv(f, "n.csv").with_suffix(".parquet")  # beside the CSV writer's files
        f.to_parquet(path)
        return f"file:{path}?target=label", \
            r"n\.parquet: column 'tags' is a nested column \(list cells\)"
    if case == "huge":  # its variance overflows: the scaler's NaN reached the landmarks
        f["b"] = f["b"] * 1e300
        return f"file:{write_csv(f, 'huge.csv')}?target=label", \
            r"column 'b' is numbers too large to scale \(\|x\| up to [0-9.]+e\+300"
    if case == "huge_target":  # its standard deviation was inf: every target 0, R² 0
        f["b"] = f["b"] * 1e200
        return f"file:{write_csv(f, 'hy.csv')}?target=b", \
            r"regression target 'b' has values too large to scale"
    if case == "question_mark":  # a numeric column with a '?' for missing, row 5
        f["b"] = f["b"].astype(object)
        f.loc[4, "b"] = "?"
        return f"file:{write_csv(f, 'q.csv')}?target=label", \
            r"column 'b' is numbers but for 1 text value \('\?' in data row 5;"
    if case == "iso_dates":  # text in the file, a date column all the same
        f["day"] = [f"2024-03-{1 + i % 5:02d}" for i in range(len(f))]
        return f"file:{write_csv(f, 'dates.csv')}?target=label", \
            r"dates\.csv: column 'day' is a date/time column"
    if case == "header_twice":
        path = write_csv(f, "twice.csv")
        path.write_text(path.read_text().replace("a,b,color,label", "a,label,color,label", 1))
        return f"file:{path}?target=label", \
            r"twice\.csv: the header names column 'label' twice \(columns 2 and 4\)"
    if case == "latin1":
        path = write_csv(f, "latin.csv")
        path.write_bytes(path.read_bytes().replace(b"red", "r\xe9d".encode("latin-1")))
        line = 2 + list(f["color"]).index("red")
        return f"file:{path}?target=label", \
            rf"latin\.csv: not UTF-8 text \(byte 0xe9 on line {line}\): save it as UTF-8"
    raise AssertionError(case)


CASES = ["text", "constant", "one_class", "one_numeric_class", "directory", "missing_target",
         "no_target_given", "header_only", "not_numeric", "nested", "huge", "huge_target",
         "question_mark", "iso_dates", "header_twice", "latin1"]


@pytest.mark.parametrize("case", CASES)
def test_malformed_files_raise_precise_data_errors(write_csv: Writer,
                                                   good_frame: pd.DataFrame,
                                                   case: str) -> None:
    name, pattern = _bad(write_csv, good_frame, case)
    with pytest.raises(DataError, match=pattern) as info:
        load_problem(name)
    assert "\n" not in str(info.value)


def test_empty_file_and_unknown_formats(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match=r"empty\.csv: the file is empty"):
        load_problem(f"file:{empty}?target=y")
    blank = tmp_path / "blank.csv"
    blank.write_text("\n\n")
    with pytest.raises(DataError, match=r"blank\.csv: the file is empty"):
        load_problem(f"file:{blank}?target=y")
    xls = tmp_path / "data.xlsx"
    xls.write_text("x")
    with pytest.raises(DataError, match=r"unsupported format '\.xlsx'"):
        load_problem(f"file:{xls}?target=y")
    with pytest.raises(DataError, match=r"nope\.csv: no such file"):
        load_problem(f"file:{tmp_path / 'nope.csv'}?target=y")


@pytest.mark.parametrize("case", ["text", "constant", "one_class", "missing_target"])
def test_cli_prints_one_line_without_traceback(write_csv: Writer, good_frame: pd.DataFrame,
                                               capsys: pytest.CaptureFixture[str],
                                               case: str) -> None:
    name, _ = _bad(write_csv, good_frame, case)
    assert main(["problems", "show", name]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_a_path_holding_a_question_mark_is_named_with_it_escaped(
        tmp_path: Path, write_csv: Writer, good_frame: pd.DataFrame,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The first '?' of a name starts its options, so a file whose path holds one could not
    be named. Its path is percent-decoded now, as a URL's is: the '?' is written %3F. The
    name as written stays the problem's name in the warehouse; its id is its content's."""
    import warehouse

    odd = write_csv(good_frame, "my?data.csv")
    name = f"file:{tmp_path}/my%3Fdata.csv?target=label"
    wh = tmp_path / "wh"
    assert main(["train", "--dataset", name, "--epochs", "1", "--quiet", "--json",
                 "--warehouse", str(wh)]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    (logged,) = warehouse.connect(wh).execute(
        "SELECT problem_name, problem_id FROM runs WHERE run_id = ?", [run_id]).fetchall()
    plain = load_problem(f"file:{write_csv(good_frame, 'plain.csv')}?target=label")
    assert logged == (name, plain.problem_id)
    assert load_problem(name).name == name
    assert names_without_table([name]) == {}
    # unescaped, the '?' still ends the path: its error says how to write it
    with pytest.raises(ConfigError, match=r"malformed options 'data\.csv' in .*\(use "
                                          r"key=value&...; a '\?' in the path is written %3F\)"):
        load_problem(f"file:{odd}")


def test_a_percent_sign_in_a_path_is_read_as_before_unless_it_is_an_escape(
        tmp_path: Path, write_csv: Writer, good_frame: pd.DataFrame,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A '%' not before two hex digits is no escape: the path is the one written, as it was
    before. A '%' that is one and names the file only undecoded (a name written before the
    decoding) is one line saying to write it %25; so written, the file loads."""
    for file in ("growth 5%.csv", "100%zz.csv", "a+b%.csv"):
        path = write_csv(good_frame, file)
        p = load_problem(f"file:{path}?target=label")
        assert p.name == f"file:{path}?target=label" and p.n_rows == 120
    literal = write_csv(good_frame, "a%41.csv")  # %41 is 'A': file:.../a%41.csv is aA.csv
    name = f"file:{literal}?target=label"
    why = (f"{tmp_path}/aA.csv: no such file (a file: name's %-escapes are decoded, as in a "
           f"URL: for the file {literal} write each '%' of its path as %25)")
    with pytest.raises(DataError) as err:
        load_problem(name)
    assert str(err.value) == why
    assert names_without_table([name]) == {name: why}
    assert main(["problems", "show", name]) == 2
    assert capsys.readouterr().err == f"error: {why}\n"
    assert load_problem(f"file:{tmp_path}/a%2541.csv?target=label").n_rows == 120
    with pytest.raises(ConfigError, match=r"%-escapes are no UTF-8 text .* written %25"):
        load_problem(f"file:{tmp_path}/a%FF.csv?target=label")


def test_a_separator_at_each_line_end_is_no_row_name(tmp_path: Path, write_csv: Writer,
                                                     good_frame: pd.DataFrame) -> None:
    """Rows one (empty) field longer than the header: pandas read each row's first value
    as its name, shifting every column by one (the target read empty); rows whose extra
    field holds values keep pandas' reading, as R's write.table writes row names."""
    want = load_problem(f"file:{write_csv(good_frame, 'ok.csv')}?target=label")
    trailing = tmp_path / "trailing.csv"
    text = (tmp_path / "ok.csv").read_text().splitlines()
    trailing.write_text("\n".join([text[0], *(line + "," for line in text[1:])]) + "\n")
    got = load_problem(f"file:{trailing}?target=label")
    assert got.problem_id == want.problem_id
    named = tmp_path / "named.csv"
    named.write_text("\n".join([text[0], *(f"r{i},{line}" for i, line in
                                           enumerate(text[1:]))]) + "\n")
    named_problem = load_problem(f"file:{named}?target=label")
    assert named_problem.problem_id == want.problem_id
    assert any("read as the row's name and left out" in n for n in named_problem.notes)
    assert not any("row's name" in n for n in got.notes + want.notes)


@pytest.mark.parametrize("rows, says", [
    # the first row alone longer: pandas took all rows for row-named, padding the rest
    (lambda lines: [f"r0,{lines[0]}", *lines[1:]],
     r"row 2 after the header has 4 fields where the first has 5 and the header names 4"),
    # one row of a row-named file short of its name
    (lambda lines: [*(f"r{i},{v}" for i, v in enumerate(lines[:5])), *lines[5:]],
     r"row 6 after the header has 4 fields where the first has 5"),
    # two fields more: pandas read two levels of row names and shifted the header
    (lambda lines: [f"r{i},s{i},{v}" for i, v in enumerate(lines)],
     r"the first row after the header has 6 fields and the header names 4 columns"),
])
def test_rows_longer_than_the_header_but_not_row_names_are_an_error(
        tmp_path: Path, write_csv: Writer, good_frame: pd.DataFrame,
        rows: Callable[[list[str]], list[str]],
        says: str) -> None:
    """Each was read without a word: the header shifted onto the fields, or short rows
    padded (an audit's `a,b,y` header over rows of four values read as three columns)."""
    text = (write_csv(good_frame, "ok.csv")).read_text().splitlines()
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([text[0], *rows(text[1:])]) + "\n")
    with pytest.raises(DataError, match=says):
        load_problem(f"file:{bad}?target=label")


def test_drop_names_neither_the_target_nor_a_column_twice(write_csv: Writer,
                                                          good_frame: pd.DataFrame) -> None:
    path = write_csv(good_frame, "ok.csv")
    with pytest.raises(DataError, match=r"ok\.csv: cannot drop the target column 'label'$"):
        load_problem(f"file:{path}?target=label&drop=label")
    twice = load_problem(f"file:{path}?target=label&drop=b,b")
    assert [c for c, _ in twice.dropped].count("b") == 1


def test_column_names_with_spaces_at_an_end_are_quoted(tmp_path: Path) -> None:
    path = tmp_path / "spaced.csv"
    path.write_text("a, b, y\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(30)))
    with pytest.raises(DataError, match=r"no column 'y' to use as the target \(columns: a, "
                                        r"' b', ' y'\)$"):
        load_problem(f"file:{path}?target=y")


def test_a_subsample_of_one_class_is_refused(tmp_path: Path) -> None:
    """max_rows kept 20 rows of one class from a table of two: a one-class problem that
    trained to accuracy 1.0."""
    path = tmp_path / "rare.csv"
    path.write_text("x,y\n" + "".join(f"{i * 0.37 % 1:.3f},{'rare' if i == 500 else 'common'}\n"
                                      for i in range(1000)))
    with pytest.raises(DataError, match=r"rare\.csv: the 20 rows max_rows keeps of 1000 hold a "
                                        r"single class of target 'y'; nothing to classify"):
        load_problem(f"file:{path}?target=y&max_rows=20")


def test_infinite_targets_are_said_so_when_dropped(tmp_path: Path) -> None:
    path = tmp_path / "inf.csv"
    rows = [f"{i % 7},{'inf' if i < 3 else ('' if i < 5 else i * 0.5)}" for i in range(40)]
    path.write_text("x,y\n" + "\n".join(rows) + "\n")
    p = load_problem(f"file:{path}?target=y&task=regression")
    assert "dropped 5 rows with a missing target (3 of them infinite)" in p.notes


@pytest.mark.parametrize("name", ["t.csv.gz", "t.csv.bz2", "t.csv.xz", "t.tsv.gz"])
def test_a_compressed_table_reads_as_its_plain_copy(tmp_path: Path, write_csv: Writer,
                                                    good_frame: pd.DataFrame, name: str) -> None:
    """It was refused: "unsupported format '.gz'"."""
    want = load_problem(f"file:{write_csv(good_frame, 'ok.csv')}?target=label")
    good_frame.to_csv(tmp_path / name, index=False, sep="\t" if ".tsv" in name else ",")
    assert load_problem(f"file:{tmp_path / name}?target=label").problem_id == want.problem_id


def test_a_cut_or_false_compressed_file_is_one_line(tmp_path: Path, good_frame: pd.DataFrame,
                                                    ) -> None:
    good_frame.to_csv(tmp_path / "whole.csv.gz", index=False)
    (tmp_path / "cut.csv.gz").write_bytes((tmp_path / "whole.csv.gz").read_bytes()[:40])
    (tmp_path / "false.csv.gz").write_bytes(b"plain text, not gzip")
    with pytest.raises(DataError, match=r"cut\.csv\.gz: cannot read it \(Compressed file ended"):
        load_problem(f"file:{tmp_path / 'cut.csv.gz'}?target=label")
    with pytest.raises(DataError, match=r"false\.csv\.gz: cannot read it \(Not a gzipped file"):
        load_problem(f"file:{tmp_path / 'false.csv.gz'}?target=label")
