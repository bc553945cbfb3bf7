"""nginx_peer: nginx (one worker) serving a directory on a free loopback port, for the
tests that compare with it or read from it (tests/examples/test-httpd.py,
tests/dataloader/test-loader-http.py).

    with nginx_peer.serve(root, workdir) as port:   # None where nginx is not installed
        ...
"""
import contextlib
import os
import shutil
import socket
import subprocess
import time


def binary():
    """The nginx program, or None."""
    return shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK)
                                     else None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, tries=200):
    """True once something accepts on the port."""
    for _ in range(tries):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


@contextlib.contextmanager
def serve(root, workdir):
    """Yield nginx's port (its files under workdir), or None where nginx is missing;
    stop it on the way out. Raises RuntimeError if it does not come up."""
    nginx = binary()
    if not nginx:
        yield None
        return
    nd = os.path.join(workdir, "nginx")
    os.makedirs(nd)
    port = free_port()
    with open(os.path.join(nd, "nginx.conf"), "w") as fh:
        fh.write("""worker_processes 1; daemon off; error_log %(nd)s/error.log; pid %(nd)s/pid;
events { worker_connections 256; }
http { access_log off; client_body_temp_path %(nd)s/b; proxy_temp_path %(nd)s/p;
  fastcgi_temp_path %(nd)s/f; uwsgi_temp_path %(nd)s/u; scgi_temp_path %(nd)s/s;
  server { listen 127.0.0.1:%(port)d; root %(root)s; } }
""" % {"nd": nd, "port": port, "root": root})
    ng = subprocess.Popen([nginx, "-c", os.path.join(nd, "nginx.conf"), "-p", nd],
                          stderr=subprocess.DEVNULL)
    try:
        if not wait_port(port):
            raise RuntimeError("nginx did not listen on port %d" % port)
        yield port
    finally:
        ng.terminate()
        ng.wait()
