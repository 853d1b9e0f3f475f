"""The deployment's tests: the class's hub, as its fixtures start it (support/hub.py has its people).

`deploy/hub.py install` builds the environments (the hub's, the students', the instructors' grader)
once per run (`hub_install`); each test that needs a hub has one of its own on them (`deploy/hub.py
site`: its configuration, state, exchange and port, its own users): the semester's hub and the class
load's differ in their culler, and neither sees the other's submissions."""
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from support.hub import Hub


@pytest.fixture(scope="session")
def hub_install():
    """The environments under the hub's prefix, installed (or brought up to date) once per run."""
    if os.geteuid() != 0:
        pytest.skip("the hub starts each user's server as that user: needs root (CI runs as root)")
    root = Path(tempfile.mkdtemp(prefix="autograd-hub-test-"))
    root.chmod(0o755)
    try:
        done = Hub(root).command("install", timeout=1800)
        assert done.returncode == 0, done.stderr[-3000:]
        yield
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def hub(hub_install, request):
    root = Path(tempfile.mkdtemp(prefix="autograd-hub-test-"))
    root.chmod(0o755)  # every user's server reads the configuration under it
    hub = Hub(root)
    # a test module's own settings of the hub (HUB_ENV: {variable: value, "{instructor}" is its instructor})
    hub.env.update({name: value.format(instructor=hub.instructor)
                    for name, value in getattr(request.module, "HUB_ENV", {}).items()})
    try:  # a roster made half-way is removed too
        hub.install_site()
        hub.add_users()
        hub.start_time = hub.start()
        yield hub
    finally:
        hub.stop()
        hub.remove_users()
        shutil.rmtree(root, ignore_errors=True)
