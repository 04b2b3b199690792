#!/usr/bin/env bash
# Start a one-node Slurm cluster on localhost for the sweep tests (recipe: GUIDE.md §2).
# Idempotent: installs Debian's slurmctld/slurmd/slurm-client/munge only when missing, writes
# slurm.conf, starts munged/slurmctld/slurmd unless already up, waits until `sinfo` shows the
# node idle. Needs root. State lives under $SLURM_STATE (default /var/tmp/scalelab-slurm).
set -euo pipefail
STATE=${SLURM_STATE:-/var/tmp/scalelab-slurm}
HOST=$(hostname -s)
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  echo "slurm_up: installing slurmctld slurmd slurm-client munge"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi

$SUDO mkdir -p "$STATE"/{ctld,d,log,run} /etc/slurm /run/munge /var/log/munge /var/lib/munge /etc/munge
if [ ! -s /etc/munge/munge.key ]; then
  $SUDO dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
$SUDO chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
$SUDO chmod 400 /etc/munge/munge.key
$SUDO chmod 755 /run/munge

CONF=$(cat <<CONF
# written by .ci/slurm_up.sh
ClusterName=scalelab
SlurmctldHost=$HOST
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=defer_batch
MpiDefault=none
JobCompType=jobcomp/none
KillWait=30
MinJobAge=300
InactiveLimit=0
NodeName=$HOST CPUs=$(nproc) RealMemory=20000 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
)
if [ ! -f /etc/slurm/slurm.conf ] || [ "$(cat /etc/slurm/slurm.conf)" != "$CONF" ]; then
  echo "$CONF" | $SUDO tee /etc/slurm/slurm.conf >/dev/null
fi

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! alive /run/munge/munged.pid; then
  if [ "$(id -u)" -eq 0 ]; then as_munge="runuser -u munge --"; else as_munge="sudo -u munge"; fi
  $as_munge /usr/sbin/munged --pid-file=/run/munge/munged.pid 2>/dev/null \
    || $SUDO /usr/sbin/munged --force --pid-file=/run/munge/munged.pid
fi
alive "$STATE/run/slurmctld.pid" || $SUDO slurmctld
alive "$STATE/run/slurmd.pid" || $SUDO slurmd

for _ in $(seq 1 60); do
  state=$(sinfo -h -N -o '%t' 2>/dev/null | head -n1 || true)
  case "$state" in
    idle|mix|alloc) echo "slurm_up: node $HOST $state"; exit 0 ;;
    down*|drain*) $SUDO scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 1
done
echo "slurm_up: node did not become idle (see $STATE/log)" >&2
sinfo >&2 || true
exit 1
