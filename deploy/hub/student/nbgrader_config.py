# What a student's Assignments tab reads: the course and where its exchange is. Installed by
# deploy/hub.py, which writes the exchange path it created in place of the default below.
import os

c = get_config()  # noqa: F821 (injected by traitlets when the file is loaded)
c.CourseDirectory.course_id = "autograd-course"
c.Exchange.root = os.environ.get("AUTOGRAD_EXCHANGE", "/srv/nbgrader/exchange")
