"""The deployment's tests: the class's hub, as its fixture starts it (support/hub.py has its people)."""
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from support.hub import Hub


@pytest.fixture(scope="module")
def hub():
    if os.geteuid() != 0:
        pytest.skip("the hub starts each user's server as that user: needs root (CI runs as root)")
    root = Path(tempfile.mkdtemp(prefix="autograd-hub-test-"))
    root.chmod(0o755)  # every user's server reads the configuration under it
    hub = Hub(root)
    done = hub.command("install", timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    done = hub.command("users", str(hub.roster), "--passwords", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    hub.passwords = dict(line.strip().split(": ") for line in done.stdout.splitlines() if line.startswith("  "))
    try:
        hub.start_time = hub.start()
        yield hub
    finally:
        hub.stop()
        for user in [hub.instructor, *hub.students, hub.mallory]:
            subprocess.run(["pkill", "-KILL", "-u", user], capture_output=True)  # userdel refuses a user with processes
            for _ in range(50):
                if subprocess.run(["userdel", "--remove", user], capture_output=True).returncode in (0, 6):
                    break  # removed (6: no such user)
                time.sleep(0.2)
        shutil.rmtree(root, ignore_errors=True)
