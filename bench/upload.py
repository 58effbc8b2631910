#!/usr/bin/env python3
"""Benchmark of uploads: window end to chunk acknowledged by a local nginx.

Runs nginx (loopback, WebDAV PUT) and the agent in whole-system mode with
W-second windows and upload.url pointing at nginx, while one fx-bench-work
runs per CPU, for N full windows. Prints, per chunk and as medians: the time
from the window's end to nginx logging the PUT (the acknowledgement), and the
CPU time the agent's threads spent per chunk: fx-publish (symbolize, encode,
gzip, write to the spool) and fx-upload (send). Figures, not a pass/fail test.
Needs root and nginx (nginx-light).

usage: bench/upload.py [--build DIR] [--window SECONDS] [--windows N]
"""
import argparse
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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def thread_cpu(pid, name):
    tck = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != name:
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tck
        except OSError:
            pass
    return total


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--window", type=int, default=60)
    ap.add_argument("--windows", type=int, default=2)
    a = ap.parse_args()
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if os.geteuid() != 0 or not os.access(nginx, os.X_OK):
        sys.exit("run as root, with nginx installed")
    with tempfile.TemporaryDirectory() as d:
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
            f.write(f"window:\n  seconds: {a.window}\noutput:\n  directory: {d}/out\n"
                    f"upload:\n  url: http://127.0.0.1:{port}/put/{{end}}-{{seq}}-{{id}}.json.gz\n"
                    f"  method: PUT\nspool:\n  directory: {d}/spool\n")
        ng = subprocess.Popen([nginx, "-c", conf, "-p", d + "/"])
        work = [subprocess.Popen([os.path.join(a.build, "bench", "fx-bench-work"),
                                  str(a.window * (a.windows + 2) + 30)],
                                 stdout=subprocess.DEVNULL) for _ in range(os.cpu_count())]
        try:
            time.sleep(0.5)
            ag = subprocess.Popen([os.path.join(a.build, "fxagent"), "--config", cfg],
                                  stderr=subprocess.PIPE, text=True)
            # The first window is partial; wait for N full ones and their upload.
            now = time.time()
            first_end = (int(now) // a.window + 1) * a.window
            time.sleep(first_end + a.window * a.windows - now + 5)
            pub, up = thread_cpu(ag.pid, "fx-publish"), thread_cpu(ag.pid, "fx-upload")
            ag.send_signal(signal.SIGINT)
            ag.communicate(timeout=120)
        finally:
            for w in work:
                w.kill()
                w.wait()
            ng.send_signal(signal.SIGTERM)
            ng.wait()
        lat, sizes = [], []
        with open(os.path.join(d, "logs", "access.log")) as f:
            for line in f:
                m = re.match(r"([\d.]+) /put/(\d{8}T\d{6}Z)-(\d+)-\w+\.json\.gz (\d+)", line)
                if not m or m.group(4) not in ("201", "204"):
                    continue
                end = calendar.timegm(time.strptime(m.group(2), "%Y%m%dT%H%M%SZ"))
                if end > first_end + a.window * a.windows:
                    continue  # the window cut short by the stop
                lat.append(float(m.group(1)) - end)
        for name in os.listdir(os.path.join(d, "root", "put")):
            sizes.append(os.path.getsize(os.path.join(d, "root", "put", name)))
    n = len(lat)
    print(f"fxagent, whole system, {a.window} s windows, {os.cpu_count()} CPUs busy, "
          f"nginx on loopback")
    print("| figure | value |")
    print("|---|---|")
    print(f"| chunks acknowledged (windows ended before the stop) | {n} |")
    if n:
        print(f"| window end to acknowledged, median (min-max) | {statistics.median(lat):.3f} s "
              f"({min(lat):.3f}-{max(lat):.3f}) |")
    chunks = max(1, len(sizes))
    print(f"| CPU per chunk: fx-publish (symbolize, encode, gzip, spool) | "
          f"{1000 * pub / chunks:.0f} ms |")
    print(f"| CPU per chunk: fx-upload (send) | {1000 * up / chunks:.1f} ms |")
    if sizes:
        print(f"| chunk size, median | {statistics.median(sizes)} bytes |")


if __name__ == "__main__":
    main()
