"""tests/stall_server.py -- an HTTP server on loopback for the tests of clients that
must not hang: it answers "Range: bytes=a-b" requests with one file's bytes (206) while
it serves, and once told to stall it accepts every request and never answers it
(until closed). Used by tests/python/test_ringflow.py and
tests/train/test-train-http-stall.py."""
import re
import socketserver
import threading


class StallServer:
    def __init__(self, data):
        self.data = data
        self.only = None
        self.after = 0
        self.lock = threading.Lock()
        self.stalling = threading.Event()
        self.released = threading.Event()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                outer._handle(self)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.srv = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def url(self, name):
        return "http://127.0.0.1:%d/%s" % (self.srv.server_address[1], name)

    def stall(self, on=True, only=None, after=0):
        """From now on requests are stalled (on) or answered (not on); only: a substring
        of the request line that a stalled request has (None: every request); after:
        that many requests answered first."""
        self.only = only
        self.after = after
        (self.stalling.set if on else self.stalling.clear)()

    def close(self):
        self.released.set()
        self.srv.shutdown()
        self.srv.server_close()

    def _handle(self, h):
        while True:
            head = []
            while True:
                line = h.rfile.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                head.append(line.decode("latin1"))
            if self.stalling.is_set() and (self.only is None or self.only in head[0]):
                with self.lock:
                    self.after -= 1
                    wait = self.after < 0
                if wait:
                    self.released.wait(60)
                    return
            m = re.search(r"(?im)^range:\s*bytes=(\d+)-(\d*)", "".join(head))
            a = int(m.group(1))
            b = int(m.group(2)) if m.group(2) else len(self.data) - 1
            body = self.data[a:b + 1]
            h.wfile.write(b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %d-%d/%d\r\n"
                          b"Content-Length: %d\r\n\r\n" % (a, a + len(body) - 1, len(self.data),
                                                           len(body)) + body)
