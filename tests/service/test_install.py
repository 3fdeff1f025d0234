#!/usr/bin/env python3
"""make install into a DESTDIR: semd in sbindir, semd-cli, libsemc
(shared, static, header, .pc), the four man pages, the README in docdir,
semd.service generated with the configured paths (and clean for
`systemd-analyze verify` where that tool exists), semd.conf; the installed
semd runs from there; a second make install keeps an edited semd.conf
(the shipped one goes to semd.conf.default, with a message), and make
uninstall keeps it too."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
import semdtest  # noqa: E402
from semdtest import *  # noqa: E402,F403

BUILDDIR = os.environ.get("SEMD_BUILDDIR") or os.path.dirname(
    os.path.dirname(semdtest.SEMD_BIN))
MAKE = os.environ.get("MAKE") or "make"
DEST = tempfile.mkdtemp(prefix="semdtest-destdir.")


def make(*targets):
    p = subprocess.run([MAKE, "-C", BUILDDIR, "DESTDIR=" + DEST] +
                       list(targets), stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=600)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    return p.returncode, out


def installed():
    """Every installed file, relative to DESTDIR, by basename too."""
    files = []
    for root, _, names in os.walk(DEST):
        for n in names:
            files.append(os.path.relpath(os.path.join(root, n), DEST))
    return files


def find(files, suffix):
    hits = [f for f in files if f.endswith(suffix)]
    return hits[0] if hits else None


def test_install():
    st, out = make("install")
    if not ok(st == 0, "make install DESTDIR=... succeeds", out[-2000:]):
        return
    files = installed()
    for want in ("/sbin/semd", "/bin/semd-cli", "/include/semc.h",
                 "/lib/libsemc.a", "/lib/pkgconfig/libsemc.pc",
                 "/man8/semd.8", "/man5/semd.conf.5", "/man1/semd-cli.1",
                 "/man3/libsemc.3", "/doc/semd/README.md", "/etc/semd.conf",
                 "/system/semd.service"):
        ok(find(files, want), "installs *%s" % want, sorted(files))
    ok(any(re.search(r"/lib/libsemc\.so(\.\d+)*$", f) for f in files),
       "installs the shared libsemc")
    ok(not find(files, "/lib/libsemc.la"), "libsemc.la is not installed "
       "(pkg-config says how to link)", sorted(files))
    ok(not find(files, "semd.conf.default"), "no semd.conf.default on a "
       "first install")

    unit_rel = find(files, "/system/semd.service")
    semd_rel = find(files, "/sbin/semd")
    conf_rel = find(files, "/etc/semd.conf")
    if not (unit_rel and semd_rel and conf_rel):
        return
    with open(os.path.join(DEST, unit_rel)) as f:
        unit = f.read()
    ok("@" not in re.sub(r"^#.*$", "", unit, flags=re.M),
       "the unit has no placeholder left")
    ok("ExecStart=/%s -c /%s" % (semd_rel, conf_rel) in unit,
       "the unit starts the installed semd with the installed semd.conf",
       re.findall(r"^Exec.*$", unit, re.M))
    want_type = os.environ.get("SEMD_SERVICE_TYPE", "notify")
    ok("\nType=%s\n" % want_type in unit, "Type=%s (as configure found "
       "libsystemd or not)" % want_type)
    for line in ("ExecReload=/bin/kill -HUP $MAINPID", "Restart=on-failure",
                 "LogsDirectory=semd", "RuntimeDirectory=semd",
                 "ProtectSystem=strict", "NoNewPrivileges=yes",
                 "DynamicUser=yes", "Group=semd"):
        ok("\n%s\n" % line in unit, "the unit has %s" % line)

    # systemd-analyze verify, on a copy pointing into DESTDIR.
    sa = shutil.which("systemd-analyze")
    if sa is None:
        note("systemd-analyze not found: the unit is not verified")
    else:
        vdir = tempfile.mkdtemp(prefix="semdtest-unit.")
        vunit = os.path.join(vdir, "semd.service")
        with open(vunit, "w") as f:
            f.write(unit.replace("/" + semd_rel, os.path.join(DEST, semd_rel))
                    .replace("/" + conf_rel, os.path.join(DEST, conf_rel))
                    .replace("Wants=redis-server.service", "")
                    .replace("After=network.target redis-server.service",
                             "After=network.target"))
        # Documentation=man:semd(8): found in DESTDIR's man pages.
        man8 = os.path.join(DEST, find(files, "/man8/semd.8"))
        env = dict(os.environ, MANPATH=os.path.dirname(
            os.path.dirname(man8)))
        p = subprocess.run([sa, "verify", vunit], capture_output=True,
                           timeout=60, env=env)
        msg = (p.stdout + p.stderr).decode("utf-8", "replace")
        msg = "\n".join(ln for ln in msg.splitlines() if "semd" in ln or
                        vunit in ln)
        ok(p.returncode == 0 and not msg.strip(),
           "systemd-analyze verify is clean", msg)

    # The installed semd runs from there.
    semdtest.SEMD_BIN = os.path.join(DEST, semd_rel)
    conf = os.path.join(DEST, conf_rel)
    st, out, err = run_semd("-t", "-c", conf)
    ok(st == 0, "the installed semd accepts the installed semd.conf", err)
    d = start_semd("-c", conf, "--port", "0", "--redis", "",
                   "--persistence", "none", "--semaphore", "jobs", "2")
    c = d.connect()
    expect(c, "INFO jobs", "OK name=jobs capacity=2 used=0 available=2 "
           "holders=0 waiters=0", "the installed semd serves")
    cli = os.path.join(DEST, find(files, "/bin/semd-cli"))
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(
        os.path.join(DEST, find(files, "/lib/libsemc.a"))))
    p = subprocess.run([cli, "-p", str(d.port), "list"], env=env,
                       capture_output=True, timeout=30)
    ok(p.returncode == 0 and b"jobs" in p.stdout,
       "the installed semd-cli lists it", p.stdout + p.stderr)
    d.stop()

    # An edited semd.conf survives make install and make uninstall.
    with open(conf, "a") as f:
        f.write("# edited by the operator\nsemaphore mine 4\n")
    with open(conf) as f:
        edited = f.read()
    st, out = make("install")
    ok(st == 0, "a second make install succeeds", out[-1000:])
    with open(conf) as f:
        eq(f.read(), edited, "the edited semd.conf is kept")
    ok(os.path.exists(conf + ".default"), "the shipped one is installed as "
       "semd.conf.default")
    ok("kept the existing" in out, "make install says so", out[-1000:])
    st, out = make("uninstall")
    ok(st == 0, "make uninstall succeeds", out[-1000:])
    ok(os.path.exists(conf) and not os.path.exists(conf + ".default"),
       "make uninstall keeps the edited semd.conf, removes the default")
    left = [f for f in installed() if not f.endswith("/etc/semd.conf")]
    eq(left, [], "make uninstall removes everything else")
    shutil.rmtree(DEST, ignore_errors=True)


run(test_install, time_limit=600)
