"""A semester on the class's hub, as its people live it, and as its hostile students try it.

The instructor releases a01 to a06 with a due date, three students fetch them into their homes
through the Assignments tab's API, answer (A everything, B part of it, C everything but after the
due date), run a chapter in their own assignment folder, submit; the instructor collects, grades
(a01 on a Dask cluster the instructor runs, with TLS, and the capstone here), grades a written
answer by hand in the formgrader in a real browser, returns feedback through the exchange; each
student fetches it and the page, opened in Chromium, shows its math typeset with nothing loaded
from outside the machine; the grades leave as grades.csv and the Canvas and Moodle import files.

Every instructor command runs as the instructor does: from their terminal, as themselves, with the
grader deploy/hub.py installed for the instructors' group; one is started by root, and runs as the
course's owner. Meanwhile the students attack (issue 29): B's written answer carries a script for
the instructor's formgrader; Mallory, a student with a shell, tries to publish an assignment
before the instructor, to read the grader, to submit in A's name and in a ghost's, to make the
collect follow links to the instructor's solutions and to root's files, to stop it with a named
pipe, /dev/zero, deep folders and names that are not times, to reach the Dask workers; C, late,
rewrites her submission's time. None of it works, and nobody's collect, grading or feedback stops.
The term's rules (issue 41): A gets an extension, C spends a late day on her late a01.

The hub is tests/support/hub.py's (its fixture: system users of its own, removed at the end, every
process stopped by its id). Grading is kept to what the semester needs to show: a01 for all, the
capstone a06 for A. C is late by the due date itself: the instructor moves it (a re-release with
--due) after A and B have submitted, as an instructor does; nobody waits for a clock.
"""
from __future__ import annotations

import csv
import json
import os
import pwd
import re
import secrets
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
import pytest
import requests

from autograder.course.directory import Course

from support.browser import Chromium, Tab
from support.chapters import runnable_chapter
from support.course import answered
from support.hub import (
    COURSE,
    GRADER,
    PREFIX,
    REPO,
    Browser,
    Hub,
    as_user,
    dask_cluster,
    user_memory,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hub")]

SOURCE = REPO / "assignments" / "source"
# The semester of the issue: a01 to a06 (an assignment still being written in the working tree,
# copied into the instructor's course by `deploy/hub.py users`, is taken out of this course).
ASSIGNMENTS = sorted(p.name for p in SOURCE.iterdir() if re.match(r"a0[1-6]_", p.name))
GRADED = ["a01_graphs"]  # for all three; the capstone for A alone
CAPSTONE = ASSIGNMENTS[-1]
CHAPTER = "01_graphs"  # run by each student in a01_graphs/, the folder the book pairs it with
WRITTEN = {"a01-diamond-written": 2, "a01-accumulate-written": 1}  # what the instructor gives A by hand
DUE_IN = timedelta(days=7)  # moved to "now" once A and B have submitted: then C is late
VENV = PREFIX / "venv"


def home(user: str) -> Path:
    return Path(os.path.expanduser(f"~{user}"))


def cli(course: Path, *args: str, as_root: bool = False, status: int = 0) -> str:
    """The instructor's command, typed in their terminal on the hub (as themselves), or ``as_root``
    by the machine's administrator (it then runs as the course's owner)."""
    command = [str(GRADER), "--course", str(course), *args]
    if as_root:
        done = subprocess.run(command, capture_output=True, text=True, cwd="/", timeout=3600)
    else:
        done = as_user(course.owner(), *command, timeout=3600)
    assert done.returncode == status, f"autograder {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def run_chapter(student: Browser) -> tuple[int, str, dict | None]:
    """The chapter's notebook downloaded into the student's a01_graphs/ (through their server)
    and run there as the student, with the hub's environment, as their own kernel would; the
    cells that show an error on purpose print it. Returns the exit code, the run's log and the
    executed notebook (None if a cell failed)."""
    notebook = f"a01_graphs/{CHAPTER}.ipynb"
    chapter = runnable_chapter(f"book/{CHAPTER}")
    put = student.server(f"api/contents/{notebook}", "PUT", json={"type": "notebook", "content": chapter})
    assert put.status_code in (200, 201), put.text[:300]
    folder = home(student.user) / "a01_graphs"
    log = folder.parent / f".{CHAPTER}-run.log"
    with log.open("w") as stderr:
        run = subprocess.Popen(
            ["runuser", "-u", student.user, "--", "env", f"HOME={home(student.user)}", str(VENV / "bin" / "jupyter"),
             "nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=600",
             "--output", f"{CHAPTER}-run.ipynb", f"{CHAPTER}.ipynb"],
            cwd=folder, stdout=subprocess.DEVNULL, stderr=stderr)
        peak = 0
        while run.poll() is None:  # the kernel's resident memory, sampled while the chapter runs
            peak = max(peak, kernel_memory(student.user))
            time.sleep(0.5)
    KERNEL_PEAK[student.user] = peak
    executed = folder / f"{CHAPTER}-run.ipynb"
    text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text())  # the traceback's terminal colours
    return run.returncode, text, json.loads(executed.read_text()) if run.returncode == 0 else None


KERNEL_PEAK: dict[str, int] = {}


def kernel_memory(user: str) -> int:
    total = 0
    for p in psutil.process_iter(["username", "cmdline", "memory_info"]):
        if p.info["username"] == user and p.info["memory_info"] is not None \
                and "ipykernel_launcher" in " ".join(p.info["cmdline"] or []):
            total += p.info["memory_info"].rss
    return total


def grade_by_hand(chromium: Chromium, site: Hub, student: str, scores: dict[str, int]) -> None:
    """The instructor, in the formgrader: Manage Students, the student, a01, the notebook; a score
    typed into each written answer's box and saved (the box saves itself when it loses focus)."""
    tab = Tab(chromium, site.base)
    tab.log_in(site.instructor, site.passwords[site.instructor])
    prefix = f"/user/{site.instructor}/formgrader"
    tab.go(prefix)
    tab.click(f'a[href$="{prefix}/manage_students"]', "the formgrader's Manage Students link")
    tab.click(f'a[href$="{prefix}/manage_students/{student}"]', f"{student} in the students' list")
    tab.click(f'a[href$="{prefix}/manage_students/{student}/a01_graphs"]', f"a01 among {student}'s assignments")
    tab.click(f'a[href*="{prefix}/submissions/"]', f"{student}'s a01 notebook")
    for grade_id, score in scores.items():
        box = f"document.getElementById({json.dumps(grade_id)}).closest('.nbgrader_cell').querySelector('.score')"
        tab.until(f"document.getElementById({json.dumps(grade_id)}) && {box}", f"the score box of {grade_id}")
        tab.until(f"{box}.classList.contains('needs_manual_grade')", f"{grade_id} waiting for a grade")
        tab.js(f"{box}.focus()")
        chromium._call("Input.insertText", session=tab.session, text=str(score))
        tab.js(f"{box}.blur()")
        tab.until(f"!{box}.classList.contains('needs_manual_grade') && {box}.value === '{score}'",
                  f"{grade_id} saved with {score}")


def feedback_page(chromium: Chromium, site: Hub, student: Browser) -> dict:
    """The student's fetched feedback page, opened from their server in their browser, once
    MathJax has typeset it: what it shows and what it asked the network for."""
    listing = student.server("api/contents/a01_graphs/feedback").json()
    [stamp] = [item["name"] for item in listing["content"] if item["type"] == "directory"]
    tab = Tab(chromium, site.base)
    tab.log_in(student.user, site.passwords[student.user])
    tab.go(f"/user/{student.user}/files/a01_graphs/feedback/{stamp}/a01_graphs.html")
    tab.until("window.MathJax && MathJax.startup && MathJax.startup.promise", "MathJax in the page")
    tab.js("MathJax.startup.promise")
    shown = tab.js("""({
        typeset: document.querySelectorAll('mjx-container').length,
        prose: [...document.querySelectorAll('.text_cell_render, .jp-RenderedMarkdown')]
            .map(e => e.innerText).join('\\n'),
        title: document.title,
    })""")
    shown["requests"] = tab.requests()
    return shown


XSS = ('<img src=x onerror="fetch(\'api/contents/course/nbgrader_config.py\',{method:\'PUT\','
       'headers:{\'Content-Type\':\'application/json\'},body:JSON.stringify({type:\'file\',format:\'text\','
       'content:\'import os; os.system(\\\'touch /tmp/pwned\\\')\'})});window.pwned=1">'
       '<script>window.pwned=2</script>')


def hostile_records(site: Hub, inbound: Path, source: Path) -> dict[str, str]:
    """What Mallory makes in the exchange's inbound folder with her own account (she can write
    there, and owns what she makes): {record: what it tries}. Each is a folder nbgrader's submit
    would make, or one it would not."""
    made = {}

    def record(owner_name: str, stamp: str, tries: str, script: str) -> None:
        name = f"{owner_name}+a01_graphs+{stamp}+{secrets.token_urlsafe(6)}"
        done = as_user(site.mallory, "sh", "-c", f"cd {inbound} && mkdir '{name}' && cd '{name}' && {script}")
        assert done.returncode == 0, done.stderr
        made[name] = tries

    notebook = "cp /etc/hostname a01_graphs.ipynb"  # a file of hers (not a notebook: it never gets that far)
    later = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    record(site.students[0], later, "A's name", f"{notebook} && echo '{later}' > timestamp.txt")
    record("ghost", later, "a student with no account", notebook)
    record(site.mallory, later, "links to the solutions and to root's files",
           f"ln -s {source} a01_graphs.ipynb && ln -s /etc/shadow submission_secret.txt")
    record(site.mallory, later, "a named pipe", "mkfifo a01_graphs.ipynb")
    record(site.mallory, later, "/dev/zero", "ln -s /dev/zero a01_graphs.ipynb")
    record(site.mallory, later, "B's folder inside hers",
           f"mkdir {site.students[1]} && cp /etc/hostname {site.students[1]}/a01_graphs.ipynb")
    record(site.mallory, "not-a-time", "a name that is not a time", "echo 'the twelfth of never' > timestamp.txt")
    record(site.mallory, later, "forty nested folders",
           "for i in $(seq 40); do mkdir " + "d" * 120 + " && cd " + "d" * 120 + "; done 2>/dev/null; true")
    # her last: the released notebook, unanswered, and a "secret" that is a link to root's shadow file
    record(site.mallory, later, "a secret linked to a root-only file",
           f"cp {inbound.parent / 'outbound' / 'a01_graphs' / 'a01_graphs.ipynb'} . && "
           "ln -s /etc/shadow submission_secret.txt")
    return made


def test_a_semester_on_the_hub(hub, tmp_path, capsys):
    started = time.monotonic()
    people = {user: Browser(hub, user) for user in [hub.instructor, *hub.students]}
    with ThreadPoolExecutor(len(people)) as pool:  # the class arrives at once, as it does in a lecture
        spawn = dict(zip(people, pool.map(Browser.spawn, people.values()), strict=True))
    a, b, c = (people[s] for s in hub.students)
    idle = {s: user_memory(s) for s in hub.students}
    course = home(hub.instructor) / "course"
    exchange = str(hub.exchange)
    as_user(hub.instructor, "sh", "-c", " ".join(f"rm -rf {course / 'source' / other.name};"
                                                 for other in (course / "source").iterdir()
                                                 if other.name not in ASSIGNMENTS))
    outbound = hub.exchange / COURSE / "outbound"

    # Before anything is released, Mallory tries to publish her own "a01" and to read the grader.
    for attempt in (["mkdir", "-p", str(outbound / "a01_graphs")], ["ls", str(GRADER.parent.parent)],
                    [str(VENV / "bin" / "python"), "-c", "import autograder"]):
        done = as_user(hub.mallory, *attempt)
        assert done.returncode != 0, (attempt, done.stdout)
    assert not (outbound / "a01_graphs").exists()

    # The instructor releases the six assignments, due in a week.
    due = datetime.now(timezone.utc).replace(microsecond=0) + DUE_IN
    release = time.monotonic()
    out = cli(course, "release", "--all", "--exchange", exchange, "--due", f"{due:%Y-%m-%d %H:%M:%S}")
    release = time.monotonic() - release
    assert out.count("published to the nbgrader exchange") == len(ASSIGNMENTS), out

    # Each student sees the six and fetches them into their home.
    for student in (a, b, c):
        listed = student.assignments()["value"]
        assert sorted(x["assignment_id"] for x in listed if x["status"] == "released") == ASSIGNMENTS
        for assignment in ASSIGNMENTS:
            student.assignments("fetch", assignment_id=assignment)
        assert sorted(p.name for p in home(student.user).iterdir() if p.name in ASSIGNMENTS) == ASSIGNMENTS

    def write(student: Browser, assignment: str, share: float, written: dict[str, str] | None = None) -> None:
        path = f"api/contents/{assignment}/{assignment}.ipynb"
        fetched = student.server(path).json()["content"]
        source = json.loads((SOURCE / assignment / f"{assignment}.ipynb").read_text())
        nb = answered(fetched, source, share)
        for cell in nb["cells"]:
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") in (written or {}):
                cell["source"] = written[cell["metadata"]["nbgrader"]["grade_id"]]
        put = student.server(path, "PUT", json={"type": "notebook", "content": nb})
        assert put.status_code == 200, put.text[:300]

    # A and C answer everything (a chapter runs on the whole engine: chapter 1 already multiplies,
    # which a02 builds), B half of a01, and B's written answer is a script for the formgrader.
    for assignment in ASSIGNMENTS:
        write(a, assignment, 1.0)
        write(c, assignment, 1.0)
    for assignment in GRADED:
        write(b, assignment, 0.5, written={grade_id: XSS for grade_id in WRITTEN})
    for assignment in GRADED:
        a.assignments("submit", assignment_id=assignment)
        b.assignments("submit", assignment_id=assignment)
    a.assignments("submit", assignment_id=CAPSTONE)

    # Each runs the chapter in their own a01_graphs/, as themselves: A's and C's answers are in the
    # engine; B's run stops at the first exercise B has not done, and names it.
    for student in (a, c):
        code, log, run = run_chapter(student)
        assert code == 0 and run is not None, log[-3000:]
        loaded = "".join("".join(o.get("text", "")) for o in run["cells"][1]["outputs"]
                         if o["output_type"] == "stream")  # a stream's text is a list of lines in the file
        assert re.match(r"Your exercises from your notebooks: \d+ done and in use$", loaded.strip()), \
            loaded
    code, log, _ = run_chapter(b)
    assert code != 0 and re.search(r"NotImplementedError: \S.* is an exercise you have not done yet: write it in "
                                   r"your notebook a0\d · ", log), log[-3000:]

    # A's session and A's own API token open nothing of B's: not the server, not the files.
    token = a.s.post(f"{hub.base}/hub/api/users/{a.user}/tokens", headers=a.headers(), timeout=30,
                     json={"note": "semester test"}).json()["token"]
    for path in ("api/contents/a01_graphs/a01_graphs.ipynb", "files/a01_graphs/a01_graphs.ipynb", "lab"):
        assert a.server(path, owner=b.user, allow_redirects=True).status_code in (403, 404), path
        answer = requests.get(f"{hub.base}/user/{b.user}/{path}", headers={"Authorization": f"token {token}"},
                              timeout=60, allow_redirects=False)
        assert answer.status_code in (403, 404), (path, answer.status_code)
    assert requests.get(f"{hub.base}/user/{a.user}/api/contents", headers={"Authorization": f"token {token}"},
                        timeout=60).status_code == 200  # the token itself works, on A's own server
    peek = as_user(a.user, "cat", home(b.user) / "a01_graphs" / "a01_graphs.ipynb")
    assert peek.returncode != 0 and "Permission denied" in peek.stderr
    # ... and no student lists another's submission: not in the exchange, not through the tab.
    inbound = hub.exchange / COURSE / "inbound"
    peek = as_user(a.user, "ls", inbound)
    assert peek.returncode != 0 and "Permission denied" in peek.stderr
    for student in (a, b):
        listed = student.assignments()["value"]
        owners = {s["student_id"] for x in listed if x["status"] == "submitted" for s in x.get("submissions", [x])}
        assert owners == {student.user}, listed
    # The formgrader is the instructor's alone; homes are private.
    assert a.server("formgrader").status_code == 404
    assert people[hub.instructor].server("formgrader", allow_redirects=True).status_code == 200
    assert all(home(s).stat().st_mode & 0o077 == 0 for s in hub.students)

    # Mallory's records in the exchange; the instructor's course configuration leaves a mark of
    # who runs it, and tries to write where only root may.
    attacks = hostile_records(hub, inbound, course / "source" / "a01_graphs" / "a01_graphs.ipynb")
    root_only = tmp_path / "root-only"  # tmp_path is root's alone (0700)
    root_only.mkdir(mode=0o700)
    mark = Path(tempfile.gettempdir()) / f"{hub.instructor}-config-ran-as"  # where the instructor may write
    mark.write_text("")
    mark.chmod(0o666)
    config = course / "nbgrader_config.py"
    as_user(hub.instructor, "sh", "-c", f"cat >> {config} <<'EOF'\nimport os\nopen({str(mark)!r}, 'w')"
                                        f".write(str(os.getuid()))\ntry:\n    open({str(root_only / 'pwned')!r},"
                                        " 'w')\nexcept OSError:\n    pass\nEOF")

    # While C is still working: collect (started by root: it runs as the course's owner) ...
    out = cli(course, "collect", "a01_graphs", "--exchange", exchange, as_root=True)
    assert mark.read_text() == str(course.stat().st_uid) and not (root_only / "pwned").exists()
    imported = {row[0] for row in csv_table(out, "student")}
    assert imported == {a.user, b.user, hub.mallory}, out  # Mallory: her last submission, her own
    skipped = dict(csv_table(out, "file"))
    named = {tries: [reason for key, reason in skipped.items() if key.split("/")[0] == name]
             for name, tries in attacks.items()}
    assert named["A's name"] == [f"made by {hub.mallory}, not by {a.user}: a submission in another's name is "
                                 "refused"], out
    assert named["a student with no account"][0].startswith(f"made by {hub.mallory}, not by ghost"), out
    assert sorted(named["links to the solutions and to root's files"]) == ["a symbolic link (not followed)"] * 2
    assert named["a named pipe"] == ["a named pipe (not opened)"] and named["/dev/zero"] == [
        "a symbolic link (not followed)"], out
    assert named["a secret linked to a root-only file"] == ["a symbolic link (not followed)"], out
    assert not (course / "submitted" / "ghost").exists()
    assert not (course / "submitted" / hub.mallory / "a01_graphs" / "submission_secret.txt").exists()
    for user in (a.user, b.user, hub.mallory):  # what each submitted, not what Mallory made in their name
        theirs = inbound_notebook(inbound, user)
        assert (course / "submitted" / user / "a01_graphs" / "a01_graphs.ipynb").read_bytes() == theirs
    cli(course, "collect", CAPSTONE, "--exchange", exchange)

    # ... grade A's capstone here (sandboxes without privilege: the instructor is no one special),
    # and A's and B's a01 on a Dask cluster the instructor runs, which only a certificate reaches.
    graded = time.monotonic()
    cli(course, "grade", CAPSTONE, "--jobs", "1")
    with dask_cluster(hub, tmp_path) as (address, grader_tls):  # A, B and Mallory
        cli(course, "grade", "a01_graphs", "--scheduler", address, *grader_tls)
        for attempt in (f"from distributed import Client; Client({address!r}, timeout=5).run(print)",
                        f"from distributed import Client; Client({address.replace('tls', 'tcp')!r}, timeout=5)"):
            done = as_user(hub.mallory, VENV / "bin" / "python", "-c", attempt, timeout=120)
            assert done.returncode != 0 and "Traceback" in done.stderr, done.stdout
        assert as_user(hub.mallory, "cat", grader_tls[-1]).returncode != 0  # the instructor's key
    grading = time.monotonic() - graded

    # The instructor moves the due date to now; C submits after it, and tries to make her
    # submission older than it is (its timestamp.txt is hers to write).
    now = datetime.now(timezone.utc).replace(microsecond=0)
    cli(course, "release", "a01_graphs", "--exchange", exchange, "--due", f"{now:%Y-%m-%d %H:%M:%S}")
    # past the due date (to the second) when C submits; the release itself usually took longer than that
    time.sleep(max(0.0, (now + timedelta(seconds=1.5) - datetime.now(timezone.utc)).total_seconds()))
    c.assignments("submit", assignment_id="a01_graphs")
    backdated = (now - timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    [record] = inbound.glob(f"{c.user}+a01_graphs+*")  # (nbgrader's submit prints it to C's terminal)
    done = as_user(c.user, "sh", "-c", f"echo '{backdated}' > '{record}/timestamp.txt'")
    assert done.returncode == 0, done.stderr
    cli(course, "collect", "a01_graphs", "--exchange", exchange)
    cli(course, "grade", "a01_graphs", "--jobs", "1", "--students", c.user)
    # The term's rules: A has an extension (an illness), and the course gives two late days, which
    # C's late a01 spends one of; nothing is judged again
    out = cli(course, "extend", a.user, "a01_graphs", "--by", "2d")
    assert "late penalties re-applied from the stored scores" in out, out
    days = {row[0]: row[1:4] for row in csv_table(cli(course, "late-days", "--budget", "2"), "student")}
    assert days[c.user] == ["1", "1", "a01_graphs 1"] and days[a.user] == ["0", "2"], days

    # The written answers, graded by hand in the formgrader (as the instructor, who owns the course:
    # no command ran as root in it). B's answer, opened there, runs nothing.
    owner = course.stat().st_uid
    assert owner != 0
    left = [str(p) for p in [course, *course.rglob("*")] if p.lstat().st_uid != owner]
    assert not left, f"files of the instructor's course left to another owner: {left[:5]}"
    with Chromium() as chromium:
        config_before = config.read_text()
        page = formgrader_page(chromium, hub, b.user)
        assert page["pwned"] is None and page["handlers"] == 0 and page["boxes"] > 0, page
        assert "script-src 'self' 'nonce-" in page["policy"], page["policy"]
        assert config.read_text() == config_before and not Path("/tmp/pwned").exists()
        grade_by_hand(chromium, hub, a.user, WRITTEN)

        # Feedback back through the exchange; each student's Fetch Feedback, and the page in their browser.
        out = cli(course, "feedback", "a01_graphs", "--exchange", exchange, status=1)  # 1: Mallory's is not out
        assert "feedback released to the nbgrader exchange for 3 student(s)" in out
        assert csv_table(out, "student")[-1][0] == hub.mallory and "no submission secret" in out, out
        for student in (a, b, c):
            student.assignments("fetch_feedback", assignment_id="a01_graphs")
            page = feedback_page(chromium, hub, student)
            assert page["typeset"] > 10 and len(page["prose"]) > 1000, (page["typeset"], page["prose"][:300])
            assert not re.search(r"\$[^$\n]+\$|\\\(|\\\[|\\begin\{", page["prose"]), page["prose"][:2000]
            outside = [u for u in page["requests"] if not u.startswith((f"{hub.base}/", "data:", "blob:", "about:"))]
            assert not outside, outside

    # Grades leave: grades.csv with the written scores and C's lateness, and the LMS files; started
    # by root, where the instructor has left a link to a file of root's in place of grades.csv.
    roster = home(hub.instructor) / "roster.csv"  # the LMS's roster, downloaded by the instructor
    roster.write_text("id,first_name,last_name,email,canvas_id\n" + "".join(
        f"{s},{s.upper()},Student,{s}@example.edu,{1000 + k}\n" for k, s in enumerate(hub.students)))
    os.chown(roster, course.stat().st_uid, course.stat().st_gid)
    cli(course, "students", "import", str(roster))
    reports = course / "reports" / "a01_graphs"
    roots = tmp_path / "roots-file"
    roots.write_text("root's\n")
    as_user(hub.instructor, "sh", "-c", f"mkdir -p {reports} && ln -sf {roots} {reports / 'grades.csv'}")
    cli(course, "report", "a01_graphs", as_root=True)
    assert roots.read_text() == "root's\n" and not (reports / "grades.csv").is_symlink()
    with (reports / "grades.csv").open() as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert set(rows) == {*hub.students, hub.mallory}
    for grade_id, score in WRITTEN.items():
        assert float(rows[a.user][f"written:{grade_id.removesuffix('-written')}"]) == score, rows[a.user]
    assert rows[a.user]["status"] == "graded", rows[a.user]
    assert float(rows[b.user]["raw_score"]) < float(rows[a.user]["raw_score"]) - sum(WRITTEN.values())
    with Course.open(course).gradebook() as gb:
        subs = {s: gb.find_submission("a01_graphs", s) for s in hub.students}
        late = {s: sub.total_seconds_late for s, sub in subs.items()}
        extension = {s: sub.extension for s, sub in subs.items()}
    # C was late by the due date, and her late day covers it; A's due date is two days later
    assert late[a.user] == late[b.user] == late[c.user] == 0, late
    assert extension == {a.user: timedelta(days=2), b.user: None, c.user: timedelta(days=1)}, extension
    assert (rows[c.user]["late_days"], rows[c.user]["late_days_left"]) == ("1", "1"), rows[c.user]
    assert rows[a.user]["due_date"] == f"{now + timedelta(days=2):%Y-%m-%d %H:%M}", rows[a.user]
    with (reports / "canvas_grades.csv").open() as f:
        canvas = {row["ID"]: row for row in csv.DictReader(f)}
    assert float(canvas["1000"]["a01_graphs"]) == float(rows[a.user]["score"]), canvas
    with (reports / "moodle_grades.csv").open() as f:
        moodle = {row["Email address"]: row for row in csv.DictReader(f)}
    assert float(moodle[f"{a.user}@example.edu"]["a01_graphs"]) == float(rows[a.user]["score"]), moodle
    # B and C wait for their written answers: no number reaches the LMS before they are graded
    assert canvas["1001"]["a01_graphs"] == canvas["1002"]["a01_graphs"] == "", canvas
    left = [str(p) for p in [course, *course.rglob("*")] if p.lstat().st_uid != owner]
    assert not left, f"files of the instructor's course left to another owner: {left[:5]}"
    mark.unlink()

    whole = time.monotonic() - started
    with capsys.disabled():
        print(f"\nsemester: hub started in {hub.start_time:.1f} s; spawns "
              f"{', '.join(f'{s:.1f}' for s in spawn.values())} s; idle student server "
              f"{min(idle.values()) / 2**20:.0f}-{max(idle.values()) / 2**20:.0f} MiB; a kernel running chapter 1 "
              f"peaks at {max(KERNEL_PEAK.values()) / 2**20:.0f} MiB; release --all {release:.0f} s; "
              f"grading A's a06 and A's and B's a01 {grading:.0f} s; whole test {whole:.0f} s")


def inbound_notebook(inbound: Path, student: str) -> bytes:
    """The a01 notebook of the student's own latest submission in the exchange (theirs: they made it)."""
    records = [p for p in inbound.glob(f"{student}+a01_graphs+*") if p.stat().st_uid == pwd.getpwnam(student).pw_uid]
    return max(records, key=lambda p: p.stat().st_ctime).joinpath("a01_graphs.ipynb").read_bytes()


def csv_table(out: str, first: str) -> list[list[str]]:
    """The rows of the CLI's table whose header starts with ``first`` (columns 2+ spaces apart)."""
    rows, inside = [], False
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] == first:
            inside = True
            continue
        if inside:
            if not line.strip() or line.startswith(("skipped:", "released helper")):
                inside = False
            elif not set(cells[0]) <= {"-"}:
                rows.append(cells)
    return rows


def formgrader_page(chromium: Chromium, site: Hub, student: str) -> dict:
    """The instructor opens ``student``'s a01 in the formgrader: did anything of the student's run?"""
    tab = Tab(chromium, site.base)
    tab.log_in(site.instructor, site.passwords[site.instructor])
    prefix = f"/user/{site.instructor}/formgrader"
    tab.go(f"{prefix}/manage_students/{student}/a01_graphs")
    tab.click(f'a[href*="{prefix}/submissions/"]', f"{student}'s a01 notebook")
    tab.until("document.querySelector('input.score') && window.jQuery", "the formgrader's page, its scripts run")
    # Every image loaded or failed (an attack's onerror handler, had it been let through, has fired
    # then), and one more turn of the page's event loop for the events queued meanwhile.
    tab.until("[...document.images].every(image => image.complete)", "the page's images, loaded or failed")
    tab.js("new Promise(done => setTimeout(done, 50))")
    shown = tab.js("({pwned: window.pwned || null, handlers: document.querySelectorAll('[onerror],[onload]').length,"
                   " boxes: document.querySelectorAll('input.score').length, url: location.href})")
    responses = [e["params"]["response"] for e in chromium._events if e.get("sessionId") == tab.session
                 and e["method"] == "Network.responseReceived" and e["params"].get("type") == "Document"]
    headers = {k.lower(): v for k, v in responses[-1]["headers"].items()}
    shown["policy"] = headers.get("content-security-policy", "")
    return shown
