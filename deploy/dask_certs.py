#!/usr/bin/env python3
"""Certificates for a grading cluster on Dask: a CA of its own, one certificate for the scheduler
and the workers, one for each grader client.

    python3 deploy/dask_certs.py DIR                  # DIR/ca.pem, cluster.pem/.key, client.pem/.key
    python3 deploy/dask_certs.py DIR --client NAME    # one more client: DIR/NAME.pem/.key

Dask's TLS (``distributed.security``) makes both ends of every connection show a certificate of
the cluster's CA: with these, only whoever holds a key can reach the scheduler or a worker, and so
run code there (deploy/dask.md). Give ``cluster.key`` to the account that runs the scheduler and
the workers, ``client.key`` to the instructors (mode 0640, group of the instructors), and keep
``ca.key`` offline. Standard library and the ``openssl`` command only. Dask checks the CA, not
host names: one certificate serves every host of the cluster.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

DAYS = "400"
CURVE = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def openssl(*args: str | Path) -> None:
    done = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"openssl {args[0]} failed: {done.stderr.strip()}")


def authority(folder: Path) -> None:
    if (folder / "ca.pem").exists():
        return
    openssl("req", "-x509", *CURVE, "-keyout", folder / "ca.key", "-out", folder / "ca.pem", "-days", DAYS,
            "-subj", "/CN=autograd-course grading cluster CA")
    (folder / "ca.key").chmod(0o600)


def certificate(folder: Path, name: str) -> None:
    """``name``.pem signed by the folder's CA, and its key (mode 0600)."""
    with tempfile.TemporaryDirectory() as scratch:
        request = Path(scratch) / f"{name}.csr"
        openssl("req", *CURVE, "-keyout", folder / f"{name}.key", "-out", request, "-subj", f"/CN={name}")
        (folder / f"{name}.key").chmod(0o600)
        extensions = Path(scratch) / "leaf.cnf"
        extensions.write_text("basicConstraints = critical, CA:FALSE\n"
                              "keyUsage = critical, digitalSignature, keyEncipherment\n"
                              "extendedKeyUsage = serverAuth, clientAuth\n")
        openssl("x509", "-req", "-in", request, "-CA", folder / "ca.pem", "-CAkey", folder / "ca.key",
                "-CAcreateserial", "-out", folder / f"{name}.pem", "-days", DAYS, "-extfile", extensions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploy/dask_certs.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--client", action="append", default=[], metavar="NAME",
                        help="a certificate for another grader client (default: one named client)")
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    authority(args.folder)
    for name in ["cluster", *(args.client or ["client"])]:
        if not (args.folder / f"{name}.pem").exists():
            certificate(args.folder, name)
    print(f"certificates in {args.folder}: ca.pem, " + ", ".join(
        f"{n}.pem/.key" for n in ["cluster", *(args.client or ["client"])]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
