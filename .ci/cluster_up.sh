#!/usr/bin/env bash
# Start a two-node cluster on this one machine for the multi-node tests (tests/integration/multinode).
#
# Node K (1, 2) = a network namespace `nodeK` with a veth `eth0` 10.77.0.K/24 on the bridge `mnbr0`
# (the root namespace is 10.77.0.254; no route beyond), held by one process per node that owns the
# node's UTS namespace (hostname nodeK) and mount namespace (a private tmpfs /tmp, a resolv.conf
# that answers at once) and is pinned to CPU K-1 (taskset). Everything started "on" node K enters
# that process's namespaces (`node_exec`) under the same pin. The repository, the venv, ../shared,
# the runs directories and pytest's base temp dir are the same files on both nodes: they live
# outside /tmp, or are bound into each node's /tmp (/tmp/pytest-of-$USER, the sweep tests' folder
# /tmp/scalelab-sweep-tests-$UID, the repository when it sits under /tmp, and each path in
# $MULTINODE_SHARED_TMP, colon-separated).
#
# Beside the one-node Slurm of .ci/slurm_up.sh (left alone), a second Slurm: its own slurm.conf
# (reached through SLURM_CONF, printed as the last line), its own munged socket and key, ports
# 6917/6918 and state under $MULTINODE_STATE (default /var/tmp/scalelab-multinode). slurmctld runs
# in the root namespace; one slurmd per node inside the node. One sshd per node (keys made here,
# client settings in /etc/ssh/ssh_config.d) lets the hostfile executor's default launcher (pdsh
# over ssh) reach both nodes as on a cluster without Slurm.
#
# Idempotent: each piece is created only when missing, so a second run on a live cluster changes
# nothing. Needs root (the CI runs as root). Torn down by .ci/cluster_down.sh. Recipe and measured
# figures: ../shared/GUIDE.md §2 "Two nodes on one machine".
set -euo pipefail
STATE=${MULTINODE_STATE:-/var/tmp/scalelab-multinode}
NODES=(node1 node2)
BRIDGE=mnbr0
NET=10.77.0
CTL_ADDR=$NET.254
CONF=$STATE/slurm.conf
MUNGE_SOCKET=$STATE/munge/munge.socket
CTL_HOST=$(hostname -s)
HOSTS_TAG="# scalelab-multinode"
SSH_CLIENT_CONF=/etc/ssh/ssh_config.d/scalelab-multinode.conf
log() { echo "cluster_up: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, mounts, daemons); CI runs as root"
# --all: plain nproc honours OMP_NUM_THREADS, which a test process that ran a trainer has set to 1
[ "$(nproc --all)" -ge 2 ] || die "needs 2 CPUs (one per node), found $(nproc --all)"

# Everything below runs under a keeper: a subreaper that outlives this script, runs this script's
# body (MN_INNER=1) when started and again on each SIGUSR1, and reaps the daemons when they stop
# (where PID 1 does not reap orphans they would linger as <defunct> slurmd/munged). A second
# bring-up (a test restarting a killed slurmd) asks the live keeper, so its daemons are reaped too.
alive() {  # pidfile: its process runs (a zombie, killed but not reaped yet, does not count)
  local st
  [ -f "$1" ] && st=$(awk '{print $3}' "/proc/$(cat "$1")/stat" 2>/dev/null) && [ -n "$st" ] && [ "$st" != Z ]
}
if [ -z "${MN_INNER:-}" ]; then
  mkdir -p "$STATE/run" "$STATE/log"
  rm -f "$STATE/run/up.status"
  if alive "$STATE/run/keeper.pid"; then
    keeper=$(cat "$STATE/run/keeper.pid")
    kill -USR1 "$keeper"
  else
    MN_INNER=1 setsid python3 -c '
import ctypes, os, signal, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
def reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
def stop(*_):
    reap()
    sys.exit(0)
asked = [1]
signal.signal(signal.SIGUSR1, lambda *_: asked.append(1))
signal.signal(signal.SIGTERM, stop)
while True:
    if asked:
        asked.clear()
        with open(sys.argv[2], "w") as log:
            rc = subprocess.call(sys.argv[3:], stdout=log, stderr=subprocess.STDOUT)
        open(sys.argv[1] + ".tmp", "w").write(str(rc))
        os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    reap()
    time.sleep(0.2)
' "$STATE/run/up.status" "$STATE/log/up.log" bash "$0" "$@" </dev/null >/dev/null 2>&1 &
    keeper=$!
    echo "$keeper" >"$STATE/run/keeper.pid"
  fi
  while [ ! -s "$STATE/run/up.status" ] && kill -0 "$keeper" 2>/dev/null; do sleep 0.2; done
  rc=$(cat "$STATE/run/up.status" 2>/dev/null || echo 1)
  grep -v '^SLURM_CONF=' "$STATE/log/up.log" >&2
  if [ "$rc" != 0 ]; then
    echo "cluster_up: failed (exit $rc); .ci/cluster_down.sh removes what was started" >&2
    exit "$rc"
  fi
  grep '^SLURM_CONF=' "$STATE/log/up.log" | tail -n1
  exit 0
fi

need_pkgs=()
for pair in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge sshd:openssh-server \
  ssh:openssh-client pdsh:pdsh ip:iproute2 nsenter:util-linux taskset:util-linux; do
  command -v "${pair%%:*}" >/dev/null || [ -x "/usr/sbin/${pair%%:*}" ] || need_pkgs+=("${pair#*:}")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing ${need_pkgs[*]}"
  apt-get update -qq
  # policy-rc.d-style guard: Debian's postinst would start a system sshd/slurmd we do not want
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq -o DPkg::Lock::Timeout=300 \
    --no-install-recommends $(printf '%s\n' "${need_pkgs[@]}" | sort -u) >/dev/null
fi

mkdir -p "$STATE"/{ctld,log,run,munge,ssh} /run/sshd
for n in "${NODES[@]}"; do mkdir -p "$STATE/$n"; done

# ---- network: bridge in the root namespace, one netns + veth per node
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link add "$BRIDGE" type bridge
fi
[[ "$(ip addr show dev "$BRIDGE")" == *" $CTL_ADDR/24 "* ]] || ip addr add "$CTL_ADDR/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
k=0
for n in "${NODES[@]}"; do
  k=$((k + 1))
  [ -e "/run/netns/$n" ] || ip netns add "$n"
  if ! ip -n "$n" link show eth0 >/dev/null 2>&1; then
    ip link del "mn-$n" >/dev/null 2>&1 || true
    ip link add "mn-$n" type veth peer name eth0 netns "$n"
    ip link set "mn-$n" master "$BRIDGE" up
  fi
  [[ "$(ip -n "$n" addr show dev eth0)" == *" $NET.$k/24 "* ]] || ip -n "$n" addr add "$NET.$k/24" dev eth0
  ip -n "$n" link set eth0 up
  ip -n "$n" link set lo up
  # names: the nodes' addresses (gloo binds to its hostname's address) and the controller's
  grep -q "^$NET.$k $n " /etc/hosts || echo "$NET.$k $n $HOSTS_TAG" >>/etc/hosts
done

# ---- one holder process per node: UTS + mount namespaces, pinned to one CPU
shared_tmp=("/tmp/pytest-of-$(id -un)" "/tmp/scalelab-sweep-tests-$(id -u)")  # pytest basetemp; the sweep tests' SHARED
repo=$(cd "$(dirname "$0")/.." && pwd -P)
case "$repo" in /tmp/*) shared_tmp+=("$repo") ;; esac
IFS=: read -r -a extra <<<"${MULTINODE_SHARED_TMP:-}"
for p in "${extra[@]}"; do [ -n "$p" ] && shared_tmp+=("$p"); done
for p in "${shared_tmp[@]}"; do
  case "$p" in /tmp/*) ;; *) die "MULTINODE_SHARED_TMP: $p is not under /tmp (paths outside /tmp are shared already)" ;; esac
  [ -d "$p" ] || mkdir -m 700 -p "$p"
done
holder_alive() { [ -f "$STATE/$1/holder.pid" ] && kill -0 "$(cat "$STATE/$1/holder.pid")" 2>/dev/null; }
k=0
for n in "${NODES[@]}"; do
  k=$((k + 1))
  holder_alive "$n" && continue
  echo "nameserver 127.0.0.1" >"$STATE/$n/resolv.conf"
  binds=""
  for p in "${shared_tmp[@]}"; do
    rel=${p#/tmp/}
    binds+="mkdir -p '/tmp/$rel' && mount --no-canonicalize --rbind './$rel' '/tmp/$rel' && "
  done
  # cd /tmp first: after the tmpfs is mounted, ./X still names the machine's /tmp/X
  setup="hostname $n && mount --bind '$STATE/$n/resolv.conf' /etc/resolv.conf && \
cd /tmp && mount -t tmpfs -o mode=1777 node-tmp /tmp && $binds cd / && echo ready >'$STATE/$n/holder.ready' && \
exec sleep infinity"
  rm -f "$STATE/$n/holder.ready"
  setsid taskset -c $((k - 1)) nsenter --net="/run/netns/$n" unshare --uts --mount --propagation private \
    sh -c "$setup" </dev/null >"$STATE/log/holder-$n.log" 2>&1 &
  echo $! >"$STATE/$n/holder.pid"
  for _ in $(seq 1 50); do [ -f "$STATE/$n/holder.ready" ] && break; sleep 0.1; done
  [ -f "$STATE/$n/holder.ready" ] || die "node $n did not come up: $(cat "$STATE/log/holder-$n.log")"
done
node_exec() {  # node_exec nodeK CMD...: run CMD on node K (its namespaces, its CPU)
  local n=$1 k=${1#node}
  shift
  taskset -c $((k - 1)) nsenter -t "$(cat "$STATE/$n/holder.pid")" -n -u -m -- "$@"
}

# ---- munge: own key and socket, in the root namespace (the socket is a shared path)
[ -s "$STATE/munge/munge.key" ] || dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
chown -R munge:munge "$STATE/munge"
chmod 711 "$STATE/munge"  # clients (root here) reach the socket; the key stays 400
chmod 400 "$STATE/munge/munge.key"
if ! alive "$STATE/munge/munged.pid"; then
  runuser -u munge -- /usr/sbin/munged --socket="$MUNGE_SOCKET" --key-file="$STATE/munge/munge.key" \
    --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/munge/munged.log" --seed-file="$STATE/munge/munged.seed"
fi

# ---- slurm.conf (rewritten only when it changed)
text=$(
  cat <<EOF
# written by .ci/cluster_up.sh: the two-node test cluster (nodes are namespaces on one machine)
ClusterName=scalelab-mn
SlurmctldHost=$CTL_HOST($CTL_ADDR)
SlurmctldPort=6917
SlurmdPort=6918
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/%n/spool
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/%n/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
ReturnToService=2
SlurmdTimeout=30
SchedulerType=sched/backfill
SchedulerParameters=defer_batch
MpiDefault=none
JobCompType=jobcomp/none
KillWait=30
MinJobAge=300
InactiveLimit=0
NodeName=node1 NodeAddr=$NET.1 CPUs=1 RealMemory=8000 State=UNKNOWN
NodeName=node2 NodeAddr=$NET.2 CPUs=1 RealMemory=8000 State=UNKNOWN
PartitionName=mn Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
)
[ -f "$CONF" ] && [ "$(cat "$CONF")" = "$text" ] || echo "$text" >"$CONF"
export SLURM_CONF=$CONF

# ---- slurmctld (root namespace) and one slurmd per node
alive "$STATE/run/slurmctld.pid" || slurmctld -f "$CONF"
for n in "${NODES[@]}"; do
  mkdir -p "$STATE/$n/spool"
  alive "$STATE/$n/slurmd.pid" || node_exec "$n" env SLURM_CONF="$CONF" slurmd -f "$CONF"
done

# ---- sshd per node + client settings, for pdsh (the hostfile executor's default launcher)
[ -s "$STATE/ssh/host_ed25519" ] || ssh-keygen -q -t ed25519 -N "" -f "$STATE/ssh/host_ed25519"
[ -s "$STATE/ssh/id_ed25519" ] || ssh-keygen -q -t ed25519 -N "" -C scalelab-multinode -f "$STATE/ssh/id_ed25519"
cp "$STATE/ssh/id_ed25519.pub" "$STATE/ssh/authorized_keys"
chmod 700 "$STATE/ssh"
k=0
for n in "${NODES[@]}"; do
  k=$((k + 1))
  cat >"$STATE/$n/sshd_config" <<EOF
ListenAddress $NET.$k
Port 22
HostKey $STATE/ssh/host_ed25519
PidFile $STATE/$n/sshd.pid
AuthorizedKeysFile $STATE/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
AcceptEnv none
EOF
  alive "$STATE/$n/sshd.pid" || node_exec "$n" /usr/sbin/sshd -f "$STATE/$n/sshd_config" -E "$STATE/log/sshd-$n.log"
done
mkdir -p "$(dirname "$SSH_CLIENT_CONF")"
cat >"$SSH_CLIENT_CONF" <<EOF
# written by .ci/cluster_up.sh (removed by cluster_down.sh): the two test nodes
Host ${NODES[*]}
  User root
  IdentityFile $STATE/ssh/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
EOF

# ---- wait until both nodes are idle and reachable
ok=""
for _ in $(seq 1 60); do
  states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u || true)
  idle=$(echo "$states" | grep -cE ' (idle|mix|alloc)$' || true)
  if [ "$idle" -eq ${#NODES[@]} ]; then ok=1; break; fi
  for down in $(echo "$states" | awk '$2 ~ /^(down|drain)/ {print $1}'); do
    scontrol update NodeName="$down" State=RESUME >/dev/null 2>&1 || true
  done
  sleep 1
done
[ -n "$ok" ] || { sinfo >&2 || true; die "nodes did not become idle (see $STATE/log)"; }
for n in "${NODES[@]}"; do
  got=$(ssh -o BatchMode=yes -o ConnectTimeout=5 "$n" hostname 2>&1) || die "ssh $n failed: $got"
  [ "$got" = "$n" ] || die "ssh $n answered as '$got'"
done
log "nodes ${NODES[*]} idle (sinfo), ssh ok; state in $STATE"
echo "SLURM_CONF=$CONF"
