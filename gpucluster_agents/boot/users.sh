#!/bin/bash
# gpucluster-users [--homes]: the declared groups and users of /etc/gpucluster/users.json as local accounts
# (gpucluster/render/slurm/identity.py says how). Shipped in the node package, run by gpucluster-users.service;
# idempotent. GPUCLUSTER_ROOT: another root; GPUCLUSTER_AGENT_LIB, GPUCLUSTER_PYTHON: the package and python (tests).
# The paths and the comment are gpucluster.render.slurm.identity's constants (tests/render/slurm/test_identity_render.py).
set -euo pipefail
root="${GPUCLUSTER_ROOT:-}"
prefix=()
[ -z "$root" ] || prefix=(--prefix "$root")
homes=0
[ "${1:-}" != --homes ] || homes=1
failed=0
file="$root/etc/gpucluster/users.json"
stamp="$root/run/gpucluster/users.sha256"
lib="${GPUCLUSTER_AGENT_LIB:-/opt/gpucluster/lib}"
log() { echo "gpucluster-users: $*" >&2; [ -n "$root" ] || logger -t gpucluster-users -- "$*" 2>/dev/null || true; }
refuse() { log "refused: $*"; failed=1; }  # goes on, exits non-zero: never re-numbers files
field() { awk -F: -v k="$2" -v n="$3" '$1 == k { print $n; exit }' "$root/etc/$1"; }
holder() { awk -F: -v id="$2" '$3 == id { print $1; exit }' "$root/etc/$1"; }

group() {
  local name=$1 gid=$2 have other
  have=$(field group "$name" 3)
  if [ -z "$have" ]; then
    other=$(holder group "$gid")
    if [ -n "$other" ]; then refuse "gid $gid is group $other's on this node, declared for $name"; return; fi
    groupadd "${prefix[@]}" -g "$gid" "$name"
    log "group $name ($gid) made"
  elif [ "$have" != "$gid" ]; then
    refuse "group $name has gid $have on this node, declared $gid"
  fi
}

user() {
  local name=$1 uid=$2 gid=$3 groups=$4 shell=$5 home=$6 have other
  ok=0
  have=$(field passwd "$name" 3)
  if [ -z "$have" ]; then
    other=$(holder passwd "$uid")
    if [ -n "$other" ]; then refuse "uid $uid is $other's on this node, declared for $name"; return; fi
    useradd "${prefix[@]}" -u "$uid" -g "$gid" -G "$groups" -M -d "$home" -s "$shell" -c "gpucluster-managed" "$name"
    log "user $name ($uid) made"
    ok=1
  elif [ "$have" != "$uid" ]; then
    refuse "user $name has uid $have on this node, declared $uid"
  else
    [ "$(field passwd "$name" 4)" = "$gid" ] || usermod "${prefix[@]}" -g "$gid" "$name"
    usermod "${prefix[@]}" -G "$groups" -d "$home" -s "$shell" -c "gpucluster-managed" -e '' "$name"
    ok=1
  fi
}

keys() {
  local name=$1 text=$2 dir="$root/etc/gpucluster/ssh/authorized_keys"
  install -d -m 0755 "$dir"
  printf '%s' "$text" >"$dir/.$name.new"
  chmod 0644 "$dir/.$name.new"
  chown 0:0 "$dir/.$name.new"
  mv -f "$dir/.$name.new" "$dir/$name"
}

home() {
  local name=$1 home=$2
  [ "$homes" = 1 ] || return 0
  [ -d "$root$home" ] || { install -d -m 0700 -o "$(field passwd "$name" 3)" -g "$(field passwd "$name" 4)" "$root$home"; log "home $home made"; }
}

# The file, parsed strictly (the users contract) before any account changes: a bad one changes nothing.
sum=$(sha256sum "$file" 2>/dev/null | cut -d' ' -f1) || sum=
if [ -n "$sum" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ]; then exit 0; fi  # applied since this boot
records=$("${GPUCLUSTER_PYTHON:-/usr/bin/python3}" -I -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); from gpucluster_agents.boot.users import main; sys.exit(main())' "$lib" records "$file") || {
  log "refused: $file is missing or not a valid users file: no account changed"
  exit 1
}

while IFS=: read -r kind name gid; do
  [ "$kind" = group ] || continue
  group "$name" "$gid"
done <<<"$records"
[ "$failed" = 0 ] || { log "a declared group clashes with this node's: no user is made"; exit 1; }

declared=" "
declare -A made=() authorized=()
while IFS= read -r line; do
  case "$line" in
  user:*)
    IFS=: read -r _ name uid gid groups shell home <<<"$line"
    declared+="$name "
    user "$name" "$uid" "$gid" "$groups" "$shell" "$home"
    if [ "$ok" = 1 ]; then made[$name]=1; authorized[$name]=; home "$name" "$home"; fi
    ;;
  key:*)
    rest=${line#key:}
    name=${rest%%:*}
    [ -z "${made[$name]:-}" ] || authorized[$name]+="${rest#*:}"$'\n'
    ;;
  esac
done <<<"$records"
for name in "${!made[@]}"; do keys "$name" "${authorized[$name]}"; done

# No longer declared: locked and expired, keys removed.
awk -F: -v c="gpucluster-managed" '$5 == c { print $1 }' "$root/etc/passwd" | while read -r name; do
  case "$declared" in *" $name "*) continue ;; esac
  if [ "$(awk -F: -v k="$name" '$1 == k { print $8 }' "$root/etc/shadow")" != 1 ]; then
    usermod "${prefix[@]}" --lock --expiredate 1 "$name"
    log "user $name is no longer declared: locked"
  fi
  rm -f "$root/etc/gpucluster/ssh/authorized_keys/$name"
done
if [ "$failed" = 0 ]; then mkdir -p "${stamp%/*}" && printf '%s\n' "$sum" >"$stamp"; fi
exit "$failed"
