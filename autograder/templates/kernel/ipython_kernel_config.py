# Configuration of the Jupyter kernels started from the course's venv (the book's chapters, the
# notebooks the tests run). `make install` copies it to .venv/etc/ipython/, where every IPython
# kernel of that venv reads it.
#
# ipykernel logs "Kernel is running over TCP without encryption ... susceptible to eavesdropping"
# at the start of every kernel: dozens of times per `make`, burying the progress a new user should
# read. Here it says nothing that matters: every kernel is started on this machine by the course's
# own tools, on the loopback interface, and each message is signed with the HMAC key of a
# connection file only this user can read. The IPC transport would avoid the warning, but
# jupyter_client then names its sockets by a path relative to the client's working directory,
# which the kernel (started in the notebook's folder) does not share. So only that one message is
# filtered out; every other kernel warning still shows.
import logging


class NotTheTcpWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Kernel is running over TCP without encryption")


c.IPKernelApp.logging_config = {  # noqa: F821  (`c` is the config object IPython provides)
    "filters": {"not_tcp_warning": {"()": NotTheTcpWarning}},
    "handlers": {"console": {"filters": ["not_tcp_warning"]}},
}
