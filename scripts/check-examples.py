#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The docs' examples, run: every command of the ```sh blocks of README.md and
docs/*.md either runs here and does what its doc says, or is listed in
NOT_RUN below with the reason it is not run. A command in neither fails the
check, so a new example cannot go unchecked; so does an entry of NOT_RUN
that no doc holds any more.

    scripts/check-examples.py FXAGENT     (as root; ctest: integration.examples)

What a command is: one line of a ```sh block, with the lines a trailing `\\`
continues joined to it and its `# comment` dropped. A ```yaml block whose
first line is `# NAME.yaml` is written to NAME.yaml before its doc's
commands run, so that `fxagent --config NAME.yaml` finds it.

How the commands run: one doc after the other, each block's commands in
order, in a temporary directory, with a `fxagent` symlink to FXAGENT first
on PATH and these rewrites, the same for every command:
- `./build/fxagent` and `build/fxagent` are `fxagent`;
- paths under /var/lib/fxagent/ move under the temporary directory, where
  an agent has first written chunks of target `web`, host `web-3` and label
  `env=prod` in 1 s windows, for the fleet view's examples;
- a recording longer than 1 s (`-d 10s`, `--duration 2m`) takes 1 s;
- `$!` is the pid of the block's last command that ended with `&`.
Then, by kind:
- `CMD &` starts in the background; what is still running at the end of its
  block is ended (SIGTERM);
- a command that serves a profile (`--serve`, or `fxagent view` without
  `-o` or `--top`) must print the Firefox Profiler's link within SERVE_WAIT seconds;
  it is then stopped with SIGINT, as Ctrl-C would;
- the agent (fxagent without --once, -d, -o, -p, --serve, --check-config,
  --help, --version or view) runs AGENT_SECONDS, then gets SIGINT;
- anything else runs to its end, at most COMMAND_TIMEOUT seconds.
Each must exit 0, or N where its comment says "(exit status N)". A file the
command says it writes must then exist and not be empty: fxagent's `-o FILE`
(not `-`), a shell's `> FILE`, and the agent's `--output-dir DIR` or its
config's `directory:`, which must hold a chunk.

Only commands of the programs in RUNNABLE are run: any other command (a
package manager, systemctl, a build) must be in NOT_RUN, or the check fails.

Exit status: 0 every example passed, 1 one failed (each failure is printed
with its doc and line), 77 not root (ctest: skipped)."""

import glob
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT)
                              for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))

# Commands the docs show that are not run here, each with the reason. The
# key is the command as extracted (its comment dropped, spaces collapsed).
NOT_RUN = {
    "bash scripts/run.sh":
        "installs the build dependencies and builds in build/: CI's own build",
    "bash scripts/test.sh":
        "what CI runs (.ci/run): installs the test dependencies and runs every test, "
        "this one too",
    "fxagent view https://collector.example/chunks/ --target web --since 1h --merge all":
        "a collector's HTTP listing; integration.view reads one from nginx",
    "fxagent view s3://profiles/fleet/ --region eu-west-1 --target web --since 1h "
    "--merge all":
        "a real S3 bucket; integration.s3 reads one from Ceph's radosgw",
    "fxagent view s3://profiles/fleet/ --target web --from 2026-11-28T13:00:00Z "
    "--to 2026-11-28T14:00:00Z --compare --from 2026-11-28T14:00:00Z --to 2026-11-28T15:00:00Z":
        "a real S3 bucket at fixed times; integration.view compares two slices and "
        "integration.s3 reads a bucket from Ceph's radosgw",
    "AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... fxagent view s3://profiles/fleet/ "
    "--target web --since 1h --region eu-west-1":
        "a real S3 bucket and its credentials; integration.s3 reads one from Ceph's radosgw",
    "npm install --prefix build/node @firefox-devtools/profiler-cli@0.10.0":
        "a package install from npm (scripts/install-test-deps.sh does it)",
    "build/node/node_modules/.bin/profiler-cli load host.json.gz":
        "profiler-cli from npm and its daemon; the integration tests drive it (fxtest.Cli)",
    "build/node/node_modules/.bin/profiler-cli thread list":
        "profiler-cli from npm and its daemon; the integration tests drive it (fxtest.Cli)",
    "build/node/node_modules/.bin/profiler-cli thread samples-top-down --thread t-0":
        "profiler-cli from npm and its daemon; the integration tests drive it (fxtest.Cli)",
    "build/node/node_modules/.bin/profiler-cli stop --all":
        "profiler-cli from npm and its daemon; the integration tests drive it (fxtest.Cli)",
    "deb=$(bash scripts/build-deb.sh build/pkg)":
        "builds the Debian package (minutes); the ctest package.deb does it",
    'apt install ./"$deb"':
        "a package install; integration.systemd installs the package in a container",
    'sudo apt install ./"$deb"':
        "a package install; integration.systemd installs the package in a container",
    "systemctl status fxagent":
        "needs the packaged service on a systemd host; integration.systemd boots one",
    "sudo systemctl edit fxagent":
        "an editor on a systemd host",
    "ctest --test-dir build -L integration --output-on-failure":
        "every integration test (about 15 minutes); CI runs them",
    "ctest --test-dir build -R integration.examples --output-on-failure":
        "this test",
    "bash scripts/conditions.sh -R 'churn|short_lived' busy half":
        "integration tests under load, for minutes",
    "bash scripts/conditions.sh":
        "every integration test under six conditions: about 1 h 40 min",
}

# The programs whose commands are run here (after the rewrites below); an
# example of any other program must be in NOT_RUN.
RUNNABLE = {"fxagent", "sh", "kill", "sleep", "ls", "cat", "zcat", "date"}

SERVE_WAIT = 30       # seconds for a served profile's link
AGENT_SECONDS = 3     # how long an agent runs before SIGINT
COMMAND_TIMEOUT = 30  # any other command
STOP_WAIT = 15        # from SIGINT to exit
PROFILER_LINK = "https://profiler.firefox.com/from-url/"
ONCE_FLAGS = {"--once", "-d", "--duration", "-o", "--output", "-p", "--pid", "--serve"}
NOT_AGENT = {"--check-config", "-h", "--help", "-V", "--version", "view"}


def strip_comment(line):
    """@line without its `# comment` (a # that starts a word, outside quotes),
    and the comment."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def extract(rel):
    """([(line, command, comment)], {yaml name: text}) of one doc."""
    with open(os.path.join(ROOT, rel)) as f:
        lines = f.read().split("\n")
    blocks, files = [], {}
    i = 0
    while i < len(lines):
        fence = re.match(r"^\s*```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        lang, start, body = fence[1], i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        i += 1
        indent = min((len(b) - len(b.lstrip()) for b in body if b.strip()), default=0)
        body = [b[indent:] for b in body]
        if lang == "yaml" and body and re.match(r"^# [\w.-]+\.yaml$", body[0]):
            files[body[0][2:]] = "\n".join(body) + "\n"
        if lang != "sh":
            continue
        block, pending, first = [], "", None
        for n, b in enumerate(body, start + 1):
            text, comment = strip_comment(b)
            if first is None:
                first, comments = n, []
            comments.append(comment)
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            cmd = " ".join((pending + text).split())
            pending, line = "", first
            first = None
            if cmd:
                block.append((line, cmd, " ".join(c for c in comments if c)))
        blocks.append(block)
    return blocks, files


class Runner:
    def __init__(self, agent, tmp):
        self.tmp = tmp
        self.state = os.path.join(tmp, "var/lib/fxagent")
        self.cwd = os.path.join(tmp, "run")
        bindir = os.path.join(tmp, "bin")
        for d in (self.cwd, bindir):
            os.makedirs(d)
        os.makedirs(self.state, mode=0o755)
        os.symlink(os.path.abspath(agent), os.path.join(bindir, "fxagent"))
        self.env = dict(os.environ, PATH=bindir + ":" + os.environ.get("PATH", ""),
                        PWD=self.cwd)
        self.failures = []
        self.ran = 0
        self.background = []

    # ------------------------------------------------------------ rewrites
    def rewrite(self, text):
        text = re.sub(r"(^|[\s;&|(])\.?/?build/fxagent\b", r"\1fxagent", text)
        text = re.sub(r"(?<![\w/])/var/lib/fxagent(?=/|\b)", self.state, text)
        return text

    def rewrite_command(self, cmd):
        cmd = self.rewrite(cmd)

        def one_second(m):
            return m[1] + ("1s" if duration_ms(m[2]) > 1000 else m[2])
        cmd = re.sub(r"(\s(?:-d|--duration)[\s=])(\d+(?:ms|s|m|h|d)?)(?=\s|$)", one_second, cmd)
        if "$!" in cmd:
            pid = self.background[-1][0].pid if self.background else 0
            cmd = cmd.replace("$!", str(pid))
        return cmd

    # ------------------------------------------------------------- running
    def fail(self, where, cmd, why, output=""):
        tail = "\n".join(output.strip().splitlines()[-15:])
        self.failures.append(f"{where}: {cmd}\n    {why}" + (f"\n    {tail}" if tail else ""))
        print(f"  FAIL: {why}", flush=True)

    def popen(self, cmd, out):
        w = words(cmd)
        # exec: the pid is the command's, so that SIGINT and $! reach it
        # (not with VAR=value in front: exec would take it for the program).
        shell = "exec " + cmd if w and cmd.startswith(w[0]) else cmd
        return subprocess.Popen(["bash", "-c", shell], cwd=self.cwd, env=self.env,
                                stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def run(self, where, cmd, comment):
        if "$!" in cmd and not self.background:
            print(f"{where}: {cmd}", flush=True)
            return self.fail(where, cmd, "$! with no command ended by & before it in its block")
        real = self.rewrite_command(cmd)
        want = int(m[1]) if (m := re.search(r"\(exit status (\d+)\)", comment)) else 0
        self.ran += 1
        print(f"{where}: {real}", flush=True)
        log = os.path.join(self.tmp, f"out-{self.ran}.txt")
        kind = kind_of(real)
        t0, since = time.monotonic(), time.time()
        with open(log, "w") as out:
            if kind == "background":
                p = self.popen(real[:-1].rstrip(), out)
                self.background.append((p, where, real[:-1].rstrip(), log, since))
                print(f"  started in the background, pid {p.pid}", flush=True)
                return
            p = self.popen(real, out)
            status = None
            if kind == "serve":
                status = self.serve(p, log)
            elif kind == "agent":
                time.sleep(AGENT_SECONDS)
                status = stop(p)
            else:
                try:
                    status = p.wait(COMMAND_TIMEOUT)
                except subprocess.TimeoutExpired:
                    kill(p)
                    status = "not ended in %d s" % COMMAND_TIMEOUT
        with open(log) as f:
            output = f.read()
        if isinstance(status, str):
            return self.fail(where, real, status, output)
        if status != want:
            return self.fail(where, real, f"exit status {status}, not {want}", output)
        if kind == "serve" and PROFILER_LINK not in output:
            return self.fail(where, real, "printed no Firefox Profiler link", output)
        self.check_files(where, real, output, since)
        print(f"  ok ({time.monotonic() - t0:.1f} s)", flush=True)

    def serve(self, p, log):
        deadline = time.monotonic() + SERVE_WAIT
        while time.monotonic() < deadline and p.poll() is None:
            with open(log) as f:
                if PROFILER_LINK in f.read():
                    break
            time.sleep(0.2)
        else:
            if p.poll() is None:
                kill(p)
                return f"no Firefox Profiler link within {SERVE_WAIT} s"
            return p.returncode
        return stop(p)

    def end_block(self):
        for p, where, cmd, log, since in self.background:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(STOP_WAIT)
                except subprocess.TimeoutExpired:
                    kill(p)
            with open(log) as f:
                self.check_files(where, cmd, f.read(), since)
        self.background = []

    def check_files(self, where, cmd, output, since):
        for path, chunks in written(cmd, self.cwd):
            if chunks:
                found = [c for c in glob.glob(os.path.join(path, "*.json.gz"))
                         if os.path.getmtime(c) >= since - 1]
                if not found:
                    self.fail(where, cmd, f"no new chunk in {path}", output)
            elif not os.path.isfile(path) or os.path.getsize(path) == 0:
                self.fail(where, cmd, f"{path} not written", output)

    def write_files(self, files):
        for name, text in files.items():
            with open(os.path.join(self.cwd, name), "w") as f:
                f.write(self.rewrite(text))

    def fixture(self):
        """Chunks of target web, host web-3, label env=prod, for the view's
        examples, in what the docs call /var/lib/fxagent/chunks."""
        busy = subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
        conf = os.path.join(self.tmp, "fixture.yaml")
        chunks = os.path.join(self.state, "chunks")
        with open(conf, "w") as f:
            f.write(f"targets:\n  - name: web\n    pid: {busy.pid}\n"
                    f"window: {{seconds: 1}}\noutput: {{directory: {chunks}}}\n"
                    f"labels: {{host: web-3, env: prod}}\n")
        print(f"fixture: an agent writing chunks of 'web' into {chunks}", flush=True)
        with open(os.path.join(self.tmp, "fixture.txt"), "w") as out:
            p = subprocess.Popen(["fxagent", "--config", conf], cwd=self.cwd, env=self.env,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            time.sleep(AGENT_SECONDS)
            status = stop(p)
        kill(busy)
        if status != 0 or not glob.glob(os.path.join(chunks, "web-*.json.gz")):
            with open(os.path.join(self.tmp, "fixture.txt")) as f:
                sys.exit(f"check-examples: the fixture's agent (status {status}) wrote no "
                         f"chunk:\n{f.read()[-2000:]}")


def duration_ms(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d)?", text)
    scale = {"ms": 1, "s": 1000, None: 1000, "m": 60000, "h": 3600000, "d": 86400000}
    return int(m[1]) * scale[m[2]] if m else 0


def words(cmd):
    """The command's words after VAR=value assignments, or []."""
    try:
        w = shlex.split(cmd)
    except ValueError:
        return []
    while w and re.match(r"^[A-Za-z_]\w*=", w[0]):
        w = w[1:]
    return w


def kind_of(cmd):
    if re.search(r"(?<!&)&$", cmd):
        return "background"
    w = words(cmd)
    if not w or os.path.basename(w[0]) != "fxagent":
        return "plain"
    flags = {a.split("=", 1)[0] for a in w[1:]}
    if "view" in w[1:2]:
        # --top prints a table and serves nothing (unless --serve says so)
        if "--serve" not in flags and flags & {"-o", "--output", "-h", "--help", "--top"}:
            return "plain"
        return "serve"
    if "--serve" in flags:
        return "serve"
    if flags & (ONCE_FLAGS | NOT_AGENT):
        return "plain"
    return "agent"


def written(cmd, cwd):
    """[(path, is a directory of chunks)] that @cmd says it writes."""
    out = []
    w = words(cmd.rstrip("&").strip())
    here = lambda p: os.path.join(cwd, p.replace("${PWD}", cwd).replace("$PWD", cwd))
    for i, a in enumerate(w):
        if a == ">" and i + 1 < len(w):
            out.append((here(w[i + 1]), False))
    if not w or os.path.basename(w[0]) != "fxagent":
        return out
    for i, a in enumerate(w[1:], 1):
        flag, eq, val = a.partition("=")
        if not eq:
            val = w[i + 1] if i + 1 < len(w) else ""
        if flag in ("-o", "--output") and val and val != "-":
            out.append((here(val), False))
        elif flag == "--output-dir" and val:
            out.append((here(val), True))
        elif flag in ("-c", "--config") and val and kind_of(cmd.rstrip("&").strip()) == "agent":
            try:
                with open(here(val)) as f:
                    m = re.search(r"directory:\s*([^\s,}#]+)", f.read())
            except OSError:
                m = None
            if m:
                out.append((m[1], True))
    return out


def stop(p):
    """SIGINT, as Ctrl-C; the exit status, or why there is none."""
    if p.poll() is not None:
        return p.returncode
    try:
        os.killpg(p.pid, signal.SIGINT)
    except ProcessLookupError:
        pass
    try:
        return p.wait(STOP_WAIT)
    except subprocess.TimeoutExpired:
        kill(p)
        return f"not ended {STOP_WAIT} s after SIGINT"


def kill(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def run_docs(r, docs):
    """Every doc's commands, in order: run, or listed in NOT_RUN."""
    r.fixture()
    for rel, blocks, files in docs:
        r.write_files(files)
        for block in blocks:
            for line, cmd, comment in block:
                where = f"{rel}:{line}"
                w = words(r.rewrite_command(cmd).rstrip("&").strip())
                if cmd in NOT_RUN:
                    print(f"{where}: not run: {cmd} ({NOT_RUN[cmd]})", flush=True)
                elif not w or os.path.basename(w[0]) not in RUNNABLE:
                    print(f"{where}: {cmd}", flush=True)
                    r.fail(where, cmd, "neither run here (its program is not in RUNNABLE) "
                           "nor listed in NOT_RUN with the reason")
                else:
                    r.run(where, cmd, comment)
            r.end_block()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    agent = sys.argv[1]
    if os.geteuid() != 0:
        print("check-examples: needs root (the examples record the whole system)")
        return 77
    docs = [(rel, *extract(rel)) for rel in DOCS]
    seen = {cmd for _, blocks, _ in docs for block in blocks for _, cmd, _ in block}
    stale = sorted(set(NOT_RUN) - seen)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fx-examples-") as tmp:
        r = Runner(agent, tmp)
        try:
            run_docs(r, docs)
        finally:
            r.end_block()
        for cmd in stale:
            r.failures.append(f"NOT_RUN lists '{cmd}', which no doc holds any more")
        print(f"check-examples: {r.ran} commands run in {time.monotonic() - t0:.0f} s, "
              f"{len(seen & set(NOT_RUN))} not run (listed), {len(r.failures)} failed")
        for f in r.failures:
            print("FAILED " + f)
        return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
