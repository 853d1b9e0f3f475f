"""autograder collect: LMS exports (folders, zips) into submitted/, bad files reported, never a crash."""

import json
import os
import stat
import zipfile
from pathlib import PurePosixPath

import pytest

from autograder.collect import identify

from autograder_support import ASSIGNMENT, NOTEBOOK, autograder, make_course, source_notebook, table

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
