#!/bin/sh
# gpucluster: no sudo for ssm-user or the default user, at every boot (bootcmd) and once after cloud-init's users.
set -e
r="${GPUCLUSTER_ROOT:-}"
d="$r/etc/sudoers.d"
mkdir -p "$d"
put() { printf '%s' "$2" >"$d/.$1.new"; chmod 0440 "$d/.$1.new"; chown 0:0 "$d/.$1.new"; mv -f "$d/.$1.new" "$d/$1"; }
put ssm-agent-users '#User rules for ssm-user
'
put 90-cloud-init-users ''
put zz-gpucluster-no-session-sudo '# gpucluster: no sudo for Session Manager'"'"'s ssm-user or the image'"'"'s default user (read last: the last match wins)
ssm-user ALL=(ALL:ALL) !ALL
ubuntu ALL=(ALL:ALL) !ALL
'
if grep -q '^ubuntu:' "$r/etc/passwd" 2>/dev/null; then
  usermod ${r:+--prefix "$r"} --lock --expiredate 1 ubuntu || echo "gpucluster: could not lock ubuntu" >&2
fi
