#!/usr/bin/env python3
"""test-loader-http: the loader over HTTP, against nginx and against a faulty server.

argv: the test-loader-http program. Writes two .rfrec files, then:
  - nginx (one worker) serves them on loopback: the loader's batches over HTTP equal
    the local file's, record for record, in the same order (test-loader-http same);
  - a server of our own (Python's http.server, Range support written here) that fails
    the first attempt at every range once -- a 503, a dropped connection before the
    status line, a body cut short, by turns -- must give the same result: every fault
    retried on a fresh connection, no batch wrong;
  - the same server failing always (503 on every range; bodies always cut short; Range
    ignored with a 200) makes every batch fail with a message naming the URL, the
    byte range and the cause, after the bounded retries -- never a wrong batch;
  - response heads RFC 9112 refuses (a space before a field's colon, "HTTX/1.1", a
    folded line, two Content-Range fields, a signed one, Transfer-Encoding with
    Content-Length) fail every batch naming the URL and the reason;
  - a server whose file changed size (Content-Range total), or was replaced by one of
    the same size (its ETag or Last-Modified), or whose headers trickle
    in without end, fails every batch with the URL named -- the latter within the
    deadline (RF_HTTP_TIMEOUT_MS) for all the headers;
  - opening a missing URL (404), a port nobody listens on, or a port past 65535 (which
    getaddrinfo would wrap) fails with the URL named;
  - http://[::1]:PORT (an IPv6 literal) gives the same batches; bad brackets fail.
Exit 77 where nginx is not installed (tools/install-deps installs nginx-light) or
ringflow was built without libhttp-parser.
"""
import http.server
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import nginx_peer  # noqa: E402

prog = sys.argv[1]
d = tempfile.mkdtemp(prefix="rf-loader-http-")
os.chmod(d, 0o755)


def run(*args, expect=0):
    p = subprocess.run([prog, *args], capture_output=True, text=True, timeout=600)
    sys.stdout.write(p.stdout)
    if p.returncode == 77 or "built without libhttp-parser" in p.stderr + p.stdout:
        print("ringflow built without libhttp-parser")
        sys.exit(77)
    if p.returncode != expect:
        print("FAIL: %s exited %d, expected %d\n%s" % (" ".join(args), p.returncode, expect,
                                                       p.stderr[-3000:]))
        sys.exit(1)


# response heads the lenient parser accepts and RFC 9112 does not: each must fail every
# batch naming the URL and why, never give a wrong one
def _head(a, b, t, cr="Content-Range: bytes %d-%d/%d", first="HTTP/1.1 206 Partial Content",
          extra=""):
    return ("%s\r\n%s%s\r\nContent-Length: %d\r\n\r\n" %
            (first, extra, cr % (a, b, t), b - a + 1)).encode()


RAW = {
    "rawsp": lambda a, b, t: _head(a, b, t, cr="Content-Range : bytes %d-%d/%d"),
    "rawver": lambda a, b, t: _head(a, b, t, first="HTTX/1.1 206 Partial Content"),
    "rawfold": lambda a, b, t: _head(a, b, t, extra="X-A: a\r\n b\r\n"),
    "rawtwo": lambda a, b, t: _head(a, b, t, extra="Content-Range: bytes %d-%d/%d\r\n" % (a, b, t)),
    "rawsign": lambda a, b, t: _head(a, b, t, cr="Content-Range: bytes +%d-%d/%d"),
    "rawte": lambda a, b, t: _head(a, b, t, extra="Transfer-Encoding: gzip\r\n"),
}
RAW_WHY = {"rawsp": "token character", "rawver": "does not start with", "rawfold": "obs-fold",
           "rawtwo": "two Content-Range", "rawsign": "usable Content-Range",
           "rawte": "malformed response"}


class Faulty(http.server.BaseHTTPRequestHandler):
    """GET with one "bytes=a-b" range. The first path segment picks the behaviour:
    /ok/, /once/ (the first try of each range fails), /down/ (503 always), /cut/
    (body cut short always), /norange/ (Range ignored: 200 and the whole file),
    /grow/ (the loader's spans answered as from a longer file: the resource changed),
    /swap/, /swaplm/ (the loader's spans with another ETag, Last-Modified: the same),
    /outage/ (503 with Retry-After: 1 for the loader's spans of the first 1.5 s),
    /nototal/ (Content-Range totals of "*"),
    /trickle/ (the loader's spans: headers one byte every 50 ms, never finished)."""
    protocol_version = "HTTP/1.1"
    outage = 0.0
    seen = set()
    lock = threading.Lock()

    def log_message(self, *a):
        pass

    def do_GET(self):
        parts = self.path.split("/", 2)
        mode, name = parts[1], parts[2] if len(parts) > 2 else ""
        path = os.path.join(d, name)
        if not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = open(path, "rb").read()
        rng = self.headers.get("Range", "")
        a, b = 0, len(data) - 1
        if rng.startswith("bytes=") and mode != "norange":
            s, e = rng[6:].split("-")
            a, b = int(s), min(int(e), len(data) - 1)
        first = False
        with Faulty.lock:
            key = (mode, name, a, b)
            if key not in Faulty.seen:
                Faulty.seen.add(key)
                first = True
        # the open's requests (its first byte, header, padding) must pass in "fail
        # always" modes, so the dataset opens: only loader-sized spans fail
        fault = None
        if mode == "once" and first:
            fault = ("503", "drop", "cut")[(a // 4096 + b) % 3]
        elif mode == "outage" and a >= 4096 and b - a + 1 >= 4096:
            with Faulty.lock:  # 1.5 s of 503 with Retry-After: 1 from the first span on
                Faulty.outage = Faulty.outage or time.monotonic()
                down = time.monotonic() - Faulty.outage < 1.5
            if down:
                self.send_response(503)
                self.send_header("Retry-After", "1")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        elif mode in ("down", "cut", "grow", "trickle", "swap", "swaplm") + tuple(RAW) and \
                a >= 4096 and \
                b - a + 1 >= 4096:
            fault = "503" if mode == "down" else mode
        if fault in RAW:  # a response head RFC 9112 refuses, written as is
            self.wfile.write(RAW[fault](a, b, len(data)) + data[a:b + 1])
            self.wfile.flush()
            self.close_connection = True
            return
        if fault == "trickle":
            try:
                for ch in b"HTTP/1.1 206 Partial Content\r\nX-Slow: " + b"a" * 8000:
                    self.wfile.write(bytes([ch]))
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass  # the client gave up: expected
            self.close_connection = True
            return
        if fault == "503":
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "drop":
            self.close_connection = True
            return
        body = data[a:b + 1]
        if mode == "norange" or not rng:
            self.send_response(200)
        else:
            self.send_response(206)
            total = len(data) + (4096 if fault == "grow" else 0)
            self.send_header("Content-Range", "bytes %d-%d/%s" %
                             (a, b, "*" if mode == "nototal" else total))
            # another file of the same size: only its validator says so
            if mode == "swap":
                self.send_header("ETag", '"v2"' if fault else '"v1"')
            if mode == "swaplm":
                self.send_header("Last-Modified", "Tue, 01 Dec 2026 00:00:0%d GMT" %
                                 (2 if fault else 1))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if fault == "cut":
            self.wfile.write(body[:len(body) // 2])
            self.close_connection = True
            return
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # the client hung up on a fault we made: expected


class Server6(Server):
    address_family = socket.AF_INET6


try:
    run("make", d)
    # a URL without a host is said to be so (it said "(no path)"); no server needed
    run("openfail", "http:///x.rfrec", "(no host)")
    run("openfail", "http://:8080/x.rfrec", "(no host)")
    run("openfail", "http://127.0.0.1:1", "(no path)")
    if not nginx_peer.binary():
        print("nginx not installed")
        sys.exit(77)
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o644)
    with nginx_peer.serve(d, d) as nport:
        print("-- nginx")
        run("same", "http://127.0.0.1:%d" % nport, d)
        run("openfail", "http://127.0.0.1:%d/missing.rfrec" % nport, "404")

    srv = Server(("127.0.0.1", 0), Faulty)
    fport = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % fport
    print("-- a server that fails each range once")
    # (the windowed order: one read per chunk through Python's slow server, each failed
    # once; the uniform order's per-record reads are checked against nginx above)
    run("same", base + "/once", d, "windowed")
    # a server that gives no total: said as such (it read as "the file is empty")
    run("openfail", base + "/nototal/small.rfrec", "gives no size")
    # a #fragment is not sent (the server looked for "small.rfrec#frag": 404)
    run("opens", base + "/ok/small.rfrec#frag")
    print("-- a server down for 1.5 s (503, Retry-After: 1)")
    # the retries wait as Retry-After asks (they were four in a millisecond: any outage
    # longer than that ended the run)
    run("same", base + "/outage", d, "windowed")
    print("-- a server that always fails")
    small = os.path.join(d, "small.rfrec")
    run("fail", base + "/down/small.rfrec", small, "503")
    run("fail", base + "/cut/small.rfrec", small, "short body")
    run("fail", base + "/grow/small.rfrec", small, "changed on the server")
    # replaced by a file of the same size (its ETag, or Last-Modified, changed): read on
    # silently before, the records a mix of two files
    run("fail", base + "/swap/small.rfrec", small, 'changed on the server: ETag "v2"')
    run("fail", base + "/swaplm/small.rfrec", small, "changed on the server: Last-Modified")
    for mode, why in RAW_WHY.items():
        run("fail", base + "/%s/small.rfrec" % mode, small, why)
    # headers that never finish: one deadline for all of them (1 s here), not one per
    # byte received, which let such a server hold a request for hours
    os.environ["RF_HTTP_TIMEOUT_MS"] = "1000"
    t0 = time.monotonic()
    run("fail", base + "/trickle/small.rfrec", small, "timed out")
    del os.environ["RF_HTTP_TIMEOUT_MS"]
    if time.monotonic() - t0 > 60:
        print("FAIL: a trickling server held the loader %.0f s" % (time.monotonic() - t0))
        sys.exit(1)
    run("openfail", "http://127.0.0.1:%d/x.rfrec" % (fport + 65536), "expected 1 to 65535")
    run("openfail", base + "/norange/small.rfrec", "ignores Range")
    run("openfail", "http://127.0.0.1:%d/x.rfrec" % nginx_peer.free_port(), "refused")
    srv.shutdown()
    # an IPv6 literal ([::1]:PORT), where this machine has IPv6 loopback; malformed
    # brackets are refused naming the URL
    try:
        srv6 = Server6(("::1", 0), Faulty)
    except OSError:
        srv6 = None
        print("-- no IPv6 loopback here: [::1] not tried")
    if srv6:
        threading.Thread(target=srv6.serve_forever, daemon=True).start()
        print("-- the same over http://[::1]:PORT")
        run("same", "http://[::1]:%d/once" % srv6.server_address[1], d, "windowed")
        srv6.shutdown()
    run("openfail", "http://[::1/x.rfrec", "expected [IPv6 address]")
    run("openfail", "http://user:pw@127.0.0.1:1/x.rfrec", "user information")
    run("openfail", "http://[::1]x/x.rfrec", "expected [IPv6 address]")
    run("openfail", "http://::1/x.rfrec", "in brackets")
    run("openfail", "http://[localhost]:80/x.rfrec", "cannot resolve")  # not a name
finally:
    shutil.rmtree(d, ignore_errors=True)
print("loader over HTTP: all checks passed")
