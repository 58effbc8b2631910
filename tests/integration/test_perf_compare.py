# SPDX-License-Identifier: MIT
"""fxagent and perf record fx-hot-ab at the same time, at 99 Hz, for the same
span: hot_a's and hot_b's shares agree within 5 points (or 3.5 standard errors
of the difference of two samplings when the process got few samples), and so
(within 15%) do the sample counts."""

import time

import fxtest

SECONDS = 5


def body(t):
    w = t.workload("fx-hot-ab", SECONDS + 30)
    time.sleep(0.3)
    prof, data = t.record_beside_perf("agent", SECONDS, w.pid)
    t.kill_processes()

    perf_n, perf_pct = fxtest.perf_self_shares(t, data)

    ths = prof.threads_of(w.pid)
    t.require(ths, f"fxagent: no thread of pid {w.pid}")
    agent_n = prof.weight(ths)
    cli = t.cli(prof.path, "agent")
    funcs = cli.functions(cli.handles(pid=w.pid))
    t.note(f"samples: perf {perf_n}, fxagent {agent_n}")
    # Two samplings at their own phases: the difference of their shares has
    # sqrt(2) times the error of one (495 samples each: 2.9 points), hence n / 2.
    tol = fxtest.share_tol(70, min(perf_n, agent_n) / 2, 5)
    for fn in ("hot_a", "hot_b"):
        a = funcs[fn]["selfPercentage"] if fn in funcs else 0.0
        p = perf_pct.get(fn, 0.0)
        t.note(f"{fn}: perf {p:.1f}%, fxagent {a:.1f}% (self)")
        t.check(p > 0, f"perf report has no {fn}")
        t.check(abs(a - p) <= tol, f"{fn}: fxagent self {a:.1f}% vs perf {p:.1f}%: more "
                f"than {tol:.1f} points apart")
    t.check(perf_n and abs(agent_n - perf_n) <= 0.15 * perf_n,
            f"fxagent took {agent_n} samples, perf {perf_n} over the same {SECONDS} s")


fxtest.main(body)
