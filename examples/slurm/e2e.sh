#!/usr/bin/env bash
# End-to-end test of the Slurm recipes on a real one-node Slurm cluster
# brought up on this machine (as root) from the distribution's packages:
#
#   1. scarsim-array.sbatch (--array=0-3, SHARDS=4) + merge-shards.sbatch
#      (--dependency=afterok) give summary.csv and trials.csv byte-identical
#      to one unsharded `scarsim run`;
#   2. an array task cancelled (scancel) while it runs, then re-submitted,
#      resumes from its journal (--resume) and the merge is still
#      byte-identical;
#   3. reproduce-array.sbatch + reproduce-gather.sbatch (the whole
#      reproduction, --quick) give every scenario's CSV files byte-identical
#      to one unsharded `scarsim reproduce`, and a REPORT.md equal to its
#      apart from wall and CPU times.
#
#   examples/slurm/e2e.sh [path/to/scarsim]     (or SCARSIM=path/to/scarsim)
#
# Installs munge, slurmctld, slurmd and slurm-client with apt-get when they
# are missing. Everything else (munge key and socket, slurm.conf, state,
# spool, logs, results) lives in one temporary folder; the daemons started
# here are stopped and the folder removed on exit. Every wait is bounded: a
# daemon or job that does not get there in time fails the run with its log.
set -euo pipefail

SCARSIM=${1:-${SCARSIM:-target/debug/scarsim}}
HERE=$(cd "$(dirname "$0")" && pwd)
started=$SECONDS

say() { printf 'e2e: %s\n' "$*" >&2; }
die() {
    say "FAILED: $*"
    exit 1
}

[ -x "$SCARSIM" ] || die "no scarsim binary at $SCARSIM (build it: cargo build --locked)"
SCARSIM=$(cd "$(dirname "$SCARSIM")" && pwd)/$(basename "$SCARSIM")
[ "$(id -u)" -eq 0 ] || die "needs root (it starts munged, slurmctld and slurmd)"

# --- packages --------------------------------------------------------------
need=()
for cmd in munged:munge slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client; do
    command -v "${cmd%%:*}" >/dev/null 2>&1 || need+=("${cmd#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
        { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; } ||
        die "apt-get install ${need[*]} failed"
fi
# The version (and proof that the binaries run).
SLURM_VERSION=$(slurmctld -V)
say "using $SLURM_VERSION, $("$SCARSIM" --version)"

# --- temporary cluster -----------------------------------------------------
T=$(mktemp -d /tmp/scarsim-slurm-e2e.XXXXXX)
chmod 755 "$T"
pids=()
cleanup() {
    local rc=$?
    set +e
    # Jobs first (slurmd kills their steps), then the daemons, newest first.
    if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
        timeout 10 scancel --quiet --user=root >/dev/null 2>&1
    fi
    for ((k = ${#pids[@]} - 1; k >= 0; k--)); do
        kill "${pids[k]}" 2>/dev/null
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    if [ "$rc" -ne 0 ] && [ -z "${KEEP:-}" ]; then
        say "logs of the failed run:"
        for f in "$T"/log/*; do
            [ -f "$f" ] || continue
            say "--- $(basename "$f") (last 15 lines)"
            tail -n 15 "$f" >&2
        done
    fi
    if [ -n "${KEEP:-}" ]; then
        say "kept $T"
    else
        rm -rf "$T"
    fi
    say "total $((SECONDS - started)) s, exit $rc"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$T"/{log,state,spool,munge,work}

# Waits up to $1 seconds for command $2... to succeed.
wait_for() {
    local limit=$1
    shift
    local end=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || return 1
        sleep 0.2
    done
}
alive() { kill -0 "$1" 2>/dev/null; }
daemon_failed() { # name, log
    say "$1 did not come up; last lines of $2:"
    tail -n 20 "$2" >&2 || true
    exit 1
}

# munge: its own key, socket and files in $T (the machine's munged, if any,
# is left alone).
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
chmod 700 "$T/munge"
MUNGE_SOCKET=$T/munge/munge.socket
munged --foreground --force --socket="$MUNGE_SOCKET" --key-file="$T/munge/munge.key" \
    --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/munged.seed" \
    --log-file="$T/log/munged.log" >>"$T/log/munged.log" 2>&1 &
pids+=($!)
munge_ok() { munge --socket="$MUNGE_SOCKET" -n </dev/null | unmunge --socket="$MUNGE_SOCKET"; }
wait_for 15 munge_ok || daemon_failed munged "$T/log/munged.log"
alive "${pids[-1]}" || daemon_failed munged "$T/log/munged.log"
say "munged up"

# slurm.conf for this host, with its real CPUs and memory (slurmd -C).
HOST=$(hostname -s)
NODE_LINE=$(slurmd -C | head -n 1)
CPUS=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
MEM=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
[ -n "$CPUS" ] && [ -n "$MEM" ] || die "cannot read CPUs and RealMemory from slurmd -C: $NODE_LINE"
# Free ports for slurmctld and slurmd.
free_port() {
    local p
    for p in $(seq "$1" $(($1 + 200))); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    return 1
}
CTLD_PORT=$(free_port $((20000 + RANDOM % 20000))) || die "no free port"
SLURMD_PORT=$(free_port $((CTLD_PORT + 1))) || die "no free port"
export SLURM_CONF=$T/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=scarsim-e2e
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
KillWait=5
MinJobAge=600
InactiveLimit=0
SlurmdTimeout=60
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=e2e Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
say "slurm.conf: node $HOST, $CPUS CPUs, $MEM MB, ports $CTLD_PORT/$SLURMD_PORT"

slurmctld -D -i -f "$SLURM_CONF" >>"$T/log/slurmctld.out" 2>&1 &
pids+=($!)
ctld_pid=${pids[-1]}
ctld_ok() { alive "$ctld_pid" && scontrol ping | grep -q 'is UP'; }
wait_for 30 ctld_ok || daemon_failed slurmctld "$T/log/slurmctld.log"
say "slurmctld up"
slurmd -D -f "$SLURM_CONF" -N "$HOST" >>"$T/log/slurmd.out" 2>&1 &
pids+=($!)
slurmd_pid=${pids[-1]}
node_idle() {
    alive "$slurmd_pid" && sinfo -h -n "$HOST" -o '%t' | grep -Eq '^(idle|mix|alloc)'
}
wait_for 45 node_idle || daemon_failed slurmd "$T/log/slurmd.log"
say "slurmd up: node $HOST is $(sinfo -h -n "$HOST" -o '%t')"

# --- job helpers -------------------------------------------------------------
# Every job fits the 2-core test node: the sbatch files' own requests are
# overridden on the command line.
FIT=(--cpus-per-task=1 --mem=1G --time=00:15:00)
submit() { # sbatch args... -> job id
    local out id
    out=$(sbatch --parsable "${FIT[@]}" "$@") || die "sbatch $* failed"
    id=${out%%;*}
    [[ $id =~ ^[0-9]+$ ]] || die "sbatch $* printed $out"
    echo "$id"
}
# States of a job's tasks (one line each), from scontrol (no accounting needed).
states() { scontrol -o show job "$1" 2>/dev/null | sed -n 's/.* JobState=\([A-Z_]*\) .*/\1/p'; }
# Waits up to $2 s for every task of job $1 to end; fails unless all COMPLETED.
wait_job() {
    local id=$1 limit=$2 end=$((SECONDS + $2)) s
    while :; do
        s=$(states "$id")
        [ -n "$s" ] || die "job $id is unknown to slurmctld"
        if ! grep -Eqv '^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)$' <<<"$s"; then
            break
        fi
        [ $SECONDS -lt $end ] || {
            scontrol show job "$id" >&2
            die "job $id not finished after ${limit} s: $(sort <<<"$s" | uniq -c | xargs)"
        }
        sleep 1
    done
    if grep -qv '^COMPLETED$' <<<"$s"; then
        scontrol show job "$id" >&2
        cat "$T"/log/job-"$id"* >&2 2>/dev/null || true
        die "job $id: $(sort <<<"$s" | uniq -c | xargs)"
    fi
}
same_files() { # dir a, dir b, files...
    local a=$1 b=$2 f
    shift 2
    for f in "$@"; do
        cmp "$a/$f" "$b/$f" || die "$a/$f and $b/$f differ"
    done
}

W=$T/work
cd "$W"
export SCARSIM DATA_DIR=$W/no-data
# A recovery scenario on its stand-in, small: a few seconds per shard in a
# debug build.
export SCENARIO=scar-priority-mlr-covtype SCENARIO_NAME=scar-priority-mlr-covtype SHARDS=4

# --- 1. array + merge == one run --------------------------------------------
step=$SECONDS
export EXTRA="--synthetic --scale 0.05 --trials 3" OUT=$W/shards1 FINAL=$W/merged1
# shellcheck disable=SC2086
"$SCARSIM" run "$SCENARIO" --out "$W/whole1" --data-dir "$DATA_DIR" --threads 2 --quiet --no-plot $EXTRA
arr=$(submit --array=0-3 --output="$T/log/job-%A_%a.out" "$HERE/scarsim-array.sbatch")
mrg=$(submit --dependency=afterok:"$arr" --output="$T/log/job-%j.out" "$HERE/merge-shards.sbatch")
say "1: array job $arr, merge job $mrg"
wait_job "$arr" 120
wait_job "$mrg" 60
same_files "$W/whole1/$SCENARIO_NAME" "$FINAL/$SCENARIO_NAME" summary.csv trials.csv
say "1: 4 shards on Slurm merged into summary.csv and trials.csv byte-identical to one run ($((SECONDS - step)) s)"

# --- 2. cancel a running task, resubmit it: it resumes ----------------------
step=$SECONDS
export EXTRA="--synthetic --scale 0.05 --trials 80" OUT=$W/shards2 FINAL=$W/merged2
arr=$(submit --array=0-3 --output="$T/log/job-%A_%a.out" "$HERE/scarsim-array.sbatch")
journal=$OUT/$SCENARIO_NAME.shard-1-of-4/units.jsonl
# Units done: journal lines after the header.
done_units() { [ -f "$journal" ] && echo $(($(wc -l <"$journal") - 1)) || echo 0; }
running_with_units() {
    [ "$(states "${arr}_1")" = RUNNING ] && [ "$(done_units)" -ge 1 ] &&
        [ ! -f "$OUT/$SCENARIO_NAME.shard-1-of-4/shard.json" ]
}
end=$((SECONDS + 120))
until running_with_units; do
    case $(states "${arr}_1") in
    PENDING | RUNNING | CONFIGURING) ;;
    *) die "task ${arr}_1 ended ($(states "${arr}_1"), $(done_units) units) before it could be cancelled mid-run" ;;
    esac
    [ $SECONDS -lt $end ] || die "task ${arr}_1 did not start a journal within 120 s"
    sleep 0.2
done
scancel "${arr}_1"
wait_for 30 bash -c "scontrol -o show job ${arr}_1 | grep -q JobState=CANCELLED" ||
    die "task ${arr}_1 was not cancelled"
before=$(done_units)
[ ! -f "$OUT/$SCENARIO_NAME.shard-1-of-4/shard.json" ] || die "task 1 finished before it was cancelled"
say "2: cancelled task ${arr}_1 while running with $before units in its journal"
wait_job_allow_cancel() { # the other tasks must complete
    local end=$((SECONDS + $2)) i s
    for i in 0 2 3; do
        # One read of the state per round: a task that completes between
        # two reads must not be taken for one that failed.
        while :; do
            s=$(states "${1}_$i")
            case $s in
            COMPLETED) break ;;
            PENDING | RUNNING | CONFIGURING | COMPLETING) ;;
            *) die "task ${1}_$i: $s" ;;
            esac
            [ $SECONDS -lt $end ] || die "task ${1}_$i not finished after $2 s"
            sleep 1
        done
    done
}
re=$(submit --array=1 --output="$T/log/job-%A_%a.out" "$HERE/scarsim-array.sbatch")
# The merge waits for the re-submitted task and for every task of the first
# array to end (afterany: its task 1 ended cancelled); `afterok` on the
# re-submitted task alone let it start before a slower task 3 had finished.
mrg=$(submit --dependency=afterok:"$re",afterany:"$arr" --output="$T/log/job-%j.out" "$HERE/merge-shards.sbatch")
say "2: re-submitted task 1 as job $re, merge job $mrg"
wait_job_allow_cancel "$arr" 180
wait_job "$re" 120
resumed=$(sed -n 's/.*resuming with \([0-9]*\) units already done.*/\1/p' "$T"/log/job-"${re}"_1.out)
[ -n "$resumed" ] && [ "$resumed" -ge 1 ] ||
    die "the re-submitted task did not resume from its journal: $(cat "$T"/log/job-"${re}"_1.out)"
wait_job "$mrg" 60
# shellcheck disable=SC2086
"$SCARSIM" run "$SCENARIO" --out "$W/whole2" --data-dir "$DATA_DIR" --threads 2 --quiet --no-plot $EXTRA
same_files "$W/whole2/$SCENARIO_NAME" "$FINAL/$SCENARIO_NAME" summary.csv trials.csv
say "2: the re-submitted task resumed with $resumed units from its journal; merge byte-identical to one run ($((SECONDS - step)) s)"

# --- 3. the whole reproduction, sharded ------------------------------------
# REPORT.md names the command (--data-dir, --out) and the threads: the
# gather job and the unsharded run use the same relative paths and one
# thread, each from its own folder.
step=$SECONDS
mkdir -p "$W/gather" "$W/unsharded"
export EXTRA="--quick --trials 2 --scale 0.02 --synthetic" OUT=$W/rshards FINAL=rep DATA_DIR=no-data
cd "$W/gather"
arr=$(submit --array=0-3 --output="$T/log/job-%A_%a.out" "$HERE/reproduce-array.sbatch")
gat=$(submit --dependency=afterok:"$arr" --output="$T/log/job-%j.out" "$HERE/reproduce-gather.sbatch")
say "3: reproduce array job $arr, gather job $gat"
# The same reproduction unsharded, meanwhile.
cd "$W/unsharded"
# shellcheck disable=SC2086
"$SCARSIM" reproduce --out rep --data-dir no-data --threads 1 --quiet $EXTRA >/dev/null
cd "$W"
wait_job "$arr" 300
wait_job "$gat" 120
A=$W/unsharded/rep B=$W/gather/rep
n=0
while IFS= read -r f; do
    cmp "$A/$f" "$B/$f" || die "reproduce: $f differs between the sharded and the unsharded run"
    n=$((n + 1))
done < <(cd "$A" && find . -name '*.csv' | sort)
[ "$n" -ge 10 ] || die "reproduce wrote only $n CSV files"
[ "$(cd "$A" && find . -name '*.csv' | sort)" = "$(cd "$B" && find . -name '*.csv' | sort)" ] ||
    die "the sharded reproduction wrote other CSV files than the unsharded one"
# REPORT.md: equal apart from wall and CPU times and the count of trials
# taken from other scenarios (execution details: a shard shares only among
# the units it runs; the CSV files are the same either way).
times() {
    sed -E -e 's/[0-9]+\.[0-9] s\b/T s/g' \
        -e 's/(T s \| T s \| )[0-9]+ \|/\1S |/' \
        -e 's/Units shared from other scenarios: [0-9]+/Units shared from other scenarios: S/' "$1"
}
diff <(times "$A/REPORT.md") <(times "$B/REPORT.md") >&2 ||
    die "REPORT.md of the sharded reproduction differs (beyond times)"
say "3: sharded reproduction of $(ls "$A" | grep -vc '\.') scenarios: $n CSV files byte-identical, REPORT.md equal apart from times and shared-trial counts ($((SECONDS - step)) s)"

say "PASSED: ${SLURM_VERSION}, one node, $CPUS CPUs, $((SECONDS - started)) s"
