#!/bin/bash
# HAND-WRITTEN stand-in for the rendered /usr/local/sbin/gpucluster-users (i21-render's templates/slurm/users.sh.j2)
# until that lands: the slurm-p5 stack's declared people. Render's contract: GPUCLUSTER_ROOT=<root> makes every
# groupadd/useradd/usermod work on <root>/etc (useradd --prefix); idempotent.
set -euo pipefail
root=${GPUCLUSTER_ROOT:-}
prefix=()
if [ -n "$root" ]; then prefix=(--prefix "$root"); fi
has() { grep -q "^$2:" "$root/etc/$1"; }
group() { has group "$1" || groupadd "${prefix[@]}" -g "$2" "$1"; }
user() { # name uid gid groups shell
  has passwd "$1" || useradd "${prefix[@]}" -u "$2" -g "$3" -G "$4" -M -d "/home/$1" -s "$5" "$1" 2>/dev/null
}
group hpc-admins 5000
group vision 5001
group llm 5002
group alice 10001
group bob 10002
group carol 10003
user alice 10001 10001 hpc-admins,vision /bin/bash
user bob 10002 10002 llm /bin/bash
user carol 10003 10003 llm /bin/bash
