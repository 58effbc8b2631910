# SPDX-License-Identifier: MIT
"""fx-inline: inline_helper, always inlined into inline_caller, shows as its own
function under inline_caller (an inline frame), and holds most of the time."""

import time

import fxtest

SECONDS = 4


def body(t):
    w = t.workload("fx-inline", SECONDS + 30)
    time.sleep(0.3)
    prof = t.record("inline", SECONDS, pids=[w.pid])
    t.kill_processes()

    ths = prof.threads_of(w.pid)
    t.require(ths, f"no thread of pid {w.pid} (fx-inline) in the profile")
    helper = prof.share(ths, prof.has_func("inline_helper"))
    caller = prof.share(ths, prof.has_func("inline_caller"))
    t.note(f"raw: inline_caller in {caller:.1f}%, inline_helper in {helper:.1f}% of samples")
    t.check(caller >= 90, f"inline_caller in {caller:.1f}% of the samples, want >= 90")
    t.check(helper >= 75, f"inline_helper in {helper:.1f}% of the samples, want >= 75 "
            "(it does 9 of every 9.5 units of work)")
    under = prof.share(ths, lambda st: _parent_of(prof.stack_names(st), "inline_helper")
                       == "inline_caller")
    t.check(helper and fxtest.near(under, helper, 0.01),
            f"inline_helper is under inline_caller in {under:.1f}% of the samples, "
            f"but present in {helper:.1f}%")

    # The helper's frames are inline frames of inline_caller's code.
    sh = prof.data["shared"]
    depths = {sh["frameTable"]["inlineDepth"][i] for i, fn in enumerate(sh["frameTable"]["func"])
              if prof.func_names[fn] == "inline_helper"}
    t.check(depths and 0 not in depths,
            f"inline_helper frames have inlineDepth {sorted(depths)}, want >= 1")

    cli = t.cli(prof.path, "inline")
    handles = cli.handles(pid=w.pid)
    t.require(handles, f"profiler-cli thread list has no thread of pid {w.pid}")
    tree = cli.top_down(handles)
    nodes = [(p, n) for p, n in fxtest.tree_paths(tree) if p[-2:] == ("inline_caller",
                                                                       "inline_helper")]
    if t.check(nodes, "profiler-cli top-down: no inline_helper node under inline_caller"):
        node = max(nodes, key=lambda pn: pn[1]["totalPercentage"])[1]
        t.check(node["totalPercentage"] >= 75,
                f"profiler-cli: inline_caller > inline_helper total {node['totalPercentage']}%")
        t.check(node.get("inlineStatus") == "inlined",
                f"profiler-cli does not see inline_helper as inlined (inlineStatus "
                f"{node.get('inlineStatus')!r}): frames must share address and nativeSymbol")


def _parent_of(names, fn):
    for i, n in enumerate(names):
        if n == fn:
            return names[i - 1] if i else None
    return None


fxtest.main(body)
