"""The first program in the sandbox (`evidence.sandbox`): fill the tree, then run the command.

Started by bubblewrap as `python -I -S sandbox_init.py IMAGE_FD PASS_FDS TIMEOUT WHERE COMMAND`
with the repository's path (a private tmpfs) as its working directory (`WHERE` is `sandbox`; a
contract that opted out of the sandbox runs it as `host` in a fresh folder of the harness's). It
unpacks the harness's image of the tree (a tar in a sealed memfd, `evidence.workcopy`) there
with tarfile's `data` filter, closes the image, and runs the command through the reaper
(`evidence/reaper.py`, beside this file) with the harness plugin's descriptors (`PASS_FDS`,
comma-separated) left open. Standard library only:
nothing of the tree under test is imported before the command starts.
"""

from __future__ import annotations

import importlib
import os
import sys
import tarfile


def _unpack(image_fd: int) -> None:
    # a fresh open of the memfd: its own offset, from the start
    with (
        open(f"/proc/self/fd/{image_fd}", "rb") as handle,
        tarfile.open(fileobj=handle, mode="r:") as archive,
    ):
        archive.extractall(".", filter="data")
    os.close(image_fd)


def main(argv: list[str]) -> int:
    if len(argv) != 6 or argv[4] not in ("sandbox", "host"):
        sys.stderr.write("usage: sandbox_init.py IMAGE_FD PASS_FDS TIMEOUT sandbox|host COMMAND\n")
        return 2
    image_fd, pass_fds = int(argv[1]), tuple(int(f) for f in argv[2].split(",") if f)
    _unpack(image_fd)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    reaper = importlib.import_module("reaper")  # the harness's own, beside this file
    sys.stdout.flush()
    return int(reaper.run(argv[5], float(argv[3]), pass_fds, watch_parent=argv[4] == "host"))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
