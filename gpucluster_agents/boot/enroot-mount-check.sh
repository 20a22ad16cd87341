#!/bin/bash
# gpucluster: refuse a container mount (srun --container-mounts, enroot --mount) of a path the job's user cannot
# read (the munge key, slurmd's spool, another user's home) with a clear message, instead of a mount that shows an
# unreadable directory (docs/containers.md, Security). enroot runs its hooks as the user, in the user's namespace,
# before it makes the mounts: they are read from its start's arguments (pyxis's config file defines mounts()).
set -eu
mapfile -d '' a <"/proc/$ENROOT_PID/cmdline"
i=0
while [ "$i" -lt "${#a[@]}" ] && [ "${a[i]}" != 'runtime::_start "$@"' ]; do i=$((i + 1)); done
conf=${a[i + 4]:-} mounts=${a[i + 5]:-}
sources() {
  if [ -f "$conf" ]; then
    (
      set +eu
      # shellcheck disable=SC1090
      . "$conf" >/dev/null 2>&1
      if declare -F mounts >/dev/null; then mounts; fi
    ) | while read -r s _; do printf '%b\n' "$s"; done
  fi
  if [ -n "$mounts" ]; then
    while IFS= read -r m; do printf '%s\n' "${m%%:*}"; done <<<"$mounts"
  fi
}
while IFS= read -r s; do
  case $s in /*) ;; *) continue ;; esac
  if [ -d "$s" ]; then [ -r "$s" ] && [ -x "$s" ] && continue; elif [ -r "$s" ]; then continue; fi
  echo "gpucluster: container mount $s refused: ${USER:-you} cannot read it here; mount a path you can read" >&2
  exit 1
done < <(sources)
