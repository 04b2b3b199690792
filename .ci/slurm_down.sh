#!/usr/bin/env bash
# Stop the one-node cluster started by .ci/slurm_up.sh (by pid files; never by name).
set -uo pipefail
STATE=${SLURM_STATE:-/var/tmp/scalelab-slurm}
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
stop() {  # pidfile
  [ -f "$1" ] || return 0
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    $SUDO kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  $SUDO rm -f "$1"
}
stop "$STATE/run/slurmd.pid"
stop "$STATE/run/slurmctld.pid"
stop /run/munge/munged.pid
echo "slurm_down: stopped"
