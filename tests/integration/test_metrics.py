#!/usr/bin/env python3
"""The monitoring endpoint (metrics-port): GET /metrics parsed by a strict
Prometheus text-format (0.0.4) parser while a scripted load runs, counters
checked against the load, the sem="_other" cap, 404/405, /healthz in
memory and around a Redis outage, a 1-byte-a-second scraper beside grants
on the protocol port, and the STATS and INFO keys that come from the same
counters."""
import http.client
import math
import os
import re
import shutil
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F401,F403

# --------------------------------------------------------------------------
# A strict parser of the text exposition format, version 0.0.4
# --------------------------------------------------------------------------

NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class ExpoError(Exception):
    pass


def parse_value(text, where):
    if text in ("+Inf", "-Inf", "NaN"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise ExpoError("%s: bad value %r" % (where, text))
    return float(text)


def parse_labels(s, i, where):
    """Parse `{a="x",b="y"}` from s[i] == '{'; returns (dict, next i)."""
    labels = {}
    i += 1
    while True:
        if s[i] == "}":
            return labels, i + 1
        m = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*").match(s, i)
        if not m:
            raise ExpoError("%s: bad label name at %d" % (where, i))
        name = m.group(0)
        i = m.end()
        if s[i:i + 2] != '="':
            raise ExpoError("%s: label %s without =\"" % (where, name))
        i += 2
        val = []
        while True:
            if i >= len(s):
                raise ExpoError("%s: unterminated label value" % where)
            ch = s[i]
            if ch == "\\":
                nxt = s[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise ExpoError("%s: bad escape \\%s" % (where, nxt))
                val.append("\n" if nxt == "n" else nxt)
                i += 2
            elif ch == '"':
                i += 1
                break
            elif ch == "\n":
                raise ExpoError("%s: raw newline in a label" % where)
            else:
                val.append(ch)
                i += 1
        if name in labels:
            raise ExpoError("%s: label %s twice" % (where, name))
        labels[name] = "".join(val)
        if s[i] == ",":
            i += 1
        elif s[i] != "}":
            raise ExpoError("%s: expected , or } at %d" % (where, i))


def family_of(sample, families):
    for suffix in ("_bucket", "_sum", "_count"):
        if sample.endswith(suffix):
            base = sample[:-len(suffix)]
            if families.get(base, {}).get("type") == "histogram":
                return base
    return sample


def parse_exposition(text):
    """Parse text strictly; returns {family: {type, help, samples}} where
    samples are (name, labels, value). Raises ExpoError."""
    if not text.endswith("\n"):
        raise ExpoError("the last line has no newline")
    families = {}
    done = set()          # families whose samples are over
    current = None
    series = set()
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = "line %d %r" % (n, line[:80])
        if line.startswith("#"):
            m = re.fullmatch(r"# (HELP|TYPE) (\S+) (.*)", line)
            if not m:
                continue      # a plain comment
            kind, name, rest = m.groups()
            if not NAME_RE.match(name):
                raise ExpoError("%s: bad metric name" % where)
            if name in done or (name in families and
                                families[name]["samples"]):
                raise ExpoError("%s: %s after its samples" % (where, kind))
            fam = families.setdefault(name, {"type": None, "help": None,
                                             "samples": []})
            key = kind.lower()
            if fam[key] is not None:
                raise ExpoError("%s: second %s" % (where, kind))
            if kind == "TYPE" and rest not in TYPES:
                raise ExpoError("%s: bad type" % where)
            fam[key] = rest
            if current is not None and current != name:
                done.add(current)
            current = name
            continue
        if line == "":
            raise ExpoError("%s: empty line" % where)
        m = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*").match(line)
        if not m:
            raise ExpoError("%s: bad sample name" % where)
        sname = m.group(0)
        i = m.end()
        labels = {}
        if i < len(line) and line[i] == "{":
            labels, i = parse_labels(line, i, where)
        rest = line[i:]
        if not rest.startswith(" "):
            raise ExpoError("%s: no blank before the value" % where)
        words = rest.split()
        if len(words) not in (1, 2):
            raise ExpoError("%s: value [timestamp] expected" % where)
        value = parse_value(words[0], where)
        fname = family_of(sname, families)
        fam = families.get(fname)
        if fam is None or fam["type"] is None or fam["help"] is None:
            raise ExpoError("%s: sample before its HELP and TYPE" % where)
        if fname in done:
            raise ExpoError("%s: family %s is not contiguous" %
                            (where, fname))
        if current != fname:
            done.add(current)
            current = fname
        key = (sname, tuple(sorted(labels.items())))
        if key in series:
            raise ExpoError("%s: series twice" % where)
        series.add(key)
        if fam["type"] == "counter" and not sname.endswith("_total"):
            raise ExpoError("%s: a counter not named _total" % where)
        if fam["type"] == "counter" and (value < 0 or math.isnan(value)):
            raise ExpoError("%s: negative counter" % where)
        fam["samples"].append((sname, labels, value))
    for name, fam in families.items():
        if fam["type"] == "histogram":
            check_histogram(name, fam)
    return families


def check_histogram(name, fam):
    """Buckets in increasing le, counts monotone, +Inf == _count."""
    groups = {}
    for sname, labels, value in fam["samples"]:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        g = groups.setdefault(rest, {"buckets": [], "sum": None,
                                     "count": None})
        if sname == name + "_bucket":
            if "le" not in labels:
                raise ExpoError("%s%r: bucket without le" % (name, rest))
            g["buckets"].append((parse_value(labels["le"], name), value))
        elif sname == name + "_sum":
            g["sum"] = value
        elif sname == name + "_count":
            g["count"] = value
        else:
            raise ExpoError("%s: stray sample %s" % (name, sname))
    for rest, g in groups.items():
        les = [le for le, _ in g["buckets"]]
        counts = [c for _, c in g["buckets"]]
        if not les or les[-1] != float("inf"):
            raise ExpoError("%s%r: no +Inf bucket last" % (name, rest))
        if les != sorted(les) or len(set(les)) != len(les):
            raise ExpoError("%s%r: le not increasing" % (name, rest))
        if counts != sorted(counts):
            raise ExpoError("%s%r: buckets not cumulative" % (name, rest))
        if g["count"] is None or g["sum"] is None:
            raise ExpoError("%s%r: no _sum or _count" % (name, rest))
        if counts[-1] != g["count"]:
            raise ExpoError("%s%r: +Inf bucket %s != _count %s" %
                            (name, rest, counts[-1], g["count"]))


def value(fams, family, sample=None, **labels):
    """The value of one sample (None when absent)."""
    sample = sample or family
    for sname, lab, v in fams.get(family, {}).get("samples", []):
        if sname == sample and all(lab.get(k) == w
                                   for k, w in labels.items()):
            return v
    return None


def sems_of(fams, family):
    return [lab.get("sem") for _, lab, _ in fams[family]["samples"]]


# --------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------

def http_get(port, path, method="GET", timeout=10.0):
    """(status, headers dict lower-cased, body text)."""
    h = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h.request(method, path)
        resp = h.getresponse()
        body = resp.read().decode("utf-8")
        return (resp.status, {k.lower(): v for k, v in resp.getheaders()},
                body)
    finally:
        h.close()


def scrape(port):
    status, headers, body = http_get(port, "/metrics")
    if status != 200:
        raise ExpoError("GET /metrics: %d" % status)
    return headers, parse_exposition(body)


def start_metrics_semd(*args):
    mport = free_port()
    d = start_semd("--metrics-port", str(mport), *args)
    return d, mport


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------

def test_parser_rejects():
    """The parser must be able to fail, or the checks below prove
    nothing."""
    good = ('# HELP a_total A.\n# TYPE a_total counter\n'
            'a_total{x="q\\"\\\\\\n"} 1\n'
            '# HELP h H.\n# TYPE h histogram\n'
            'h_bucket{le="0.1"} 1\nh_bucket{le="+Inf"} 2\n'
            'h_sum 0.3\nh_count 2\n')
    fams = parse_exposition(good)
    eq(fams["a_total"]["samples"][0][1]["x"], 'q"\\\n',
       "parser: label escapes \\\" \\\\ \\n are decoded")
    bad = {
        "sample before TYPE": "a_total 1\n",
        "bad escape": '# HELP a_total A.\n# TYPE a_total counter\n'
                      'a_total{x="\\t"} 1\n',
        "buckets not monotone": good.replace('le="+Inf"} 2', 'le="+Inf"} 0')
                                .replace("h_count 2", "h_count 0"),
        "+Inf != _count": good.replace("h_count 2", "h_count 3"),
        "family split": good + "a_total{x=\"z\"} 1\n",
        "counter without _total": "# HELP c C.\n# TYPE c counter\nc 1\n",
    }
    for what, text in bad.items():
        try:
            parse_exposition(text)
            ok(False, "parser rejects: %s" % what)
        except ExpoError:
            ok(True, "parser rejects: %s" % what)


def test_scrape_under_load():
    d, mport = start_metrics_semd("--semaphore", "jobs", "2",
                                  "--semaphore", "other", "1")
    a, b = d.connect(), d.connect()
    errors, scrapes = [], [0]
    stop = threading.Event()

    def scraper():
        while not stop.is_set():
            try:
                scrape(mport)
                scrapes[0] += 1
            except Exception as e:       # noqa: BLE001
                errors.append(repr(e))
                return

    t = threading.Thread(target=scraper, daemon=True)
    t.start()
    grants = 0
    rounds = 40
    for _ in range(rounds):
        tok = expect_token(a, "ACQUIRE jobs 1", "load: ACQUIRE jobs 1")
        grants += 1
        expect(a, "RELEASE jobs %d" % tok, "OK", "load: RELEASE")
    # A hand-off: a holds both units, b queues, a releases.
    tok = expect_token(a, "ACQUIRE jobs 2")
    grants += 1
    b.send("ACQUIRE jobs 1\r\n")
    ok(wait_until(lambda: a.info("jobs")["waiters"] == "1"), "b queues")
    time.sleep(0.05)
    expect(a, "RELEASE jobs %d" % tok, "OK")
    btok = is_token(b.line(timeout=10), "b is granted after the release")
    grants += 1
    # A timeout on another semaphore, and an error.
    otok = expect_token(a, "ACQUIRE other")
    expect(b, "TRY other", "TIMEOUT")
    expect_err(a, "FOO", "PROTO")
    stop.set()
    t.join(30)
    ok(not errors, "every scrape during the load parses strictly",
       "; ".join(errors[:3]))
    ok(scrapes[0] > 0, "scraped during the load (%d times)" % scrapes[0])

    headers, fams = scrape(mport)
    eq(headers.get("content-type", "").split(";")[:2],
       ["text/plain", " version=0.0.4"], "Content-Type is text/plain; "
       "version=0.0.4")
    eq(value(fams, "semd_grants_total", sem="jobs"), float(grants),
       "semd_grants_total{sem=jobs} == grants made (%d)" % grants)
    eq(value(fams, "semd_grants_total", sem="other"), 1.0,
       "semd_grants_total{sem=other} == 1")
    eq(value(fams, "semd_releases_total", sem="jobs", reason="released"),
       float(rounds + 1), "semd_releases_total{reason=released}")
    eq(value(fams, "semd_timeouts_total", sem="other"), 1.0,
       "semd_timeouts_total{sem=other} == 1 (the TRY)")
    eq(value(fams, "semd_acquire_wait_seconds",
             "semd_acquire_wait_seconds_count", sem="jobs"), float(grants),
       "acquire wait observed once per grant")
    eq(value(fams, "semd_handoff_seconds", "semd_handoff_seconds_count",
             sem="jobs"), 1.0, "one hand-off observed")
    eq(value(fams, "semd_hold_seconds", "semd_hold_seconds_count",
             sem="jobs"), float(rounds + 1), "hold observed per release")
    wait = value(fams, "semd_acquire_wait_seconds",
                 "semd_acquire_wait_seconds_sum", sem="jobs")
    ok(wait is not None and wait >= 0.04,
       "the queued grant's wait (>= 50 ms) is in the sum", repr(wait))
    eq(value(fams, "semd_semaphore_used", sem="jobs"), 1.0,
       "semd_semaphore_used{sem=jobs} (b holds 1)")
    eq(value(fams, "semd_semaphore_capacity", sem="jobs"), 2.0,
       "semd_semaphore_capacity")
    eq(value(fams, "semd_semaphore_holders", sem="other"), 1.0,
       "semd_semaphore_holders{sem=other}")
    eq(value(fams, "semd_commands_total", verb="ACQUIRE"),
       float(rounds + 3), "semd_commands_total{verb=ACQUIRE}")
    eq(value(fams, "semd_errors_total", code="PROTO"), 1.0,
       "semd_errors_total{code=PROTO}")
    eq(value(fams, "semd_connections"), 2.0, "semd_connections")
    eq(value(fams, "semd_role", role="single"), 1.0, "semd_role{single}")
    eq(value(fams, "semd_persistence_state", state="off"), 1.0,
       "semd_persistence_state{off}")
    ok((value(fams, "process_resident_memory_bytes") or 0) > 1 << 20,
       "process_resident_memory_bytes is plausible")
    ok((value(fams, "process_open_fds") or 0) >= 5,
       "process_open_fds counts the sockets")
    eq(value(fams, "semd_redis_batch_seconds",
             "semd_redis_batch_seconds_count"), 0.0,
       "semd_redis_batch_seconds_count 0 without Redis")
    for f in ("semd_semaphore_waiters", "semd_epoch",
              "semd_persistence_batches_total", "semd_persistence_backlog",
              "semd_persistence_failures_total"):
        ok(f in fams, "%s is exposed" % f)
    expect(a, "RELEASE other %d" % otok, "OK")
    expect(b, "RELEASE jobs %d" % btok, "OK")


def test_cardinality_cap():
    d, mport = start_metrics_semd("--metrics-max-semaphores", "2",
                                  "--semaphore", "s1", "1",
                                  "--semaphore", "s2", "2",
                                  "--semaphore", "s3", "3",
                                  "--semaphore", "s4", "4")
    c = d.connect()
    expect_token(c, "ACQUIRE s4 2")
    expect_token(c, "ACQUIRE s3 1")
    _, fams = scrape(mport)
    eq(sems_of(fams, "semd_semaphore_capacity"), ["s1", "s2", "_other"],
       "beyond metrics-max-semaphores the rest is sem=\"_other\"")
    eq(value(fams, "semd_semaphore_capacity", sem="_other"), 7.0,
       "_other sums the capacities (3 + 4)")
    eq(value(fams, "semd_grants_total", sem="_other"), 2.0,
       "_other sums the grants")
    eq(value(fams, "semd_acquire_wait_seconds",
             "semd_acquire_wait_seconds_count", sem="_other"), 2.0,
       "_other sums the histograms")


def test_cap_reload_and_config():
    """metrics-max-semaphores applies on SIGHUP; metrics-port and
    metrics-bind are checked at start-up."""
    import signal
    import tempfile
    conf = os.path.join(tempfile.mkdtemp(prefix="semdmetrics."), "m.conf")
    mport = free_port()
    base = ("metrics-port %d\nsemaphore a 1\nsemaphore b 1\n"
            "semaphore c 1\n" % mport)
    with open(conf, "w") as f:
        f.write(base + "metrics-max-semaphores 1\n")
    d = start_semd("-c", conf)
    _, fams = scrape(mport)
    eq(sems_of(fams, "semd_semaphore_capacity"), ["a", "_other"],
       "metrics-max-semaphores 1: a, then _other")
    with open(conf, "w") as f:
        f.write(base + "metrics-max-semaphores 5\n")
    os.kill(d.pid, signal.SIGHUP)
    ok(wait_until(lambda: sems_of(scrape(mport)[1],
                                  "semd_semaphore_capacity") ==
                  ["a", "b", "c"], 10),
       "after SIGHUP with metrics-max-semaphores 5: a, b, c")
    d.stop()
    shutil.rmtree(os.path.dirname(conf), ignore_errors=True)
    st, out, err = run_semd("--port", "0", "--metrics-bind", "localhost",
                            "--metrics-port", "1", "-t")
    ok(st != 0 and "metrics-bind" in err, "metrics-bind must be numeric",
       err)
    st, out, err = run_semd("--port", "7399", "--metrics-port", "7399",
                            "-t")
    ok(st != 0 and "metrics-port" in err, "metrics-port cannot be the "
       "protocol port", err)
    st, out, err = run_semd("--metrics-port", "70000", "-t")
    ok(st != 0 and "metrics-port" in err, "metrics-port 70000 refused",
       err)
    st, out, err = run_semd("-T", "--metrics-port", "9313")
    ok(st == 0 and "metrics-port 9313" in out and
       "metrics-bind 127.0.0.1" in out and
       "metrics-max-semaphores 1000" in out, "-T prints the metrics "
       "directives", out[-300:])


def test_grafana_dashboard():
    """contrib/grafana/semd.json is valid JSON whose queries name only
    metrics a live semd exposes, with the panels README promises."""
    import json
    tests = os.environ.get("SEMD_TESTS") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), os.pardir)
    path = os.path.join(tests, os.pardir, "contrib", "grafana", "semd.json")
    with open(path) as f:
        dash = json.load(f)
    ok(True, "contrib/grafana/semd.json is valid JSON")
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"]]
    used = set()
    for e in exprs:
        used.update(re.findall(r"\b((?:semd|process)_[a-z_]+)", e))
    d, mport = start_metrics_semd("--semaphore", "s", "1")
    _, fams = scrape(mport)
    samples = {sname for fam in fams.values() for sname, _, _ in
               fam["samples"]}
    missing = sorted(m for m in used if m not in fams and m not in samples)
    ok(used and not missing, "every metric the dashboard queries is "
       "exposed (%d)" % len(used), "missing %r" % missing)
    titles = " | ".join(p["title"].lower() for p in dash["panels"])
    for want in ("saturation", "queue", "wait p99", "hand-off p99",
                 "grant rate", "persistence"):
        ok(want in titles, "the dashboard has a %s panel" % want, titles)


def test_http_errors_and_healthz():
    d, mport = start_metrics_semd()
    status, _, body = http_get(mport, "/nope")
    eq(status, 404, "GET /nope -> 404")
    status, headers, _ = http_get(mport, "/metrics", method="POST")
    eq(status, 405, "POST /metrics -> 405")
    eq(headers.get("allow"), "GET, HEAD", "405 says Allow: GET, HEAD")
    status, _, _ = http_get(mport, "/healthz", method="DELETE")
    eq(status, 405, "DELETE /healthz -> 405")
    status, headers, body = http_get(mport, "/metrics", method="HEAD")
    ok(status == 200 and body == "" and headers.get("content-type", "")
       .startswith("text/plain; version=0.0.4"), "HEAD /metrics -> 200, "
       "no body", "%r %r" % (status, body[:80]))
    # Headers over the 8 KB cap are refused, not buffered.
    big = socket.create_connection(("127.0.0.1", mport), timeout=10)
    big.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " +
                b"a" * 20000 + b"\r\n\r\n")
    reply = b""
    try:
        while True:
            chunk = big.recv(4096)
            if not chunk:
                break
            reply += chunk
    except OSError:
        pass
    big.close()
    ok(reply.startswith(b"HTTP/1.1 400") or reply == b"",
       "a request with 20 KB of headers is refused (400 or closed)",
       repr(reply[:60]))
    ok(d.alive(), "...and semd is fine")
    eq(http_get(mport, "/healthz")[::2], (200, "ok\n"),
       "GET /healthz -> 200 ok (persistence none)")
    # The line protocol port is not HTTP: its rules are unchanged.
    c = d.connect()
    c.send("GET /metrics HTTP/1.1\r\n")
    ok(c.expect_closed(5) and c.buf == b"", "GET on the protocol port "
       "still closes the connection without a reply")


def test_slow_scraper():
    d, mport = start_metrics_semd("--semaphore", "s", "1")
    slow = socket.create_connection(("127.0.0.1", mport), timeout=10)
    stop = threading.Event()
    sent = [0]

    def dribble():
        for ch in "GET /metrics HTTP/1.1\r\n":
            if stop.wait(1.0):
                return
            try:
                slow.send(ch.encode())
                sent[0] += 1
            except OSError:
                return

    t = threading.Thread(target=dribble, daemon=True)
    t.start()
    c = d.connect()
    t0 = time.monotonic()
    granted = 0
    while time.monotonic() - t0 < 3.0:
        got = c.cmd("ACQUIRE s", timeout=10)
        m = re.fullmatch(r"OK ([0-9]+)", got)
        if not m:
            ok(False, "ACQUIRE beside the slow scraper", repr(got))
            break
        if c.cmd("RELEASE s %s" % m.group(1), timeout=10) != "OK":
            ok(False, "RELEASE beside the slow scraper")
            break
        granted += 1
    elapsed = time.monotonic() - t0
    note("%d grants in %.1f s while a scraper sent %d bytes, one a second"
         % (granted, elapsed, sent[0]))
    ok(granted >= 10, "grants go on while a scraper dribbles (%d)" % granted)
    ok(sent[0] >= 2, "the slow scraper was mid-request meanwhile")
    _, fams = scrape(mport)
    eq(value(fams, "semd_grants_total", sem="s"), float(granted),
       "a normal scrape is answered meanwhile, with every grant")
    stop.set()
    slow.close()


def test_stats_and_info_keys():
    d = start_semd("--semaphore", "s", "1")
    a, b = d.connect(), d.connect()
    tok = expect_token(a, "ACQUIRE s")
    b.send("ACQUIRE s\r\n")
    ok(wait_until(lambda: a.info("s")["waiters"] == "1"), "b queues")
    time.sleep(0.3)
    expect(a, "RELEASE s %d" % tok, "OK")
    btok = is_token(b.line(timeout=10), "b granted")
    expect_err(a, "FOO", "PROTO")
    expect_err(a, "RELEASE s 999999", "NOTHELD")
    eq(a.info("s").get("timeouts_total"), "0", "INFO timeouts_total=0")
    expect(a, "ACQUIRE s 1 TIMEOUT 0", "TIMEOUT")
    expect(a, "ACQUIRE s 1 TIMEOUT 50", "TIMEOUT")
    info = a.info("s")
    eq(list(info)[-4:], ["wait_p50_ms", "wait_p99_ms", "grants_total",
                         "timeouts_total"],
       "INFO ends with wait_p50_ms wait_p99_ms grants_total timeouts_total")
    eq(info.get("grants_total"), "2", "INFO grants_total=2")
    eq(info.get("timeouts_total"), "2", "INFO timeouts_total=2 (TIMEOUT 0 "
       "and a queued one that ran out)")
    eq(info.get("wait_p50_ms"), "0", "INFO wait_p50_ms=0 (one of two "
       "waited 0 ms)")
    ok(int(info.get("wait_p99_ms", "0")) >= 250,
       "INFO wait_p99_ms >= 250 (b waited >= 300 ms)", repr(info))
    st = a.stats()
    ok(int(st.get("used_memory_rss", "0")) > 1 << 20,
       "STATS used_memory_rss is plausible", st.get("used_memory_rss"))
    eq(st.get("commands_acquire"), "4", "STATS commands_acquire=4")
    eq(st.get("commands_release"), "2", "STATS commands_release=2")
    eq(st.get("errors_proto"), "1", "STATS errors_proto=1")
    eq(st.get("errors_notheld"), "1", "STATS errors_notheld=1")
    eq(st.get("errors_auth"), "0", "STATS errors_auth=0")
    keys = list(st)
    ok(keys.index("used_memory_rss") > keys.index("persistence_failures"),
       "the new STATS keys come after the old ones")
    expect(b, "RELEASE s %d" % btok, "OK")


def test_healthz_redis_outage():
    with start_redis() as r:
        mport = free_port()
        p = start_semd_redis(r, "--metrics-port", str(mport),
                             "--redis-timeout", "300ms",
                             "--semaphore", "s", "1")
        ok(wait_until(lambda: http_get(mport, "/healthz")[0] == 200, 20),
           "/healthz 200 once serving as owner")
        _, fams = scrape(mport)
        eq(value(fams, "semd_role", role="owner"), 1.0, "semd_role{owner}")
        ok((value(fams, "semd_epoch") or 0) >= 1, "semd_epoch >= 1")
        c = p.connect()
        tok = expect_token(c, "ACQUIRE s")
        expect(c, "RELEASE s %d" % tok, "OK")
        _, fams = scrape(mport)
        ok((value(fams, "semd_redis_batch_seconds",
                  "semd_redis_batch_seconds_count") or 0) >= 2,
           "semd_redis_batch_seconds counts the acknowledged batches")
        r.pause()
        try:
            c.send("TRY s\r\n")
            ok(wait_until(lambda: http_get(mport, "/healthz")[0] == 503, 30),
               "/healthz 503 while Redis is stopped")
            status, _, body = http_get(mport, "/healthz")
            ok(status == 503 and "\n" == body[-1] and body.count("\n") == 1
               and body.strip() != "", "503 with a one-line reason",
               repr(body))
            note("reason: %s" % body.strip())
            _, fams = scrape(mport)
            ok(value(fams, "semd_persistence_state", state="ok") == 0.0,
               "semd_persistence_state{ok} is 0 during the outage")
        finally:
            r.resume()
        ok(wait_until(lambda: http_get(mport, "/healthz")[0] == 200, 40),
           "/healthz 200 again once Redis is back")
        _, fams = scrape(mport)
        ok((value(fams, "semd_persistence_failures_total") or 0) >= 1,
           "semd_persistence_failures_total counted the outage")


def test_waiting_for_redis_is_not_standby():
    """A semd that is no standby, started while Redis does not answer,
    says "waiting for redis" (healthz, semd_role), not "standby"; one with
    standby yes stays a standby."""
    dead = free_port()
    for standby, want_role, want_body in (
            ("no", "waiting_for_redis", "waiting for redis: "),
            ("yes", "standby", "standby: owner -")):
        mport = free_port()
        d = start_semd("--redis", "127.0.0.1:%d" % dead, "--standby",
                       standby, "--metrics-port", str(mport),
                       wait_ready=False)
        def status503():
            try:
                return http_get(mport, "/healthz")[0] == 503
            except OSError:
                return False    # the metrics port is not open yet
        try:
            ok(wait_until(status503, 20),
               "standby %s: /healthz answers 503" % standby)
            status, _, body = http_get(mport, "/healthz")
            ok(status == 503 and body.startswith(want_body),
               "standby %s, Redis down: /healthz says %r" %
               (standby, want_body), body)
            _, fams = scrape(mport)
            roles = {r: value(fams, "semd_role", role=r) for r in
                     ("single", "owner", "standby", "waiting_for_redis")}
            eq(roles, {r: (1.0 if r == want_role else 0.0) for r in roles},
               "standby %s: semd_role{role=%s} 1, the others 0" %
               (standby, want_role))
        finally:
            d.stop()


run(test_parser_rejects, test_scrape_under_load, test_cardinality_cap,
    test_cap_reload_and_config, test_grafana_dashboard,
    test_http_errors_and_healthz,
    test_slow_scraper,
    test_stats_and_info_keys, test_healthz_redis_outage,
    test_waiting_for_redis_is_not_standby, time_limit=200)
