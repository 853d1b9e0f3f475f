# An instructor's server: the formgrader on their course folder (~/course, a copy of the
# repository's assignments/ made by `deploy/hub.py users`), the same exchange as the students.
import os

c = get_config()  # noqa: F821 (injected by traitlets when the file is loaded)
c.CourseDirectory.course_id = "autograd-course"
c.CourseDirectory.root = os.path.expanduser("~/course")
c.Exchange.root = os.environ.get("AUTOGRAD_EXCHANGE", "/srv/nbgrader/exchange")
# The course's folders of the exchange are root's, shared by the instructors' group
# (deploy/hub.py install): nbgrader then writes them as a group member, not as their owner.
c.CourseDirectory.groupshared = True
# The formgrader's Collect button would run nbgrader's own collect, which follows a student's links
# and takes the name and the time a student wrote: `autograder collect --exchange` instead.
c.ExchangeFactory.collect = "autograd_formgrader_guard.RefusedCollect"
