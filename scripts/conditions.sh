#!/usr/bin/env bash
# The integration tests under the conditions of machines other than this one:
# a suite that passes only on the machine it was written on is not done.
#
#   scripts/conditions.sh [-b BUILD_DIR] [-R REGEX] [CONDITION...]
#
# CONDITION (default: all of them, in this order):
#   quiet    nothing else runs;
#   busy     one spinning process per CPU for the whole run, at the tests'
#            own priority (a shared, loaded host);
#   half     the tests, and the agents they start, in one cgroup limited to
#            half a CPU (cgroup v2 cpu.max where the v2 hierarchy has the cpu
#            controller, else cgroup v1 cpu.cfs_quota_us): a slow machine;
#   one      the whole run on CPU 0 alone (taskset): a one-CPU machine;
#   clock    the other clocksource of tsc and kvm-clock, restored after;
#   foreign  Node.js computing in a loop throughout: a big program of
#            someone else's, as real servers run.
# A condition this machine cannot offer is named as skipped, with why.
#
# BUILD_DIR (default build/) is a configured and built tree; REGEX is handed to
# ctest -R within the integration label (e.g. -R 'churn|short_lived'), so a
# change is checked on what it touches in minutes. Each condition's ctest log
# goes to BUILD_DIR/conditions/NAME.log. The last lines are one summary line
# per condition; the exit status is non-zero when any condition failed.
# Needs root, like the integration tests. Only processes this script started
# are ended, by their pid.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
regex=
while getopts "b:R:h" opt; do
	case $opt in
	b) build=$OPTARG ;;
	R) regex=$OPTARG ;;
	*)
		sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
all=(quiet busy half one clock foreign)
conditions=("$@")
[ ${#conditions[@]} -gt 0 ] || conditions=("${all[@]}")
for c in "${conditions[@]}"; do
	case " ${all[*]} " in
	*" $c "*) ;;
	*)
		echo "conditions.sh: unknown condition '$c' (${all[*]})" >&2
		exit 2
		;;
	esac
done
if [ ! -f "$build/CTestTestfile.cmake" ]; then
	echo "conditions.sh: $build is not a configured build tree (cmake -B $build first)" >&2
	exit 2
fi
if [ "$(id -u)" != 0 ]; then
	echo "conditions.sh: needs root, as the integration tests do" >&2
	exit 2
fi
logs=$build/conditions
mkdir -p "$logs"

# ---- what the conditions set up, and take down whatever happens ----
spinners=()
cg_dir=
cs_file=/sys/devices/system/clocksource/clocksource0/current_clocksource
cs_restore=

teardown() {
	local pid
	for pid in "${spinners[@]}"; do
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	spinners=()
	if [ -n "$cg_dir" ]; then
		# The tests end what they start; a moment for the kernel to see them go.
		for _ in $(seq 50); do
			rmdir "$cg_dir" 2>/dev/null && break
			sleep 0.1
		done
		[ -d "$cg_dir" ] && echo "conditions.sh: cannot remove $cg_dir" >&2
		cg_dir=
	fi
	if [ -n "$cs_restore" ]; then
		echo "$cs_restore" > "$cs_file"
		cs_restore=
	fi
}
trap teardown EXIT
trap 'exit 130' INT TERM

# The mount point of a cgroup hierarchy: "cgroup2", or a v1 controller's name.
cgroup_mount() {
	awk -v want="$1" '{
		split($0, half, " - "); split(half[1], l, " "); split(half[2], r, " ")
		if (want == "cgroup2") { if (r[1] == "cgroup2" && l[4] == "/") { print l[5]; exit } }
		else if (r[1] == "cgroup" && l[4] == "/" && ("," r[3] ",") ~ ("," want ",")) {
			print l[5]; exit }
	}' /proc/self/mountinfo
}

# Sets up the half-CPU cgroup in cg_dir; sets why and fails otherwise.
make_half_cpu() {
	local v2 v1
	v2=$(cgroup_mount cgroup2)
	if [ -n "$v2" ] && grep -qw cpu "$v2/cgroup.controllers" 2>/dev/null; then
		grep -qw cpu "$v2/cgroup.subtree_control" || echo +cpu > "$v2/cgroup.subtree_control" ||
			{ why="cannot enable the cpu controller in $v2"; return 1; }
		cg_dir=$v2/fxcond-$$
		mkdir "$cg_dir" && echo "50000 100000" > "$cg_dir/cpu.max" && return 0
	fi
	v1=$(cgroup_mount cpu)
	if [ -n "$v1" ] && [ -f "$v1/cpu.cfs_quota_us" ]; then
		cg_dir=$v1/fxcond-$$
		mkdir "$cg_dir" && echo 100000 > "$cg_dir/cpu.cfs_period_us" &&
			echo 50000 > "$cg_dir/cpu.cfs_quota_us" && return 0
	fi
	why="no cpu controller: neither cgroup v2 cpu.max nor cgroup v1 cpu.cfs_quota_us"
	return 1
}

# ---- one condition ----
summary=()
failed=0

# Sets condition $1 up, and the command that runs the tests into run_prefix;
# or says why it cannot be had here in why, and fails.
setup() {
	local other n
	run_prefix=()
	why=
	case $1 in
	quiet) ;;
	busy)
		n=$(nproc)
		for _ in $(seq "$n"); do
			bash -c 'while :; do :; done' &
			spinners+=($!)
		done
		;;
	half)
		make_half_cpu || return 1
		# The runner joins the cgroup, then becomes ctest: all it starts is in.
		run_prefix=(bash -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg_dir")
		;;
	one)
		command -v taskset >/dev/null || { why="no taskset"; return 1; }
		run_prefix=(taskset -c 0)
		;;
	clock)
		local cur avail cs
		cur=$(cat "$cs_file" 2>/dev/null) || { why="no $cs_file"; return 1; }
		avail=$(xargs < "${cs_file%/*}/available_clocksource")
		other=
		for cs in tsc kvm-clock; do
			if [ "$cs" != "$cur" ] && [[ " $avail " == *" $cs "* ]]; then
				other=$cs
			fi
		done
		if [ -z "$other" ]; then
			why="the kernel offers only '$avail' (now $cur): no other of tsc and kvm-clock"
			return 1
		fi
		echo "$other" > "$cs_file" && [ "$(cat "$cs_file")" = "$other" ] ||
			{ why="the kernel did not switch to $other"; return 1; }
		cs_restore=$cur
		echo "clocksource $cur -> $other" >&2
		;;
	foreign)
		command -v node >/dev/null || { why="no node on PATH"; return 1; }
		# Objects, strings and calls: JIT-compiled code in a 100 MB binary.
		node -e 'let n = 0; for (;;) { const o = { n, s: String(n) };
			n = (n + JSON.stringify(o).length) % 1000003; }' &
		spinners+=($!)
		;;
	esac
	return 0
}

for c in "${conditions[@]}"; do
	log=$logs/$c.log
	if ! setup "$c"; then
		summary+=("condition $c: skipped: $why")
		teardown
		continue
	fi
	echo "=== conditions.sh: $c ==="
	start=$(date +%s)
	# -V: every test's own figures (samples, references, tolerances) are kept.
	args=(ctest --test-dir "$build" -L integration -V)
	[ -n "$regex" ] && args+=(-R "$regex")
	"${run_prefix[@]}" "${args[@]}" > "$log" 2>&1
	rc=$?
	took=$(($(date +%s) - start))
	teardown
	line=$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1)
	total=$(sed -nE 's/.* out of ([0-9]+).*/\1/p' <<<"$line")
	nfail=$(sed -nE 's/.* ([0-9]+) tests failed.*/\1/p' <<<"$line")
	nskip=$(sed -n '/^The following tests did not run:/,/^$/p' "$log" | grep -c '(Skipped)')
	if [ -z "$total" ]; then
		summary+=("condition $c: FAILED: ctest printed no summary (exit $rc, $took s); see $log")
		failed=1
		continue
	fi
	fails=$(sed -n '/^The following tests FAILED:/,/^$/p' "$log" |
		sed -nE 's/.* - ([^ ]+) .*/\1/p' | tr '\n' ' ')
	state=passed
	if [ "$rc" != 0 ] || [ "$nfail" != 0 ]; then
		state=FAILED
		failed=1
	fi
	summary+=("condition $c: $state: $((total - nfail - nskip)) passed, $nfail failed, $nskip skipped in $took s${fails:+ (failed: ${fails% })}")
done

echo
echo "=== conditions.sh: summary (logs in $logs) ==="
printf '%s\n' "${summary[@]}"
exit "$failed"
