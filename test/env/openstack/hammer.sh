#!/usr/bin/env bash
# A concurrent write load against the loopback OpenStack, shaped like the test suite's own: WORKERS
# clients at once, each doing ROUNDS rounds of what ostest.NewProject and its fixtures do. A round
# creates a project and a member user (Keystone), the project's first security group (which
# makes Neutron create the project's default group in the same request), two rules, a network, a
# subnet and a port, deletes them again, allows and denies an access rule on a share of the
# worker's own (Manila), creates and deletes a share type (admin), and removes the user and the
# project. Every request is counted; any HTTP error (or no answer) counts as a failure.
#
# Prints one summary line (requests, failures, "database is locked" lines the services logged
# meanwhile) and the failed requests, and exits 1 if anything failed. Needs a running cloud
# (up.sh) in $MANILA_SETUP_RUN/openstack; leaves nothing behind in it when it ends normally.
#
# Usage: hammer.sh [WORKERS [ROUNDS]]   (default 6 workers, 5 rounds each)
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

workers=${1:-6}
rounds=${2:-5}
[[ $workers =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ ]] || die "usage: $0 [WORKERS [ROUNDS]]"

state="$MANILA_SETUP_RUN/openstack"
[[ -s $state/seed.json ]] || die "no loopback OpenStack in $state: run test/env/openstack/up.sh"
keystone_url=$(jq -r .keystone_url "$state/seed.json")
neutron_url=$(jq -r .neutron_url "$state/seed.json")
manila_url=$(jq -r .manila_url "$state/seed.json")
# The fixed loopback credentials of up.sh.
ADMIN_PASSWORD=manila-setup-admin
MANILA_API_VERSION=2.65

work=$(mktemp -d "${TMPDIR:-/tmp}/manila-setup-hammer.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/poll"
tag="hammer-$$"

# Where each service's log ends now: what the services log from here on is this run's.
declare -A log_offset
for name in keystone neutron manila; do
  log_offset[$name]=$(stat -c %s "$state/logs/$name.log" 2>/dev/null || echo 0)
done

# call REC TOKEN METHOD URL [JSON] prints the response body; records "CODE METHOD URL" in REC and
# fails on an HTTP error or when there is no answer.
call() {
  local rec=$1 tok=$2 method=$3 url=$4 data=${5:-} out code
  local args=(-sS -m 120 -o "$rec.body" -w '%{http_code}' -X "$method" -H "X-Auth-Token: $tok"
    -H "X-OpenStack-Manila-API-Version: $MANILA_API_VERSION" -H 'Accept: application/json')
  [[ -n $data ]] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
  code=$(curl "${args[@]}" "$url" 2>/dev/null) || code=${code:-000}
  printf '%s %s %s\n' "$code" "$method" "${url#http://127.0.0.1:}" >>"$rec"
  out=$(cat "$rec.body" 2>/dev/null || true)
  if [[ $code != 2?? ]]; then
    printf '%s %s %s: %s\n' "$code" "$method" "${url#http://127.0.0.1:}" "${out:0:300}" >>"$rec.failed"
    return 1
  fi
  printf '%s' "$out"
}

# token REC USER PASSWORD PROJECT_ID prints a project-scoped token (PROJECT_ID "admin" means the
# admin project by name).
token() {
  local rec=$1 scope body hdrs code
  if [[ $4 == admin ]]; then
    scope='{"project": {"name": "admin", "domain": {"id": "default"}}}'
  else
    scope=$(jq -cn --arg p "$4" '{project: {id: $p}}')
  fi
  body=$(jq -cn --arg u "$2" --arg p "$3" --argjson s "$scope" '{auth: {
    identity: {methods: ["password"], password: {user: {name: $u, password: $p, domain: {id: "default"}}}},
    scope: $s}}')
  hdrs=$(curl -sS -m 120 -D - -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "$body" "$keystone_url/auth/tokens" 2>/dev/null) || true
  code=${hdrs##*$'\n'}
  printf '%s POST /v3/auth/tokens\n' "${code:-000}" >>"$rec"
  if [[ $code != 201 ]]; then
    printf '%s POST /v3/auth/tokens (user %s)\n' "${code:-000}" "$2" >>"$rec.failed"
    return 1
  fi
  awk 'tolower($1) == "x-subject-token:" { sub(/\r$/, "", $2); print $2 }' <<<"$hdrs"
}

# wait_share REC TOKEN ID STATUS polls a share until it has STATUS (error or 120 s: failure).
wait_share() {
  local rec=$1 tok=$2 id=$3 want=$4 st deadline=$((SECONDS + 120))
  while :; do
    st=$(call "$rec" "$tok" GET "$manila_url/v2/shares/$id" | jq -r .share.status) || return 1
    [[ $st == "$want" ]] && return 0
    if [[ $st == error ]] || ((SECONDS >= deadline)); then
      printf 'share %s is %s, want %s\n' "$id" "$st" "$want" >>"$rec.failed"
      return 1
    fi
    sleep 0.5
  done
}

# wait_rule REC TOKEN SHARE RULE polls an access rule until it is active.
wait_rule() {
  local rec=$1 tok=$2 share=$3 rule=$4 st deadline=$((SECONDS + 120))
  while :; do
    st=$(call "$rec" "$tok" GET "$manila_url/v2/share-access-rules/$rule" | jq -r .access.state) || return 1
    [[ $st == active ]] && return 0
    if [[ $st == error ]] || ((SECONDS >= deadline)); then
      printf 'access rule %s of share %s is %s\n' "$rule" "$share" "$st" >>"$rec.failed"
      return 1
    fi
    sleep 0.5
  done
}

# new_project REC ADMIN_TOKEN NAME MEMBER_ROLE prints "PROJECT_ID USER_ID PASSWORD".
new_project() {
  local rec=$1 adm=$2 name=$3 role=$4 pid uid pw
  pw="pw-$RANDOM$RANDOM"
  pid=$(call "$rec" "$adm" POST "$keystone_url/projects" \
    "$(jq -cn --arg n "$name" '{project: {name: $n, domain_id: "default"}}')" | jq -r .project.id) || return 1
  uid=$(call "$rec" "$adm" POST "$keystone_url/users" "$(jq -cn --arg n "$name" --arg p "$pw" --arg pr "$pid" \
    '{user: {name: $n, password: $p, domain_id: "default", default_project_id: $pr}}')" | jq -r .user.id) || return 1
  call "$rec" "$adm" PUT "$keystone_url/projects/$pid/users/$uid/roles/$role" >/dev/null || return 1
  printf '%s %s %s' "$pid" "$uid" "$pw"
}

# round REC ADMIN_TOKEN MEMBER_ROLE WORKER ROUND SHARE_TOKEN SHARE_ID: one round (see the top).
round() {
  local rec=$1 adm=$2 role=$3 w=$4 r=$5 stok=$6 share=$7
  local name="$tag-$w-$r" pid uid pw tok sg net sub port rule st
  read -r pid uid pw <<<"$(new_project "$rec" "$adm" "$name" "$role")" || return 1
  [[ -n $pid ]] || return 1
  tok=$(token "$rec" "$name" "$pw" "$pid") || return 1

  sg=$(call "$rec" "$tok" POST "$neutron_url/v2.0/security-groups" \
    "$(jq -cn --arg n "$name" '{security_group: {name: $n}}')" | jq -r .security_group.id) || return 1
  for port_nr in 2049 111; do
    call "$rec" "$tok" POST "$neutron_url/v2.0/security-group-rules" "$(jq -cn --arg sg "$sg" --argjson p "$port_nr" \
      '{security_group_rule: {security_group_id: $sg, direction: "ingress", ethertype: "IPv4",
        protocol: "tcp", port_range_min: $p, port_range_max: $p}}')" >/dev/null || return 1
  done
  net=$(call "$rec" "$tok" POST "$neutron_url/v2.0/networks" \
    "$(jq -cn --arg n "$name" '{network: {name: $n}}')" | jq -r .network.id) || return 1
  sub=$(call "$rec" "$tok" POST "$neutron_url/v2.0/subnets" "$(jq -cn --arg n "$name" --arg net "$net" \
    '{subnet: {name: $n, network_id: $net, cidr: "10.50.0.0/24", ip_version: 4}}')" | jq -r .subnet.id) || return 1
  port=$(call "$rec" "$tok" POST "$neutron_url/v2.0/ports" "$(jq -cn --arg n "$name" --arg net "$net" --arg sg "$sg" \
    '{port: {name: $n, network_id: $net, security_groups: [$sg], device_id: "1a1a1a1a-0000-4000-8000-000000000001"}}')" |
    jq -r .port.id) || return 1
  call "$rec" "$tok" DELETE "$neutron_url/v2.0/ports/$port" >/dev/null || return 1
  call "$rec" "$tok" DELETE "$neutron_url/v2.0/subnets/$sub" >/dev/null || return 1
  call "$rec" "$tok" DELETE "$neutron_url/v2.0/networks/$net" >/dev/null || return 1
  call "$rec" "$tok" DELETE "$neutron_url/v2.0/security-groups/$sg" >/dev/null || return 1

  rule=$(call "$rec" "$stok" POST "$manila_url/v2/shares/$share/action" \
    "$(jq -cn --arg ip "10.$((w % 250)).$((r % 250)).1" '{allow_access: {access_type: "ip", access_to: $ip, access_level: "rw"}}')" |
    jq -r .access.id) || return 1
  wait_rule "$rec" "$stok" "$share" "$rule" || return 1
  call "$rec" "$stok" POST "$manila_url/v2/shares/$share/action" \
    "$(jq -cn --arg id "$rule" '{deny_access: {access_id: $id}}')" >/dev/null || return 1

  st=$(call "$rec" "$adm" POST "$manila_url/v2/types" "$(jq -cn --arg n "$name" \
    '{share_type: {name: $n, "share_type_access:is_public": true, extra_specs: {driver_handles_share_servers: "False"}}}')" |
    jq -r .share_type.id) || return 1
  call "$rec" "$adm" DELETE "$manila_url/v2/types/$st" >/dev/null || return 1

  # The project's default security group (Neutron made it) goes with the project's resources.
  local dsg
  dsg=$(call "$rec" "$adm" GET "$neutron_url/v2.0/security-groups?project_id=$pid&name=default" |
    jq -r '.security_groups[0].id // empty') || return 1
  [[ -z $dsg ]] || call "$rec" "$adm" DELETE "$neutron_url/v2.0/security-groups/$dsg" >/dev/null || return 1
  call "$rec" "$adm" DELETE "$keystone_url/users/$uid" >/dev/null || return 1
  call "$rec" "$adm" DELETE "$keystone_url/projects/$pid" >/dev/null || return 1
}

# worker W: a project of its own with one share, then the rounds; a failed round is counted and
# the next one starts (so that one failure does not hide the others).
worker() {
  local w=$1 rec="$work/$1" adm role pid uid pw tok share r
  : >"$rec"
  adm=$(token "$rec" admin "$ADMIN_PASSWORD" admin) || return 0
  role=$(call "$rec" "$adm" GET "$keystone_url/roles?name=member" | jq -r '.roles[0].id') || return 0
  read -r pid uid pw <<<"$(new_project "$rec" "$adm" "$tag-$w" "$role")" || return 0
  tok=$(token "$rec" "$tag-$w" "$pw" "$pid") || return 0
  share=$(call "$rec" "$tok" POST "$manila_url/v2/shares" \
    "$(jq -cn --arg n "$tag-$w" '{share: {name: $n, share_proto: "NFS", size: 1, share_type: "default"}}')" |
    jq -r .share.id) || return 0
  if wait_share "$rec" "$tok" "$share" available; then
    for ((r = 0; r < rounds; r++)); do
      round "$rec" "$adm" "$role" "$w" "$r" "$tok" "$share" || echo "round $r failed" >>"$rec.rounds"
    done
  fi
  call "$rec" "$tok" DELETE "$manila_url/v2/shares/$share" >/dev/null || true
  local deadline=$((SECONDS + 120))
  while call "$work/poll/$w" "$tok" GET "$manila_url/v2/shares/$share" >/dev/null 2>&1 && ((SECONDS < deadline)); do
    sleep 0.5
  done
  call "$rec" "$adm" DELETE "$keystone_url/users/$uid" >/dev/null || true
  call "$rec" "$adm" DELETE "$keystone_url/projects/$pid" >/dev/null || true
}

start=$SECONDS
for ((w = 0; w < workers; w++)); do worker "$w" & done
wait

shopt -s nullglob
recs=("$work"/[0-9] "$work"/[0-9][0-9] "$work"/[0-9][0-9][0-9]) fails=("$work"/*.failed)
requests=$(cat "${recs[@]}" /dev/null | wc -l)
failed=$(cat "${fails[@]}" /dev/null | wc -l)
locked=0
for name in keystone neutron manila; do
  # One error is logged on several lines, all with the same time stamp and process id.
  n=$(tail -c +"$((log_offset[$name] + 1))" "$state/logs/$name.log" 2>/dev/null |
    { grep 'database is locked' || true; } | awk '{ print $1, $2, $3 }' | sort -u | wc -l)
  locked=$((locked + n))
done
printf 'hammer: %d workers x %d rounds in %ds: %d requests, %d failed; "database is locked" logged by the services: %d\n' \
  "$workers" "$rounds" "$((SECONDS - start))" "$requests" "$failed" "$locked"
if ((failed > 0)); then
  cat "${fails[@]}" | sort | uniq -c | sort -rn | head -n 20
  exit 1
fi
