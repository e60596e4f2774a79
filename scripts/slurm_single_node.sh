#!/usr/bin/env bash
# Sets up a single-node Slurm (Debian's slurm-wlm) on this machine, as root, to try
# scripts/slurm_sweep.sh: munge, one controller and one compute node (this host, all its CPUs),
# one partition. Not for production clusters; there the site's Slurm is used as it is.
set -euo pipefail
host=$(hostname -s)
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
[ -s /etc/munge/munge.key ] || mungekey --create
chown -R munge: /etc/munge /run/munge 2>/dev/null || true
pgrep -x munged >/dev/null || runuser -u munge -- munged
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=meshsim
SlurmctldHost=$host
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 30); do
  sinfo -h -o %T 2>/dev/null | grep -q idle && { sinfo; exit 0; }
  sleep 1
done
echo "slurm did not come up: see /var/log/slurm" >&2
exit 1
