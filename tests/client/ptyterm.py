"""ptyterm: a program on a pseudo-terminal, for the tests of semd-cli's
prompt and of `semd-cli top` (one helper instead of a copy in each).

    t = Term(argv, env)                   # plain pty
    t = Term(argv, env, ctty=True)        # its controlling terminal:
                                          # Ctrl-C is SIGINT, a resize
                                          # is SIGWINCH
    t = Term(argv, env, ctty=True, rows=24, cols=80)
    t.read_until("semd> "); t.send("ping"); t.key("\\x03"); t.close()
"""
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time


def take_tty():
    """preexec_fn: a session of its own, with the pty as its terminal."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ,
                struct.pack("HHHH", rows, cols, 0, 0))


class Term:
    def __init__(self, argv, env, ctty=False, rows=None, cols=None):
        self.master, slave = pty.openpty()
        if rows is not None:
            set_size(slave, rows, cols)
        self.p = subprocess.Popen(argv, stdin=slave, stdout=slave,
                                  stderr=slave, env=env, close_fds=True,
                                  preexec_fn=take_tty if ctty else None)
        os.close(slave)
        self.text = ""

    def read(self, timeout):
        """Add what the program wrote within timeout seconds to .text."""
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return
        try:
            self.text += os.read(self.master, 65536).decode("utf-8",
                                                            "replace")
        except OSError:
            pass

    def read_re(self, pattern, timeout=10):
        """Wait for pattern in the output; its match, or None."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.text)
            if m:
                return m
            if self.p.poll() is not None:
                self.read(0)
                break
            self.read(0.1)
        return re.search(pattern, self.text)

    def read_until(self, want, timeout=10):
        """Wait for the text want in the output; whether it came."""
        return self.read_re(re.escape(want), timeout) is not None

    def at_prompt(self, prompt, timeout=10):
        """Wait until the output ends with the prompt: libedit reads."""
        return self.read_re(re.escape(prompt) + r"$", timeout) is not None

    def send(self, line):
        """Type a line (forgetting what was read so far)."""
        self.text = ""
        os.write(self.master, line.encode() + b"\r")

    def key(self, data):
        """Type keys, without Enter."""
        self.text = ""
        os.write(self.master, data.encode())

    def wait_exit(self, timeout=10):
        """The exit status, reading what it writes meanwhile; None if it
        still runs after timeout."""
        deadline = time.monotonic() + timeout
        while self.p.poll() is None and time.monotonic() < deadline:
            self.read(0.1)
        self.read(0.1)
        return self.p.poll()

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        os.close(self.master)
