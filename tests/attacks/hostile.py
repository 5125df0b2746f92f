"""A hostile program for the sandbox's attack tests: it tries what an untrusted agent, check or hook would, prints
one line per attempt (ATTACK <name> allowed|denied), then does honest work. Usage: hostile.py MODE [PORT]."""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path


def attempt(name, action):
    try:
        action()
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"ATTACK {name} denied ({type(e).__name__})", flush=True)
    else:
        print(f"ATTACK {name} allowed", flush=True)


def daemon(pid_file: Path, clear_environment: bool) -> None:
    """A double-forked, setsid daemon that records its pid and sleeps: it must not outlive its launch."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            pid_file.write_text(str(os.getpid()))
            if clear_environment:
                os.execve("/bin/sleep", ["sleep", "300"], {})
            time.sleep(300)
            os._exit(0)
        os._exit(0)
    os.wait()


def main() -> None:
    mode, port = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 9
    home = Path(os.environ.get("SANDBOX_TEST_HOME", os.path.expanduser("~")))
    ledger = os.environ.get("DOCKET_LEDGER", "")
    attempt("read-ssh-key", lambda: (home / ".ssh" / "id_ed25519").read_bytes())
    attempt("read-signing-key", lambda: (home / ".docket" / "key").read_bytes())
    attempt("read-ledger", lambda: open(ledger, "rb").read(16))
    attempt("write-ledger", lambda: open(ledger, "ab").close())
    attempt("write-outside", lambda: Path(os.environ["SANDBOX_TEST_OUTSIDE"]).write_text("pwned\n"))
    attempt("read-parent-environ", lambda: Path(f"/proc/{os.getppid()}/environ").read_bytes())
    attempt("signal-parent", lambda: os.kill(os.getppid(), 0))
    attempt("connect-port", lambda: socket.create_connection(("127.0.0.1", port), timeout=5).close())
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    daemon(tmp / f"{mode}.daemon.pid", clear_environment=False)
    daemon(tmp / f"{mode}.quiet.pid", clear_environment=True)
    attempt("honest-python", lambda: subprocess.run([sys.executable, "-c", "print(1)"], check=True,
                                                    capture_output=True))
    if mode == "agent":
        Path("a.py").write_text("X = 1\n")
        attempt("honest-git-add", lambda: subprocess.run(["git", "add", "a.py"], check=True, capture_output=True))
        attempt("honest-git-commit", lambda: subprocess.run(
            ["git", "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-q", "-m", "a"], check=True,
            capture_output=True))
        if shutil.which("node"):
            attempt("honest-node", lambda: subprocess.run(["node", "-e", "require(\"os\").cpus()"], check=True,
                                                          capture_output=True))


if __name__ == "__main__":
    main()
