#!/usr/bin/env bash
# Tear down the two-node cluster of .ci/cluster_up.sh: stops its daemons and whatever still runs in
# the nodes (by pid: pid files and `ip netns pids`, never by name), then removes the namespaces,
# veths, bridge, /etc/hosts lines and ssh client settings. The nodes' mounts live in their holders'
# mount namespaces and go with them; /run/netns/nodeK goes with `ip netns del`. Safe to run when
# nothing (or only part) is up. The one-node Slurm of .ci/slurm_up.sh is not touched.
set -uo pipefail
STATE=${MULTINODE_STATE:-/var/tmp/scalelab-multinode}
NODES=(node1 node2)
BRIDGE=mnbr0
[ "$(id -u)" -eq 0 ] || { echo "cluster_down: needs root" >&2; exit 1; }

running() {  # pid: alive and not a zombie (PID 1 here may not reap orphans)
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}
pids=()
signal_all() {  # SIG PID...: signal, remember the live ones
  local sig=$1 p
  shift
  for p in "$@"; do
    [ -n "$p" ] && running "$p" && kill "-$sig" "$p" 2>/dev/null && pids+=("$p")
  done
}
from_files() { for f in "$@"; do [ -f "$f" ] && cat "$f"; done; }

# what runs on the nodes first (ranks, ssh sessions, job steps: SIGKILL), then the daemons (SIGTERM)
for n in "${NODES[@]}"; do
  [ -e "/run/netns/$n" ] || continue
  holder=$(from_files "$STATE/$n/holder.pid")
  mapfile -t inside < <(ip netns pids "$n" 2>/dev/null)
  for p in "${inside[@]}"; do
    case " $holder $(from_files "$STATE/$n/slurmd.pid" "$STATE/$n/sshd.pid") " in *" $p "*) ;; *) signal_all KILL "$p" ;; esac
  done
done
mapfile -t daemons < <(from_files "$STATE"/node*/slurmd.pid "$STATE"/node*/sshd.pid "$STATE/run/slurmctld.pid" \
  "$STATE/munge/munged.pid" "$STATE"/node*/holder.pid)
signal_all TERM "${daemons[@]}"
for _ in $(seq 1 100); do
  left=()
  for p in "${pids[@]}"; do running "$p" && left+=("$p"); done
  [ ${#left[@]} -eq 0 ] && break
  sleep 0.1
done
for p in "${left[@]}"; do kill -9 "$p" 2>/dev/null; done
# the keeper (cluster_up.sh) reaps them (every 0.2 s): wait until it has, then stop it
for _ in $(seq 1 30); do
  unreaped=""
  for p in "${pids[@]}"; do [ -e "/proc/$p" ] && unreaped=1; done
  [ -z "$unreaped" ] && break
  sleep 0.1
done
keeper=$(from_files "$STATE/run/keeper.pid")
if [ -n "$keeper" ] && running "$keeper"; then
  kill "$keeper" 2>/dev/null
  for _ in $(seq 1 50); do running "$keeper" || break; sleep 0.1; done
fi
rm -f "$STATE/run/keeper.pid" "$STATE/run/up.status"
rm -f "$STATE"/node*/{slurmd,sshd,holder}.pid "$STATE"/node*/holder.ready "$STATE/run/slurmctld.pid" "$STATE/munge/munged.pid"

for n in "${NODES[@]}"; do
  [ -e "/run/netns/$n" ] && ip netns del "$n"
  ip link del "mn-$n" >/dev/null 2>&1
done
ip link del "$BRIDGE" >/dev/null 2>&1
# `ip netns add` bind-mounts /run/netns onto itself the first time: undo it when no namespace is left
if mountpoint -q /run/netns && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then umount /run/netns 2>/dev/null; fi
sed -i '/# scalelab-multinode$/d' /etc/hosts
rm -f /etc/ssh/ssh_config.d/scalelab-multinode.conf
# Slurm's job state goes too: the next bring-up starts from an empty queue (job ids restart at 1)
rm -rf "$STATE/ctld" "$STATE"/node*/spool
echo "cluster_down: stopped"
