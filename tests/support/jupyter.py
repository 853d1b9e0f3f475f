"""A real Jupyter server for a test, configured as the hub configures one of its users' servers
(a configuration folder, extensions on its PYTHONPATH), on loopback with a token; stopped by its
process id when the block ends."""
from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def jupyter_server(root: Path, config: Path | None, pythonpath: Path | None, env: dict[str, str] | None = None,
                   home: Path | None = None) -> Iterator[tuple[str, str]]:
    """JupyterLab's server in ``root`` with JUPYTER_CONFIG_PATH ``config`` and ``pythonpath`` (None:
    this venv's own, as a student's laptop has it); yields (base URL, token)."""
    token = secrets.token_hex(16)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environ = {**os.environ, **({"JUPYTER_CONFIG_PATH": str(config)} if config else {}),
               **({"PYTHONPATH": str(pythonpath)} if pythonpath else {}), "HOME": str(home or root), **(env or {})}
    log_path = root / "server.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={home or root}", "--ServerApp.port_retries=0",
         *(["--allow-root"] if os.geteuid() == 0 else [])], cwd=home or root, env=environ,
        stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            assert server.poll() is None, log_path.read_text()[-3000:]
            time.sleep(0.3)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
