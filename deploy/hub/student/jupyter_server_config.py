# The students' JupyterLab: its settings' defaults from lab-settings/ beside this file (a "Course"
# menu back to their course page, autograd_course_page, and to the book), not from the shared
# environment's (which has none). A student's own settings stay theirs, in their home. Only where
# the course page is on the servers' path (the one-machine hub, not yet the Kubernetes image).
import importlib.util
import os

c = get_config()  # noqa: F821 (injected by traitlets when the file is loaded)
if importlib.util.find_spec("autograd_course_page") is not None:
    c.LabApp.app_settings_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lab-settings")

# nbgrader's fetched folder in the file browser at once, not at its next poll (the why, and how it is
# built without a bundler: labextensions/autograd-fetched/static/remoteEntry.js).
c.LabApp.extra_labextensions_path = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "labextensions")]
