"""autograder collect: LMS exports (folders, zips) into submitted/, bad files reported, never a crash."""

import json
import os
import stat
import zipfile
from pathlib import PurePosixPath

import pytest

from autograder.commands.collect import identify

from support.course import ASSIGNMENT, NOTEBOOK, autograder, make_course, source_notebook, table

pytestmark = pytest.mark.xdist_group("autograder")


def test_identify_naming_rules():
    nbs = ["a02_broadcasting"]
    assert identify(PurePosixPath("alice_a02_broadcasting.ipynb"), nbs, {}) == ("alice", "a02_broadcasting")
    assert identify(PurePosixPath("a02_broadcasting_alice.ipynb"), nbs, {}) == ("alice", "a02_broadcasting")
    assert identify(PurePosixPath("a02_broadcasting-bob.ipynb"), nbs, {}) == ("bob", "a02_broadcasting")
    assert identify(PurePosixPath("export/carol/a02_broadcasting.ipynb"), nbs, {}) == ("carol", "a02_broadcasting")
    assert identify(PurePosixPath("sub_12.ipynb"), nbs, {"sub_12.ipynb": "dave"}) == ("dave", "a02_broadcasting")
    for bad, why in [("a02_broadcasting.ipynb", "no student"), ("alice_homework.ipynb", "unknown notebook")]:
        with pytest.raises(ValueError, match=why):
            identify(PurePosixPath(bad), nbs, {})
    # two notebooks whose names could both explain the file name
    with pytest.raises(ValueError, match="ambiguous"):
        identify(PurePosixPath("a01_x_a01.ipynb"), ["a01", "a01_x"], {})


@pytest.fixture
def course(tmp_path):
    return make_course(tmp_path / "course")


def _notebook_bytes(marker: str = "") -> str:
    nb = source_notebook()
    nb["cells"][0]["source"] = "".join(nb["cells"][0]["source"]) + marker
    return json.dumps(nb)


def test_collect_folder_reports_bad_files_and_imports_the_rest(course, tmp_path, capsys):
    export = tmp_path / "export"
    (export / "carol").mkdir(parents=True)
    (export / f"alice_{NOTEBOOK}.ipynb").write_text(_notebook_bytes())
    (export / f"{NOTEBOOK}_bob.ipynb").write_text(_notebook_bytes())
    (export / "carol" / f"{NOTEBOOK}.ipynb").write_text(_notebook_bytes())
    (export / f"dave_{NOTEBOOK}.ipynb").write_text('{"cells": [')                    # not JSON
    (export / f"erin_{NOTEBOOK}.ipynb").write_text('{"hello": "world"}')             # JSON, not a notebook
    (export / "frank_homework.ipynb").write_text(_notebook_bytes())                   # unknown notebook
    (export / f"{NOTEBOOK}.ipynb").write_text(_notebook_bytes())                      # whose?
    (export / "notes.txt").write_text("not a notebook")
    (export / "..hidden_a00_toy.ipynb").write_text(_notebook_bytes())                 # bad student id
    os.symlink("/etc/passwd", export / f"gina_{NOTEBOOK}.ipynb")                        # never followed

    assert autograder(course, "collect", ASSIGNMENT, str(export)) == 0
    out = capsys.readouterr().out
    assert "3 student(s) imported, 7 file(s) skipped" in out
    for student in ("alice", "bob", "carol"):
        folder = course.submitted_dir(student, ASSIGNMENT)
        assert (folder / f"{NOTEBOOK}.ipynb").read_text() == _notebook_bytes()  # the student's bytes, as is
        assert (folder / "timestamp.txt").read_text().endswith("UTC")
    rows = table(out)
    expected = {f"dave_{NOTEBOOK}.ipynb": "not JSON", f"erin_{NOTEBOOK}.ipynb": "JSON but not a valid notebook",
                "frank_homework.ipynb": "unknown notebook", f"{NOTEBOOK}.ipynb": "no student",
                "notes.txt": "not a notebook file", f"..hidden_{NOTEBOOK}.ipynb": "bad student id",
                f"gina_{NOTEBOOK}.ipynb": "symbolic link"}
    for file, reason in expected.items():
        assert rows[file][0].startswith(reason), (file, rows.get(file))
    with course.gradebook() as gb:
        assert sorted(s.id for s in gb.students) == ["alice", "bob", "carol"]


def test_collect_zip_skips_path_traversal_and_never_writes_outside(course, tmp_path, capsys):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"submissions/alice/{NOTEBOOK}.ipynb", _notebook_bytes())
        zf.writestr(f"../evil_{NOTEBOOK}.ipynb", _notebook_bytes())
        zf.writestr(f"../../evil/{NOTEBOOK}.ipynb", _notebook_bytes())
        zf.writestr(f"/tmp/abs_{NOTEBOOK}.ipynb", _notebook_bytes())
        link = zipfile.ZipInfo(f"link_{NOTEBOOK}.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
        zf.writestr(f"__MACOSX/._alice_{NOTEBOOK}.ipynb", b"\x00junk")
        zf.writestr(f"bob_{NOTEBOOK}.ipynb", b"\xff\xfe not utf-8")

    assert autograder(course, "collect", ASSIGNMENT, str(archive)) == 0
    out = capsys.readouterr().out
    assert "1 student(s) imported, 5 file(s) skipped" in out
    assert out.count("unsafe path in the zip") == 3
    assert "symbolic link in the zip" in out and "not JSON" in out
    assert (course.submitted_dir("alice", ASSIGNMENT) / f"{NOTEBOOK}.ipynb").exists()
    everything = {p.name for p in tmp_path.rglob("*")}
    assert not {n for n in everything if "evil" in n or "abs_" in n or "link_" in n}


def test_resubmission_replaces_and_identical_reimport_changes_nothing(course, tmp_path, capsys):
    export = tmp_path / "export"
    export.mkdir()
    (export / f"alice_{NOTEBOOK}.ipynb").write_text(_notebook_bytes("first"))
    assert autograder(course, "collect", ASSIGNMENT, str(export)) == 0
    assert table(capsys.readouterr().out)["alice"] == [NOTEBOOK, "new"]
    stamp = (course.submitted_dir("alice", ASSIGNMENT) / "timestamp.txt").read_text()

    assert autograder(course, "collect", ASSIGNMENT, str(export)) == 0
    assert "unchanged" in capsys.readouterr().out
    assert (course.submitted_dir("alice", ASSIGNMENT) / "timestamp.txt").read_text() == stamp

    (export / f"alice_{NOTEBOOK}.ipynb").write_text(_notebook_bytes("second"))
    os.utime(export / f"alice_{NOTEBOOK}.ipynb", (2_000_000_000, 2_000_000_000))
    assert autograder(course, "collect", ASSIGNMENT, str(export)) == 0
    assert f"resubmitted: replaced the submission of {stamp}" in capsys.readouterr().out
    folder = course.submitted_dir("alice", ASSIGNMENT)
    assert "second" in (folder / f"{NOTEBOOK}.ipynb").read_text()
    assert (folder / "timestamp.txt").read_text() == "2033-05-18 03:33:20.000000 UTC"
    assert sorted(p.name for p in folder.parent.iterdir()) == [ASSIGNMENT]  # no staging leftovers


def test_map_csv_names_students(course, tmp_path, capsys):
    export = tmp_path / "export"
    export.mkdir()
    (export / "submission_1234.ipynb").write_text(_notebook_bytes())
    (export / "submission_5678.ipynb").write_text(_notebook_bytes())
    ids = tmp_path / "ids.csv"
    ids.write_text("file,student\nsubmission_1234.ipynb,zoe\nsubmission_5678.ipynb,../../etc\n")
    assert autograder(course, "collect", ASSIGNMENT, str(export), "--map", str(ids)) == 2
    assert "line 3: bad student id '../../etc'" in capsys.readouterr().err
    ids.write_text("file,student\nsubmission_1234.ipynb,zoe\n")
    assert autograder(course, "collect", ASSIGNMENT, str(export), "--map", str(ids)) == 0
    out = capsys.readouterr().out
    rows = table(out)
    assert rows["zoe"] == [NOTEBOOK, "new"] and rows["submission_5678.ipynb"][0].startswith("unknown notebook")


def _corrupt(archive, marker: bytes) -> None:
    """Flip one byte of a stored (uncompressed) entry's data: its CRC no longer matches."""
    data = bytearray(archive.read_bytes())
    at = data.index(marker)
    data[at] ^= 0x20
    archive.write_bytes(bytes(data))


def test_one_bad_file_is_skipped_with_its_reason_and_the_good_one_beside_it_imported(course, tmp_path, capsys):
    """Each of these killed collect (issue 19 item 6); now each is one skipped row."""
    archive = tmp_path / "export.zip"
    deep = "[" * 100_000 + "]" * 100_000
    nested = json.loads(_notebook_bytes())
    nested["metadata"]["x"] = json.loads("[" * 200 + "]" * 200)   # JSON, but deeper than any notebook
    ansi = f"\x1b[2J\x1b[31mmallory\x07_{NOTEBOOK}.ipynb"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(f"alice_{NOTEBOOK}.ipynb", _notebook_bytes())
        zf.writestr(f"bob_{NOTEBOOK}.ipynb", _notebook_bytes("CORRUPTME"))
        zf.writestr(f"carol_{NOTEBOOK}.ipynb", deep)
        zf.writestr(f"dave_{NOTEBOOK}.ipynb", json.dumps(nested))
        zf.writestr(f"{'e' * 256}_{NOTEBOOK}.ipynb", _notebook_bytes())
        zf.writestr(f"{'f' * 65}_{NOTEBOOK}.ipynb", _notebook_bytes())
        zf.writestr(ansi, _notebook_bytes())
        zf.writestr(f"{'g' * 64}_{NOTEBOOK}.ipynb", _notebook_bytes())  # the longest id allowed
    _corrupt(archive, b"CORRUPTME")

    assert autograder(course, "collect", ASSIGNMENT, str(archive)) == 0
    out = capsys.readouterr().out
    assert "2 student(s) imported, 6 file(s) skipped" in out
    assert (course.submitted_dir("alice", ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_text() == _notebook_bytes()
    assert (course.submitted_dir("g" * 64, ASSIGNMENT) / f"{NOTEBOOK}.ipynb").exists()
    rows = table(out)
    assert rows[f"bob_{NOTEBOOK}.ipynb"][0].startswith("corrupt zip entry (Bad CRC-32")
    assert rows[f"carol_{NOTEBOOK}.ipynb"][0].startswith("nested too deep")
    assert rows[f"dave_{NOTEBOOK}.ipynb"][0].startswith("nested more than 64 levels deep")
    for long_id in ("e" * 256, "f" * 65):
        reason = rows[f"{long_id}_{NOTEBOOK}.ipynb"][0]
        assert reason.startswith("bad student id") and "1 to 64 characters" in reason, reason
    # control characters reach the terminal escaped, never raw
    assert "\x1b" not in out and "\x07" not in out
    assert rows[repr(ansi)[1:-1]][0].startswith("bad student id '\\x1b[2J")
    with course.gradebook() as gb:
        assert sorted(s.id for s in gb.students) == ["alice", "g" * 64]


def test_a_file_name_that_is_not_utf8_is_skipped_and_printed_escaped(course, tmp_path, capsys):
    export = tmp_path / "export"
    export.mkdir()
    (export / f"alice_{NOTEBOOK}.ipynb").write_text(_notebook_bytes())
    with open(os.path.join(os.fsencode(export), b"b\xffb_" + NOTEBOOK.encode() + b".ipynb"), "w") as handle:
        handle.write(_notebook_bytes())
    os.mkdir(os.path.join(os.fsencode(export), b"c\xe9line"))
    with open(os.path.join(os.fsencode(export), b"c\xe9line", NOTEBOOK.encode() + b".ipynb"), "w") as handle:
        handle.write(_notebook_bytes())

    assert autograder(course, "collect", ASSIGNMENT, str(export)) == 0
    out = capsys.readouterr().out
    assert "1 student(s) imported, 2 file(s) skipped" in out
    rows = table(out)
    assert rows[f"b\\udcffb_{NOTEBOOK}.ipynb"][0].startswith("bad student id")
    assert rows[f"c\\udce9line/{NOTEBOOK}.ipynb"][0].startswith("bad student id")
    assert (course.submitted_dir("alice", ASSIGNMENT) / f"{NOTEBOOK}.ipynb").exists()


def _bomb_zip(path, entries: int, size: int) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"alice_{NOTEBOOK}.ipynb", _notebook_bytes())
        for i in range(entries):
            zf.writestr(f"s{i}_{NOTEBOOK}.ipynb", b" " * size)


def test_zip_bombs_are_refused_from_the_directory_before_anything_is_unpacked(course, tmp_path, capsys,
                                                                              monkeypatch):
    import autograder.commands.collect as collect_module

    opened = []
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, *a, **k: opened.append(a) or real_open(self, *a, **k))
    archive = tmp_path / "bombs.zip"
    _bomb_zip(archive, entries=60, size=2**20)
    opened.clear()  # writing the zip opened its entries too

    # the unpacked total (60 MiB of notebooks here) against a 50 MiB limit
    monkeypatch.setattr(collect_module, "MAX_ZIP_NOTEBOOK_BYTES", 50 * 2**20)
    assert autograder(course, "collect", ASSIGNMENT, str(archive)) == 2
    err = capsys.readouterr().err
    assert "would unpack to 60 MiB, more than the 50 MiB one import accepts" in err and "nothing was unpacked" in err
    assert opened == [] and not course.submitted_dir("alice", ASSIGNMENT).exists()

    # the number of entries
    monkeypatch.setattr(collect_module, "MAX_ZIP_NOTEBOOK_BYTES", 2**30)
    monkeypatch.setattr(collect_module, "MAX_ZIP_ENTRIES", 50)
    assert autograder(course, "collect", ASSIGNMENT, str(archive)) == 2
    assert "has 61 entries, more than the 50 one import accepts" in capsys.readouterr().err
    assert opened == []

    # one entry over the per-notebook limit: skipped unread, the rest imported
    monkeypatch.setattr(collect_module, "MAX_ZIP_ENTRIES", 100)
    monkeypatch.setattr(collect_module, "MAX_NOTEBOOK_BYTES", 2**20 - 1)
    _bomb_zip(archive, entries=1, size=2**20)
    opened.clear()  # writing the zip opened its entries too
    assert autograder(course, "collect", ASSIGNMENT, str(archive)) == 0
    rows = table(capsys.readouterr().out)
    assert rows[f"s0_{NOTEBOOK}.ipynb"][0].startswith("larger than the size limit")
    assert rows["alice"] == [NOTEBOOK, "new"] and len(opened) == 1
