#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Uploads: window end to chunk acknowledged by a local nginx.

Runs nginx (loopback, WebDAV PUT) and the agent in whole-system mode with
W-second windows and upload.url pointing at nginx, while one fx-bench-work
runs per CPU, for N full windows. Prints, per chunk and as medians: the time
from the window's end to nginx logging the PUT (the acknowledgement), and the
CPU time the agent's threads spent per chunk: fx-publish (symbolize, encode,
gzip, write to the spool) and fx-upload (send). Needs nginx (nginx-light).

usage: bench/upload.py [--build DIR] [--quick] [--window SECONDS] [--windows N]
"""
import calendar
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402


def add_args(ap):
    ap.add_argument("--window", type=int, help="window seconds (default 60 alone, 20 in "
                    "run.py; --quick 5)")
    ap.add_argument("--windows", type=int, help="full windows (default 2; --quick 1)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def thread_cpu(pid, name):
    """CPU seconds of the threads of @pid named @name (schedstat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != name:
                    continue
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError):
            pass
    return total / 1e9


def run(ctx, a):
    window = a.window or (5 if ctx.quick else getattr(ctx, "upload_window", 60))
    windows = a.windows or (1 if ctx.quick else 2)
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    head = ["### Uploads", ""]
    if not os.access(nginx, os.X_OK):
        return head + ["Not measured: nginx is missing (apt-get install nginx-light).", ""]
    ctx.need(ctx.agent, ctx.work)
    fb.need_root()
    with tempfile.TemporaryDirectory(prefix="fxbench-") as d:
        port = free_port()
        for sub in ("root/put", "logs", "tmp"):
            os.makedirs(os.path.join(d, sub))
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""daemon off; master_process on; worker_processes 1; user root;
pid {d}/nginx.pid; error_log {d}/logs/error.log;
events {{ worker_connections 64; }}
http {{
  log_format up "$msec $request_uri $status";
  access_log {d}/logs/access.log up;
  client_body_temp_path {d}/tmp; client_max_body_size 256m;
  server {{ listen 127.0.0.1:{port};
    location /put/ {{ dav_methods PUT; create_full_put_path on; root {d}/root; }} }}
}}
""")
        cfg = os.path.join(d, "fxagent.yaml")
        with open(cfg, "w") as f:
            f.write(f"window:\n  seconds: {window}\noutput:\n  directory: {d}/out\n"
                    f"upload:\n  url: http://127.0.0.1:{port}/put/{{end}}-{{seq}}-{{id}}.json.gz\n"
                    f"  method: PUT\nspool:\n  directory: {d}/spool\n")
        ng = subprocess.Popen([nginx, "-c", conf, "-p", d + "/"])
        work = fb.start_work(ctx, fb.NCPU, window * (windows + 2) + 30)
        try:
            time.sleep(0.5)
            ag = subprocess.Popen([ctx.agent, "--config", cfg], stderr=subprocess.DEVNULL)
            # The first window is partial; wait for N full ones and their upload.
            now = time.time()
            first_end = (int(now) // window + 1) * window
            time.sleep(first_end + window * windows - now + 5)
            pub, up = thread_cpu(ag.pid, "fx-publish"), thread_cpu(ag.pid, "fx-upload")
            fb.stop(ag)
        finally:
            fb.kill_all(work)
            ng.send_signal(signal.SIGTERM)
            ng.wait()
        lat, sizes = [], []
        with open(os.path.join(d, "logs", "access.log")) as f:
            for line in f:
                m = re.match(r"([\d.]+) /put/(\d{8}T\d{6}Z)-(\d+)-\w+\.json\.gz (\d+)", line)
                if not m or m.group(4) not in ("201", "204"):
                    continue
                end = calendar.timegm(time.strptime(m.group(2), "%Y%m%dT%H%M%SZ"))
                if end > first_end + window * windows:
                    continue  # the window cut short by the stop
                lat.append(float(m.group(1)) - end)
        for name in os.listdir(os.path.join(d, "root", "put")):
            sizes.append(os.path.getsize(os.path.join(d, "root", "put", name)))
    chunks = max(1, len(sizes))
    rows = [["chunks acknowledged (windows ended before the stop)", str(len(lat))]]
    if lat:
        rows.append(["window end to acknowledged, median (min-max)",
                     f"{statistics.median(lat):.3f} s ({min(lat):.3f}-{max(lat):.3f})"])
    rows += [["CPU per chunk: fx-publish (symbolize, encode, gzip, spool)",
              f"{1000 * pub / chunks:.0f} ms"],
             ["CPU per chunk: fx-upload (send)", f"{1000 * up / chunks:.1f} ms"]]
    if sizes:
        rows.append(["chunk size, median", f"{statistics.median(sizes) / 1024:.0f} KiB"])
    head += [f"`bench/upload.py`: the agent on the whole system, {window} s windows, every "
             f"CPU busy (`fx-bench-work`), PUT to an nginx on loopback, {windows} full "
             f"window{'s' * (windows > 1)}.", ""]
    aims = []
    if lat:
        worst = max(lat)
        aims = [f"Aim: a chunk acknowledged under 1 s after its window ends "
                f"({fb.aim(worst < 1, f'{worst:.3f} s at most')}).", ""]
    return head + fb.table(["figure", "value"], rows) + aims


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)
