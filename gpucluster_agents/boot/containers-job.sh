#!/bin/bash
# gpucluster: the container prolog and epilog (docs/containers.md). slurmd runs it as root, through the node's
# prolog.d/20-containers (slurm.conf's Prolog glob and Epilog), as: containers-job.sh ROOT CACHE_BUDGET_MIB.
# SLURM_SCRIPT_CONTEXT says which (prolog_slurmd, epilog_slurmd: Slurm 22.05 and later).
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
cd / || exit 1
root=${1:?} budget_mib=${2:?} uid=${SLURM_JOB_UID:?} job=${SLURM_JOB_ID:?}
gid=${SLURM_JOB_GID:-$(id -g "$uid")}
case $uid$job$budget_mib in *[!0-9]*) exit 1 ;; esac
if [ "${SLURM_SCRIPT_CONTEXT:-}" = prolog_slurmd ]; then
  # root-owned parents: nobody makes another user's user-<uid>; then the job's user's own, 0700
  install -d -m 0755 -o root -g root "$root" "$root/pyxis"
  for d in runtime data cache tmp; do
    install -d -m 0755 -o root -g root "$root/$d"
    m=$root/$d/user-$uid
    if [ -L "$m" ] || { [ -e "$m" ] && [ "$(stat -c %u "$m")" != "$uid" ]; }; then rm -rf -- "$m"; fi
    install -d -m 0700 -o "$uid" -g "$gid" "$m" || exit 1
  done
  exit 0
fi
# the job's containers (pyxis_<job>_<name>, pyxis_<job>.<step>), removed as their owner
data=$root/data/user-$uid
if [ -d "$data" ] && [ ! -L "$data" ]; then
  setpriv --reuid="$uid" --regid="$gid" --clear-groups -- find "$data" -mindepth 1 -maxdepth 1 \
    \( -name "pyxis_${job}_*" -o -name "pyxis_${job}.*" \) -exec rm -rf -- {} + 2>/dev/null
fi
# the user's dirs once no other job of theirs is here (squeue failing: kept)
if ids=$(squeue -h -w "${SLURMD_NODENAME:-$(hostname -s)}" -u "$uid" -o %A 2>/dev/null) &&
  ! printf '%s\n' "$ids" | grep -qvx -e "$job" -e ''; then
  for d in runtime tmp data; do rm -rf -- "$root/$d/user-$uid"; done
fi
# the layer caches under the budget: least recently used layers first
budget=$((budget_mib * 1048576))
total=$(du -sb "$root/cache" 2>/dev/null | cut -f1)
if [ "${total:-0}" -gt "$budget" ]; then
  find "$root/cache" -mindepth 2 -maxdepth 2 -type f -printf '%A@ %s %p\n' | sort -n |
    while read -r _ size path; do
      [ "$total" -le "$budget" ] && break
      rm -f -- "$path" && total=$((total - size))
    done
fi
exit 0
