# An instructor's server: the formgrader on their course folder (~/course, a copy of the
# repository's assignments/ made by `deploy/hub.py users`), the same exchange as the students.
import os

c = get_config()  # noqa: F821 (injected by traitlets when the file is loaded)
c.CourseDirectory.course_id = "autograd-course"
c.CourseDirectory.root = os.path.expanduser("~/course")
c.Exchange.root = os.environ.get("AUTOGRAD_EXCHANGE", "/srv/nbgrader/exchange")
