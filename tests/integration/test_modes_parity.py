# SPDX-License-Identifier: MIT
"""`fxagent --once` and the daemon write the same chunk: both are drivers of one
pipeline. The same config (labels, an 8 KiB ring per CPU with DWARF stacks at
10 kHz, so that the kernel drops samples) while two fx-hot-ab keep both CPUs
busy; a --once profile, then the daemon's chunks of 2 s windows:

- the same keys in meta, in meta.fxagent and in the FxRecording marker, the
  same target, host, labels and interval;
- the same kinds of markers on the agent's own track: the recording window
  and the lost samples, each lost marker at its time inside the window, and
  their counts adding up to the window's lost count.
"""

import os
import signal
import time

import fxtest
from fxdaemon import Daemon

CONFIG = ("labels:\n  env: parity\n  team: profiling\n"
          "sampling:\n  ring_size: 8KiB\n  frequency: 10000\n  unwind: dwarf\n"
          "  stack_bytes: 4096\n")


def agent_markers(t, prof, name):
    """[(marker name, data) ...] of the track that carries them (the busiest)."""
    tracks = [th for th in prof.threads if th["markers"]["length"]]
    t.require(len(tracks) == 1, f"{name}: markers on {len(tracks)} tracks, want one")
    out = []
    for th in tracks:
        m = th["markers"]
        for i in range(m["length"]):
            out.append((prof.data["shared"]["stringArray"][m["name"][i]], m["data"][i] or {},
                        m["startTime"][i]))
    return out


def shape(t, prof, name):
    """What a chunk's kind is made of, to compare between the modes."""
    meta = prof.data["meta"]
    fx = meta.get("fxagent") or {}
    markers = agent_markers(t, prof, name)
    rec = [d for n, d, _ in markers if d.get("type") == "FxRecording"]
    lost = [(d, at) for n, d, at in markers if d.get("type") == "FxLostSamples"]
    t.check(len(rec) == 1, f"{name}: {len(rec)} FxRecording markers")
    span = fx.get("windowEnd", 0) - fx.get("windowStart", 0)
    t.check(lost, f"{name}: no lost-sample markers though {fx.get('lost')} samples were lost")
    for d, at in lost:
        t.check(0 <= at <= span + 1, f"{name}: lost marker at {at} ms, outside 0..{span}")
    t.check(sum(d.get("count", 0) for d, _ in lost) == fx.get("lost"),
            f"{name}: lost markers count {sum(d.get('count', 0) for d, _ in lost)}, "
            f"meta.fxagent.lost {fx.get('lost')}")
    return {
        "meta keys": sorted(meta),
        "meta.fxagent keys": sorted(fx),
        "recording keys": sorted(rec[0]) if rec else None,
        "marker kinds": sorted({(n, d.get("type")) for n, d, _ in markers}),
        "target": fx.get("target"),
        "host": fx.get("host"),
        "labels": fx.get("labels"),
        "interval": meta.get("interval"),
    }


def body(t):
    for _ in range(2):
        t.workload("fx-hot-ab", 60)
    cfg = os.path.join(t.work, "parity.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    once = os.path.join(t.work, "once.json.gz")
    r = t.run_agent("--once", "--config", cfg, "-d", "2s", "-o", once)
    t.require(r.returncode == 0, f"--once exited {r.returncode}: {r.stderr[-1500:]}")
    a = shape(t, t.load(once), "--once")

    d = Daemon(t, "daemon", CONFIG + "window:\n  seconds: 2\n")
    d.wait_started()
    fxtest.wait_for(lambda: len(d.chunks(running=True).get("system", [])) >= 2, 15)
    rc = d.stop(signal.SIGTERM)
    t.check(rc == 0, f"fxagent exited {rc} after SIGTERM")
    chunks = d.chunks().get("system", [])
    t.require(len(chunks) >= 2, f"{len(chunks)} daemon chunks")
    # The first whole window: the first chunk starts when the agent does.
    seq, path = chunks[1]
    b = shape(t, t.load(path), os.path.basename(path))
    for key in a:
        t.check(a[key] == b[key], f"{key}: --once {a[key]!r}, daemon {b[key]!r}")
    t.note(f"both: {a['marker kinds']}; meta.fxagent {a['meta.fxagent keys']}")


if __name__ == "__main__":
    fxtest.main(body)
